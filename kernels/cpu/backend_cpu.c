/* backend_cpu.c - the CPU backend: host memory functions and the dispatch table. */
#include "cpu_context.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Same alignment as the arena, so SIMD loads are aligned wherever a buffer came from. */
#define CPU_ALLOC_ALIGN ((size_t)256)

void *cpu_alloc(sdt_backend *be, size_t bytes)
{
    size_t rounded = (bytes + CPU_ALLOC_ALIGN - 1) & ~(CPU_ALLOC_ALIGN - 1);
    if (rounded == 0) rounded = CPU_ALLOC_ALIGN;
    void *p = aligned_alloc(CPU_ALLOC_ALIGN, rounded);
    if (!p)
        cpu_fail(be, SDT_ERR_OUT_OF_MEMORY,
                 "backend_cpu.c: out of host memory allocating %zu bytes; reduce batch size or resolution.", bytes);
    return p;
}

void cpu_free(sdt_backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

int cpu_upload(sdt_backend *be, void *dst, const void *host_src, size_t bytes)
{
    (void)be;
    if (bytes) memcpy(dst, host_src, bytes);
    return 0;
}

int cpu_download(sdt_backend *be, void *host_dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes) memcpy(host_dst, src, bytes);
    return 0;
}

int cpu_zero(sdt_backend *be, sdt_tensor *t)
{
    (void)be;
    size_t n = sdt_tensor_nbytes(t);
    if (n) memset(t->data, 0, n); /* all-zero bits are +0 in every dtype */
    return 0;
}

int cpu_synchronize(sdt_backend *be)
{
    (void)be; /* every CPU op has finished when it returns */
    return 0;
}

void cpu_destroy(sdt_backend *be)
{
    if (!be) return;
    cpu_scratch_release(be);
    free(be->ctx);
    free(be);
}

/* Host memory is the process's: the CPU backend does not count what it allocates. */
int cpu_memory_stats(sdt_backend *be, sdt_memory_stats *stats, bool reset_peak)
{
    (void)be;
    (void)reset_peak;
    memset(stats, 0, sizeof *stats);
    return 0;
}

static void fill_table(sdt_backend *be)
{
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->destroy = cpu_destroy;
    be->release_scratch = cpu_scratch_release;
    sdt_backend_ops cpu_ops = {
#define SDT_CPU_OP_ENTRY(name, params, args) .name = cpu_##name,
        SDT_BACKEND_OPS(SDT_CPU_OP_ENTRY)
#undef SDT_CPU_OP_ENTRY
    };
    cpu_channels_last_ops(&cpu_ops);
    sdt_backend_set_ops(be, &cpu_ops);
}

sdt_backend *sdt_backend_cpu_create(int threads)
{
    sdt_backend *be = calloc(1, sizeof *be);
    cpu_context *ctx = calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return NULL;
    }
    ctx->threads = threads > 0 ? threads : omp_get_max_threads();
    be->name = "cpu";
    be->device = SDT_DEVICE_CPU;
    be->native_bf16 = true;   /* bf16 is stored for real and computed in f32 */
    be->deterministic = true; /* always: every CPU op sums in a fixed order */
    be->ctx = ctx;
    fill_table(be);
    return be;
}
