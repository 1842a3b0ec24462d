/* test_comm_threads.c - the communicator contract (kernels/comm.h) on the ranks-as-threads double
 * (tests/common/thread_comm.h): sums in a fixed rank order, equal to one rank accumulating the
 * same shards in that order (the reference of docs/abi.md 3.16's deterministic data parallelism);
 * broadcast, flags and barrier; a rank failing mid-step, or one that never arrives, stops every
 * rank with one sentence naming it. */
#include <pthread.h>
#include <string.h>

#include "sdt_test.h"
#include "thread_comm.h"

#define N_VALUES 257
#define MAX_RANKS 3
#define STEPS 4

typedef struct rank_job {
    sdt_comm *comm;
    float grad[N_VALUES]; /* in: this rank's shard gradient; out: the sum */
    int64_t flags[2];     /* in: overflow flag, sample count; out: sums */
    float broadcast[4];   /* rank 0's values reach every rank */
    int steps_done;       /* collectives that succeeded */
    int stop_after;       /* -1: run STEPS steps; k: the thread returns before step k (never arrives) */
    bool failed;
    sdt_error error;
} rank_job;

/* The shard of micro-batch k: values of mixed magnitude so that the order of a sum shows in its bits. */
static void shard_gradient(uint64_t seed, int k, float *g)
{
    sdt_test_rng rng = {seed + 977u * (uint64_t)k};
    for (int i = 0; i < N_VALUES; i++) {
        double u = (double)(sdt_test_next(&rng) >> 11) / 9007199254740992.0;
        double scale = (i % 3 == 0) ? 1e4 : (i % 3 == 1) ? 1.0 : 1e-4;
        g[i] = (float)((u - 0.5) * scale);
    }
}

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    for (int step = 0; step < STEPS; step++) {
        if (j->stop_after == step) return NULL;
        if (!j->comm->all_reduce_f32(j->comm, j->grad, N_VALUES, &j->error) ||
            !j->comm->all_reduce_i64(j->comm, j->flags, 2, &j->error) ||
            !j->comm->broadcast(j->comm, j->broadcast, sizeof j->broadcast, 0, &j->error) ||
            !j->comm->barrier(j->comm, &j->error)) {
            j->failed = true;
            return NULL;
        }
        j->steps_done++;
    }
    return NULL;
}

/* Runs world ranks, rank r starting from shard r; the same sums every step after the first. */
static thread_comm_world *run_world(int world, uint64_t seed, rank_job *jobs, int timeout_ms)
{
    sdt_comm *comms[MAX_RANKS];
    thread_comm_world *w = thread_comm_world_new(world, timeout_ms, comms);
    for (int r = 0; r < world; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].comm = comms[r];
        jobs[r].stop_after = -1;
        shard_gradient(seed, r, jobs[r].grad);
        jobs[r].flags[0] = r == world - 1; /* the last rank overflowed */
        jobs[r].flags[1] = 2;
        for (int i = 0; i < 4; i++) jobs[r].broadcast[i] = (float)(r * 10 + i);
    }
    return w;
}

static void start_join(int world, rank_job *jobs)
{
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < world; r++) pthread_create(&threads[r], NULL, rank_main, &jobs[r]);
    for (int r = 0; r < world; r++) pthread_join(threads[r], NULL);
}

