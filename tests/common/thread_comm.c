/* thread_comm.c - see thread_comm.h. */
#include "thread_comm.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_F32, OP_I64, OP_F64, OP_BCAST, OP_BARRIER };

struct thread_comm_world {
    int world_size, timeout_ms;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int64_t generation; /* completed collectives */
    int arrived;
    void **bufs; /* [world_size] this collective's buffer of each rank */
    bool *here;  /* [world_size] arrived at this collective */
    int *calls;  /* [world_size] collectives entered */
    int fail_rank, fail_call;
    char fail_why[200];
    bool failed;
    char why[512];
    sdt_comm *handles; /* [world_size] */
};

static void fail_locked(thread_comm_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_locked(thread_comm_world *w, const char *fmt, ...)
{
    if (w->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    w->failed = true;
    pthread_cond_broadcast(&w->changed);
}

/* The last rank to arrive does the collective over every rank's buffer, in rank order. */
static void run_collective(thread_comm_world *w, int op, size_t count, int root)
{
    int n = w->world_size;
    if (op == OP_F32) {
        float *sum = malloc(count * sizeof *sum);
        if (!sum) {
            fail_locked(w, "the test double ran out of memory");
            return;
        }
        memcpy(sum, w->bufs[0], count * sizeof *sum);
        for (int r = 1; r < n; r++)
            for (size_t i = 0; i < count; i++) sum[i] += ((const float *)w->bufs[r])[i];
        for (int r = 0; r < n; r++) memcpy(w->bufs[r], sum, count * sizeof *sum);
        free(sum);
    } else if (op == OP_I64) {
        int64_t sum[64] = {0};
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < count; i++) sum[i] += ((const int64_t *)w->bufs[r])[i];
        for (int r = 0; r < n; r++) memcpy(w->bufs[r], sum, count * sizeof *sum);
    } else if (op == OP_F64) {
        double sum[64];
        memcpy(sum, w->bufs[0], count * sizeof *sum);
        for (int r = 1; r < n; r++)
            for (size_t i = 0; i < count; i++) sum[i] += ((const double *)w->bufs[r])[i];
        for (int r = 0; r < n; r++) memcpy(w->bufs[r], sum, count * sizeof *sum);
    } else if (op == OP_BCAST) {
        for (int r = 0; r < n; r++)
            if (r != root) memcpy(w->bufs[r], w->bufs[root], count);
    }
}

static bool collective(sdt_comm *c, int op, void *buf, size_t count, int root, sdt_error *error)
{
    thread_comm_world *w = c->impl;
    if ((op == OP_I64 || op == OP_F64) && count > SDT_COMM_SMALL_COUNT)
        return sdt_fail(error, SDT_ERR_INTERNAL, "a small all-reduce takes at most %d values", SDT_COMM_SMALL_COUNT);
    pthread_mutex_lock(&w->lock);
    int call = w->calls[c->rank]++;
    if (!w->failed && c->rank == w->fail_rank && call == w->fail_call)
        fail_locked(w, "rank %d failed: %s; every rank stops.", c->rank, w->fail_why);
    if (w->failed) {
        bool ok = sdt_fail(error, SDT_ERR_DEVICE, "%s", w->why);
        pthread_mutex_unlock(&w->lock);
        return ok;
    }
    int64_t gen = w->generation;
    w->bufs[c->rank] = buf;
    w->here[c->rank] = true;
    if (++w->arrived == w->world_size) {
        run_collective(w, op, count, root);
        w->arrived = 0;
        memset(w->here, 0, (size_t)w->world_size * sizeof *w->here);
        w->generation++;
        pthread_cond_broadcast(&w->changed);
    } else {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += w->timeout_ms / 1000;
        deadline.tv_nsec += (long)(w->timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
        while (w->generation == gen && !w->failed) {
            if (pthread_cond_timedwait(&w->changed, &w->lock, &deadline) == ETIMEDOUT && w->generation == gen &&
                !w->failed) {
                int missing = -1;
                for (int r = 0; r < w->world_size && missing < 0; r++)
                    if (!w->here[r]) missing = r;
                fail_locked(
                    w, "rank %d did not reach the collective within %d ms (it stopped or hangs); every rank stops.",
                    missing, w->timeout_ms);
            }
        }
    }
    bool ok = w->generation != gen || !w->failed ? true : sdt_fail(error, SDT_ERR_DEVICE, "%s", w->why);
    pthread_mutex_unlock(&w->lock);
    return ok;
}

static bool tc_all_reduce_f32(sdt_comm *c, float *buf, size_t count, sdt_error *error)
{
    return collective(c, OP_F32, buf, count, 0, error);
}
static bool tc_all_reduce_i64(sdt_comm *c, int64_t *buf, size_t count, sdt_error *error)
{
    return collective(c, OP_I64, buf, count, 0, error);
}
static bool tc_all_reduce_f64(sdt_comm *c, double *buf, size_t count, sdt_error *error)
{
    return collective(c, OP_F64, buf, count, 0, error);
}
static bool tc_broadcast(sdt_comm *c, void *buf, size_t bytes, int root, sdt_error *error)
{
    return collective(c, OP_BCAST, buf, bytes, root, error);
}
static bool tc_barrier(sdt_comm *c, sdt_error *error)
{
    return collective(c, OP_BARRIER, NULL, 0, 0, error);
}
static void tc_abort(sdt_comm *c, const char *why)
{
    thread_comm_world *w = c->impl;
    pthread_mutex_lock(&w->lock);
    fail_locked(w, "rank %d failed: %s; every rank stops.", c->rank, why ? why : "");
    pthread_mutex_unlock(&w->lock);
}
static void tc_destroy(sdt_comm *c)
{
    (void)c; /* the world owns the handles */
}

thread_comm_world *thread_comm_world_new(int world_size, int timeout_ms, sdt_comm **comms)
{
    thread_comm_world *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->world_size = world_size;
    w->timeout_ms = timeout_ms;
    w->fail_rank = -1;
    w->fail_call = -1;
    w->bufs = calloc((size_t)world_size, sizeof *w->bufs);
    w->here = calloc((size_t)world_size, sizeof *w->here);
    w->calls = calloc((size_t)world_size, sizeof *w->calls);
    w->handles = calloc((size_t)world_size, sizeof *w->handles);
    if (!w->bufs || !w->here || !w->calls || !w->handles) {
        thread_comm_world_free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->changed, NULL);
    for (int r = 0; r < world_size; r++) {
        sdt_comm *c = &w->handles[r];
        c->rank = r;
        c->world_size = world_size;
        c->all_reduce_f32 = tc_all_reduce_f32;
        c->all_reduce_i64 = tc_all_reduce_i64;
        c->all_reduce_f64 = tc_all_reduce_f64;
        c->broadcast = tc_broadcast;
        c->barrier = tc_barrier;
        c->abort = tc_abort;
        c->destroy = tc_destroy;
        c->impl = w;
        comms[r] = c;
    }
    return w;
}

void thread_comm_world_fail_at(thread_comm_world *w, int rank, int call, const char *why)
{
    pthread_mutex_lock(&w->lock);
    w->fail_rank = rank;
    w->fail_call = call;
    snprintf(w->fail_why, sizeof w->fail_why, "%s", why ? why : "injected failure");
    pthread_mutex_unlock(&w->lock);
}

void thread_comm_world_free(thread_comm_world *w)
{
    if (!w) return;
    if (w->bufs && w->here && w->calls && w->handles) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->changed);
    }
    free(w->bufs);
    free(w->here);
    free(w->calls);
    free(w->handles);
    free(w);
}
