/* cpu_context.h - the CPU backend's private state (be->ctx) and small helpers for ops.
 *
 * Everything a CPU op needs beyond its arguments lives here, per backend, so two
 * backends (e.g. two plugin instances) never share scratch or thread settings.
 */
#ifndef SDT_KERNELS_CPU_CONTEXT_H
#define SDT_KERNELS_CPU_CONTEXT_H

#include "cpu_ops.h"

/* Work below which an op family runs on one thread (a one-thread team, which needs no
 * worker), because waking the second thread and meeting it at the barrier costs more
 * than it saves. Measured (bench/NOTES.md run 35) on the 2-core dev VM with a throwaway program
 * timing each size at 1 thread and split over 2 OpenMP threads, medians of 41 interleaved
 * repetitions, in the repetitions where the peer thread was not descheduled:
 * - elementwise (a loop touching `work` floats, a*b+c): 8192 elements 0.82-0.84x of 1 thread's
 *   time, 32768 0.56-0.60x, 131072 0.52-0.59x. Row loops (norms, softmax, attention heads,
 *   im2col) count their elements against it too: their cost per element is at least this one's.
 *   Kept at 32768 (not 8192): the double reductions' last bits depend on it (cpu_context).
 * - GEMM (cpu_sgemm's two panels): 64x128x32 = 262144 multiply-adds 1.19-1.22x (slower: the
 *   old rule split it), 64x256x64 = 1048576 0.69-0.80x, 64x256x144 0.59-0.75x. */
#define CPU_ELEMENTWISE_MIN_WORK ((int64_t)32768) /* floats one loop touches */
#define CPU_GEMM_MIN_MACS ((int64_t)1 << 20)      /* m * n * k of one product */

typedef struct cpu_scratch {
    float *data;
    size_t capacity; /* in floats */
} cpu_scratch;

typedef struct cpu_context {
    int threads; /* used in every num_threads clause; never set globally */
    /* Tests set it so odd little shapes run threaded too; otherwise work under the family's
     * threshold (above) runs on one thread. Only the last bits of double reductions depend on it. */
    bool thread_small_work;
    cpu_scratch scratch[SDT_CPU_SCRATCH_SLOTS];
} cpu_context;

/* Thread count for `#pragma omp parallel for num_threads(cpu_threads(be))`. */
static inline int cpu_threads(const sdt_backend *be)
{
    return ((const cpu_context *)be->ctx)->threads;
}

/* Thread count for an op of `work` units of its family's measure: 1 below `min_work` (one of the
 * thresholds above), else cpu_threads(). */
static inline int cpu_threads_over(const sdt_backend *be, int64_t work, int64_t min_work)
{
    const cpu_context *ctx = be->ctx;
    return work < min_work && !ctx->thread_small_work ? 1 : ctx->threads;
}

/* Thread count for a loop over `work` elements (CPU_ELEMENTWISE_MIN_WORK). */
static inline int cpu_threads_for(const sdt_backend *be, int64_t work)
{
    return cpu_threads_over(be, work, CPU_ELEMENTWISE_MIN_WORK);
}

/* Frees every scratch slot (backend destroy). */
void cpu_scratch_release(sdt_backend *be);

#endif