static void test_fixed_order_sum(uint64_t seed)
{
    for (int world = 2; world <= MAX_RANKS; world++) {
        /* The reference: one rank accumulating the world's shards in rank order (grad_accum = world). */
        float one_rank[N_VALUES] = {0}, shard[N_VALUES], reversed[N_VALUES] = {0};
        for (int k = 0; k < world; k++) {
            shard_gradient(seed, k, shard);
            for (int i = 0; i < N_VALUES; i++) one_rank[i] += shard[i];
        }
        for (int k = world - 1; k >= 0; k--) {
            shard_gradient(seed, k, shard);
            for (int i = 0; i < N_VALUES; i++) reversed[i] += shard[i];
        }
        rank_job jobs[MAX_RANKS];
        thread_comm_world *w = run_world(world, seed, jobs, 60000);
        /* One step only: later steps sum sums. */
        for (int r = 0; r < world; r++) jobs[r].stop_after = 1;
        start_join(world, jobs);
        for (int r = 0; r < world; r++) {
            CHECK(!jobs[r].failed && jobs[r].steps_done == 1, "world %d rank %d: %s", world, r, jobs[r].error.message);
            CHECK(memcmp(jobs[r].grad, one_rank, sizeof one_rank) == 0,
                  "world %d rank %d: the sum has the bytes of one rank accumulating the shards in rank order", world,
                  r);
            CHECK(jobs[r].flags[0] == 1 && jobs[r].flags[1] == 2 * world,
                  "world %d rank %d: one rank's overflow flag reaches every rank (%lld, %lld)", world, r,
                  (long long)jobs[r].flags[0], (long long)jobs[r].flags[1]);
            CHECK(jobs[r].broadcast[0] == 0.0f && jobs[r].broadcast[3] == 3.0f, "world %d rank %d: rank 0's values",
                  world, r);
        }
        /* The check can fail: from three terms on, the other order gives other bytes for these values
         * (two terms commute exactly). */
        if (world >= 3)
            CHECK(memcmp(reversed, one_rank, sizeof one_rank) != 0, "world %d: the order of the sum shows in its bytes",
                  world);
        thread_comm_world_free(w);
    }
}

static void test_rank_fails_mid_step(uint64_t seed)
{
    rank_job jobs[MAX_RANKS];
    thread_comm_world *w = run_world(3, seed, jobs, 60000);
    /* Rank 1 fails entering its 6th collective: step 1's all-reduce of the flags. */
    thread_comm_world_fail_at(w, 1, 5, "CUDA out of memory in the backward");
    start_join(3, jobs);
    for (int r = 0; r < 3; r++) {
        CHECK(jobs[r].failed && jobs[r].steps_done == 1, "rank %d stopped in step 1 (%d steps done)", r,
              jobs[r].steps_done);
        CHECK(jobs[r].error.code == SDT_ERR_DEVICE && strstr(jobs[r].error.message, "rank 1 failed") &&
                  strstr(jobs[r].error.message, "CUDA out of memory in the backward"),
              "rank %d's sentence names rank 1 and the cause: %s", r, jobs[r].error.message);
    }
    /* A failed communicator stays failed. */
    sdt_error again;
    CHECK(!jobs[0].comm->barrier(jobs[0].comm, &again) && strstr(again.message, "rank 1 failed"), "stays failed");
    thread_comm_world_free(w);
}

static void test_rank_never_arrives(uint64_t seed)
{
    rank_job jobs[MAX_RANKS];
    thread_comm_world *w = run_world(2, seed, jobs, 200);
    jobs[1].stop_after = 2; /* rank 1's thread ends before step 2: a dead rank */
    start_join(2, jobs);
    CHECK(!jobs[1].failed && jobs[1].steps_done == 2, "rank 1 did two steps and left");
    CHECK(jobs[0].failed && jobs[0].steps_done == 2 && strstr(jobs[0].error.message, "rank 1 did not reach"),
          "rank 0 stops after the timeout, naming rank 1: %s", jobs[0].error.message);
    thread_comm_world_free(w);
}

static void test_abort(uint64_t seed)
{
    rank_job jobs[MAX_RANKS];
    thread_comm_world *w = run_world(2, seed, jobs, 60000);
    jobs[0].comm->abort(jobs[0].comm, "interrupted by the host");
    start_join(2, jobs);
    for (int r = 0; r < 2; r++)
        CHECK(jobs[r].failed && jobs[r].steps_done == 0 && strstr(jobs[r].error.message, "rank 0 failed: interrupted"),
              "rank %d: %s", r, jobs[r].error.message);
    thread_comm_world_free(w);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("comm_threads");
    uint64_t seed = sdt_test_next(&rng);
    test_fixed_order_sum(seed);
    test_rank_fails_mid_step(seed);
    test_rank_never_arrives(seed);
    test_abort(seed);
    return sdt_test_finish("comm_threads");
}
