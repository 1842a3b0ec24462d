/* cpu_context.h - the CPU backend's private state (be->ctx) and small helpers for ops.
 *
 * Everything a CPU op needs beyond its arguments lives here, per backend, so two
 * backends (e.g. two plugin instances) never share scratch or thread settings.
 */
#ifndef SDT_KERNELS_CPU_CONTEXT_H
#define SDT_KERNELS_CPU_CONTEXT_H

#include "cpu_ops.h"

typedef struct cpu_scratch {
    float *data;
    size_t capacity; /* in floats */
} cpu_scratch;

typedef struct cpu_context {
    int threads; /* used in every num_threads clause; never set globally */
    cpu_scratch scratch[SDT_CPU_SCRATCH_SLOTS];
} cpu_context;

/* Thread count for `#pragma omp parallel for num_threads(cpu_threads(be))`. */
static inline int cpu_threads(const sdt_backend *be)
{
    return ((const cpu_context *)be->ctx)->threads;
}

/* Frees every scratch slot (backend destroy). */
void cpu_scratch_release(sdt_backend *be);

/* Argument checks shared by ops: each returns 0 or cpu_fail()s with a sentence naming op and field. */
int cpu_check_tensor(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t);
int cpu_check_same_numel(sdt_backend *be, const char *op, const char *field_a, const sdt_tensor *a,
                         const char *field_b, const sdt_tensor *b);
int cpu_check_f32(sdt_backend *be, const char *op, const char *field, const sdt_tensor *t);

#endif
