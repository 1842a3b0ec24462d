/* test_step_engine_ranks.c - the step engine's data parallelism (train/step_engine.h, docs/abi.md
 * 3.16) with the ranks-as-threads communicator (tests/common/thread_comm.h) on the CPU backend:
 * world size 2 and 3, each rank one micro-batch (its shard), give every rank the same bytes as one
 * rank accumulating the same shards in rank order (grad_accum = world size); with fp16's scaler and
 * clipping by norm, so both see the summed values. One rank's overflow skips the step on every rank
 * (and in the reference), and a rank failing mid-step stops every rank with one sentence naming it. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "sdt_test.h"
#include "thread_comm.h"
#include "train/step_engine.h"

#define N_VALUES 67
#define MAX_RANKS 3
#define STEPS 5

typedef struct rank_run {
    int rank, world, accum; /* micro-batches this rank accumulates per step */
    uint64_t seed;
    int64_t inf_step; /* this rank's gradient gets an inf at this step number (0: never) */
    sdt_comm *comm;   /* NULL: one rank */
    sdt_backend *be;
    sdt_step_engine engine;
    float param[N_VALUES], grad[N_VALUES];
    int64_t shape;
    sdt_tensor pt, gt;
    int64_t step; /* steps done */
    double losses[STEPS];
    bool ok;
    sdt_error error;
} rank_run;

/* Micro-batch k (global, within the step) of step s: gradients of mixed magnitude, so the order of
 * a sum shows in its bits, and a loss. */
static void shard(uint64_t seed, int64_t s, int k, float *g, double *loss)
{
    sdt_test_rng rng = {seed + 1000003u * (uint64_t)s + 977u * (uint64_t)k};
    for (int i = 0; i < N_VALUES; i++) {
        double scale = (i % 3 == 0) ? 30.0 : (i % 3 == 1) ? 1.0 : 1e-3;
        g[i] = (float)((sdt_test_uniform(&rng) - 0.5) * scale);
    }
    *loss = 0.1 + sdt_test_uniform(&rng);
}

static bool accumulate(void *user, float scale, double *loss, sdt_error *error)
{
    rank_run *r = user;
    *loss = 0;
    /* every micro-batch of the global step weighs 1 / (world x accum), as its share of the mean */
    float share = scale / (float)(r->world * r->accum);
    for (int m = 0; m < r->accum; m++) {
        float g[N_VALUES];
        double l;
        shard(r->seed, r->step, r->rank * r->accum + m, g, &l);
        for (int i = 0; i < N_VALUES; i++) r->grad[i] += share * g[i];
        double scaled; /* the scaler's bookkeeping, as the job's accumulate does it */
        if (r->engine.scaler && sdt_scaler_scale_loss(r->engine.scaler, l, 1, &scaled, error) != SDT_CORE_OK)
            return false;
        sdt_optimizer_note_backward(r->engine.groups[0].opt, scale);
        *loss += l / r->accum;
    }
    return true;
}

static bool use_fp32(void *user, sdt_error *error)
{
    (void)user, (void)error;
    return true;
}
static void explain(void *user, int64_t step, char *why, size_t size)
{
    (void)user, (void)step;
    snprintf(why, size, "test");
}

static void rank_init(rank_run *r, int rank, int world, int accum, uint64_t seed, sdt_comm *comm)
{
    memset(r, 0, sizeof *r);
    r->rank = rank, r->world = world, r->accum = accum, r->seed = seed, r->comm = comm;
    r->be = sdt_backend_cpu_create(1);
    sdt_test_rng rng = {seed};
    for (int i = 0; i < N_VALUES; i++) r->param[i] = (float)(sdt_test_uniform(&rng) - 0.5);
    r->shape = N_VALUES;
    r->pt = sdt_tensor_make(r->param, SDT_F32, SDT_DEVICE_CPU, 1, &r->shape);
    r->gt = sdt_tensor_make(r->grad, SDT_F32, SDT_DEVICE_CPU, 1, &r->shape);
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    sdt_optimizer *opt = sdt_optimizer_create(r->be, "embedding", &hp, &r->error);
    CHECK(opt && sdt_optimizer_add_param(opt, "rows", &r->pt, &r->gt, true, &r->error) == SDT_CORE_OK, "optimizer: %s",
          r->error.message);
    sdt_param_group g = {.name = "embedding",
                         .opt = opt,
                         .lr_text = "0.01",
                         .lr_field = "learn_rate",
                         .clip_mode = SDT_CLIP_NORM,
                         .clip_text = "0.5",
                         .clip_field = "clip_value"};
    int64_t end;
    CHECK(sdt_step_engine_add_group(&r->engine, &g, &r->error) &&
              sdt_step_engine_parse_schedules(&r->engine, 0, STEPS, &end, &r->error) &&
              sdt_step_engine_setup(&r->engine, r->be, true, true, 1024.0, 0.5, 10, &r->error),
          "engine: %s", r->error.message);
    r->engine.hooks = (sdt_step_hooks){r, accumulate, use_fp32, explain, NULL, NULL};
    r->engine.comm = comm;
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    r->ok = true;
    if (r->inf_step) {
        r->engine.inject_inf_group = r->engine.groups[0].name;
        r->engine.inject_inf_step = r->inf_step;
    }
    for (; r->step < STEPS; r->step++) {
        sdt_step_result res;
        if (!sdt_step_engine_step(&r->engine, r->step, &res, &r->error)) {
            r->ok = false;
            return NULL;
        }
        r->losses[r->step] = res.loss;
    }
    return NULL;
}

