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
    if (!p) cpu_fail(be, "backend_cpu.c: out of host memory allocating %zu bytes; reduce batch size or resolution.", bytes);
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

static void fill_table(sdt_backend *be)
{
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->upload = cpu_upload;
    be->download = cpu_download;
    be->zero = cpu_zero;
    be->synchronize = cpu_synchronize;
    be->destroy = cpu_destroy;
    be->convert = cpu_convert;
    be->axpy = cpu_axpy;
    be->scale = cpu_scale;
    be->transpose_forward = cpu_transpose_forward;
    be->transpose_backward = cpu_transpose_backward;
    be->count_nonfinite = cpu_count_nonfinite;
    be->embedding_forward = cpu_embedding_forward;
    be->embedding_backward = cpu_embedding_backward;
    be->layernorm_forward = cpu_layernorm_forward;
    be->layernorm_backward = cpu_layernorm_backward;
    be->groupnorm_forward = cpu_groupnorm_forward;
    be->groupnorm_backward = cpu_groupnorm_backward;
    be->linear_forward = cpu_linear_forward;
    be->linear_backward = cpu_linear_backward;
    be->conv2d_forward = cpu_conv2d_forward;
    be->conv2d_backward = cpu_conv2d_backward;
    be->attention_forward = cpu_attention_forward;
    be->attention_backward = cpu_attention_backward;
    be->softmax_forward = cpu_softmax_forward;
    be->softmax_backward = cpu_softmax_backward;
    be->activation_forward = cpu_activation_forward;
    be->activation_backward = cpu_activation_backward;
    be->geglu_forward = cpu_geglu_forward;
    be->geglu_backward = cpu_geglu_backward;
    be->add_forward = cpu_add_forward;
    be->add_channel_forward = cpu_add_channel_forward;
    be->add_channel_backward = cpu_add_channel_backward;
    be->concat_channels_forward = cpu_concat_channels_forward;
    be->concat_channels_backward = cpu_concat_channels_backward;
    be->upsample_nearest2x_forward = cpu_upsample_nearest2x_forward;
    be->upsample_nearest2x_backward = cpu_upsample_nearest2x_backward;
    be->dropout_forward = cpu_dropout_forward;
    be->dropout_backward = cpu_dropout_backward;
    be->timestep_embedding = cpu_timestep_embedding;
    be->mse_loss_forward = cpu_mse_loss_forward;
    be->mse_loss_backward = cpu_mse_loss_backward;
    be->sum_squares = cpu_sum_squares;
    be->unscale_check = cpu_unscale_check;
    be->adamw_update = cpu_adamw_update;
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
    ctx->parallel_min_work = CPU_PARALLEL_MIN_WORK;
    be->name = "cpu";
    be->device = SDT_DEVICE_CPU;
    be->native_bf16 = true; /* bf16 is stored for real and computed in f32 */
    be->ctx = ctx;
    fill_table(be);
    return be;
}
