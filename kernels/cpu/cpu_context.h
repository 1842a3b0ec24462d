/* cpu_context.h - the CPU backend's private state (be->ctx) and small helpers for ops.
 *
 * Everything a CPU op needs beyond its arguments lives here, per backend, so two
 * backends (e.g. two plugin instances) never share scratch or thread settings.
 */
#ifndef SDT_KERNELS_CPU_CONTEXT_H
#define SDT_KERNELS_CPU_CONTEXT_H

#include "cpu_ops.h"

/* Default for cpu_context.parallel_min_work, in elements touched by one loop. */
#define CPU_PARALLEL_MIN_WORK ((int64_t)32768)

typedef struct cpu_scratch {
    float *data;
    size_t capacity; /* in floats */
} cpu_scratch;

typedef struct cpu_context {
    int threads; /* used in every num_threads clause; never set globally */
    /* Loops smaller than this run on one thread (CPU_PARALLEL_MIN_WORK; tests set 0 so
     * odd shapes run threaded too). Only the last bits of double reductions depend on it. */
    int64_t parallel_min_work;
    cpu_scratch scratch[SDT_CPU_SCRATCH_SLOTS];
} cpu_context;

/* Thread count for `#pragma omp parallel for num_threads(cpu_threads(be))`. */
static inline int cpu_threads(const sdt_backend *be)
{
    return ((const cpu_context *)be->ctx)->threads;
}

/* Thread count for a loop over `work` elements: 1 below ctx->parallel_min_work, where waking
 * the team costs more than the loop, else cpu_threads(). */
static inline int cpu_threads_for(const sdt_backend *be, int64_t work)
{
    const cpu_context *ctx = be->ctx;
    return work < ctx->parallel_min_work ? 1 : ctx->threads;
}

/* Frees every scratch slot (backend destroy). */
void cpu_scratch_release(sdt_backend *be);

#endif