static void rank_free(rank_run *r)
{
    sdt_step_engine_free(&r->engine);
    r->be->destroy(r->be);
}

/* world ranks of accum 1 against one rank of accum world; inf_rank's gradient (or the reference's
 * when inf_rank is 0) gets an inf at step inf_step. */
static void compare(int world, uint64_t seed, int inf_rank, int64_t inf_step)
{
    static rank_run ref, ranks[MAX_RANKS];
    rank_init(&ref, 0, 1, world, seed, NULL);
    ref.inf_step = inf_step;
    rank_main(&ref);
    CHECK(ref.ok, "the reference ran: %s", ref.error.message);

    sdt_comm *comms[MAX_RANKS];
    thread_comm_world *w = thread_comm_world_new(world, 60000, comms);
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        rank_init(&ranks[r], r, world, 1, seed, comms[r]);
        ranks[r].inf_step = r == inf_rank ? inf_step : 0;
    }
    for (int r = 0; r < world; r++) pthread_create(&threads[r], NULL, rank_main, &ranks[r]);
    for (int r = 0; r < world; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < world; r++) {
        CHECK(ranks[r].ok, "world %d rank %d ran: %s", world, r, ranks[r].error.message);
        CHECK(memcmp(ranks[r].param, ref.param, sizeof ref.param) == 0,
              "world %d rank %d: the trained values have the reference's bytes (inf at step %lld)", world, r,
              (long long)inf_step);
        CHECK(ranks[r].engine.skipped == ref.engine.skipped &&
                  sdt_scaler_get_scale(ranks[r].engine.scaler) == sdt_scaler_get_scale(ref.engine.scaler),
              "world %d rank %d: skipped %lld (reference %lld), the same loss scale", world, r,
              (long long)ranks[r].engine.skipped, (long long)ref.engine.skipped);
        for (int s = 0; s < STEPS; s++)
            CHECK(fabs(ranks[r].losses[s] - ref.losses[s]) <= 1e-12 * fabs(ref.losses[s]),
                  "world %d rank %d step %d: the logged loss is the global mean (%.17g vs %.17g)", world, r, s,
                  ranks[r].losses[s], ref.losses[s]);
    }
    if (inf_step) CHECK(ref.engine.skipped == 1, "the overflow skipped one step");
    /* The check can fail: the trained values moved, and the shards' order shows in their sum. */
    float start[N_VALUES];
    sdt_test_rng rng = {seed};
    for (int i = 0; i < N_VALUES; i++) start[i] = (float)(sdt_test_uniform(&rng) - 0.5);
    CHECK(memcmp(start, ref.param, sizeof start) != 0, "the values trained");
    for (int r = 0; r < world; r++) rank_free(&ranks[r]);
    rank_free(&ref);
    thread_comm_world_free(w);
}

static void test_rank_fails(uint64_t seed)
{
    static rank_run ranks[MAX_RANKS];
    sdt_comm *comms[MAX_RANKS];
    thread_comm_world *w = thread_comm_world_new(3, 60000, comms);
    /* 3 collectives per step (the gradient, the loss, the flag): rank 2 fails in step 2's first */
    thread_comm_world_fail_at(w, 2, 6, "its backward ran out of memory");
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < 3; r++) rank_init(&ranks[r], r, 3, 1, seed, comms[r]);
    for (int r = 0; r < 3; r++) pthread_create(&threads[r], NULL, rank_main, &ranks[r]);
    for (int r = 0; r < 3; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < 3; r++)
        CHECK(!ranks[r].ok && ranks[r].step == 2 && ranks[r].error.code == SDT_ERR_DEVICE &&
                  strstr(ranks[r].error.message, "summing the embedding gradients over the ranks") &&
                  strstr(ranks[r].error.message, "rank 2 failed: its backward ran out of memory"),
              "rank %d stops in step 2 with one sentence naming rank 2 and the cause: %s", r, ranks[r].error.message);
    for (int r = 0; r < 3; r++) rank_free(&ranks[r]);
    thread_comm_world_free(w);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("step_engine_ranks");
    uint64_t seed = sdt_test_next(&rng);
    compare(2, seed, -1, 0);
    compare(3, seed, -1, 0);
    compare(3, seed, 1, 3); /* rank 1 overflows at step 3: every rank skips it, as the reference does */
    test_rank_fails(seed);
    return sdt_test_finish("step_engine_ranks");
}
