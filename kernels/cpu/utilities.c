/* utilities.c - dtype conversion, axpy, scale, batched transpose and non-finite counting. */
#include "cpu_context.h"

#include <math.h>
#include <string.h>

/* Square tile for the transpose: 32x32 floats (4 KiB) keeps both sides in L1. */
#define TRANSPOSE_TILE 32

int cpu_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src)
{
    int64_t n = sdt_tensor_numel(src);
    if (n == 0) return 0;
    const float *s = cpu_read_f32(be, src, 0);
    float *d = cpu_write_begin(be, dst, 1, false);
    if (!s || !d) return -1;
    if (d != s) memcpy(d, s, (size_t)n * sizeof(float));
    cpu_write_end(be, dst, d);
    return 0;
}

int cpu_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src)
{
    int64_t n = sdt_tensor_numel(src);
    if (n == 0) return 0;
    const float *s = cpu_read_f32(be, src, 0);
    float *d = cpu_write_begin(be, dst, 1, true);
    if (!s || !d) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) d[i] += alpha * s[i];
    cpu_write_end(be, dst, d);
    return 0;
}

int cpu_scale(sdt_backend *be, sdt_tensor *x, float alpha)
{
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    float *d = cpu_write_begin(be, x, 0, true);
    if (!d) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) d[i] *= alpha;
    cpu_write_end(be, x, d);
    return 0;
}

/* Reads t (2 dims or more) as [B, M, N]: 2-d is [1, d0, d1]; 3-d and more is [d0, d1, product
 * of the rest] (so an NCHW image is [B, C, H*W]). */
static void batched_matrix_dims(const sdt_tensor *t, int64_t dims[3])
{
    dims[0] = t->ndim == 2 ? 1 : t->shape[0];
    dims[1] = t->ndim == 2 ? t->shape[0] : t->shape[1];
    int64_t outer = dims[0] * dims[1];
    dims[2] = outer > 0 ? sdt_tensor_numel(t) / outer : 0;
}

/* dst[b, j, i] (+)= src[b, i, j] for src [B, M, N], tiled. */
static void transpose_tiles(sdt_backend *be, float *dst, const float *src, int64_t B, int64_t M, int64_t N,
                            bool accumulate)
{
    int64_t tm = (M + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE, tn = (N + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
#pragma omp parallel for collapse(3) num_threads(cpu_threads_for(be, B *M *N)) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t ti = 0; ti < tm; ti++)
            for (int64_t tj = 0; tj < tn; tj++) {
                const float *s = src + b * M * N;
                float *d = dst + b * M * N;
                int64_t i_end = (ti + 1) * TRANSPOSE_TILE < M ? (ti + 1) * TRANSPOSE_TILE : M;
                int64_t j_end = (tj + 1) * TRANSPOSE_TILE < N ? (tj + 1) * TRANSPOSE_TILE : N;
                for (int64_t i = ti * TRANSPOSE_TILE; i < i_end; i++)
                    for (int64_t j = tj * TRANSPOSE_TILE; j < j_end; j++) {
                        if (accumulate)
                            d[j * M + i] += s[i * N + j];
                        else
                            d[j * M + i] = s[i * N + j];
                    }
            }
}

int cpu_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t d[3];
    batched_matrix_dims(x, d);
    if (sdt_tensor_numel(x) == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
    transpose_tiles(be, o, xs, d[0], d[1], d[2], false);
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    if (!dx) return 0;
    int64_t d[3];
    batched_matrix_dims(dx, d);
    if (sdt_tensor_numel(dx) == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    float *gx = cpu_write_begin(be, dx, 1, true);
    if (!g || !gx) return -1;
    /* dout is [B, N, M]; its transpose is dx's [B, M, N] */
    transpose_tiles(be, gx, g, d[0], d[2], d[1], true);
    cpu_write_end(be, dx, gx);
    return 0;
}

int cpu_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count)
{
    int64_t n = sdt_tensor_numel(x), bad = 0;
    *count = 0;
    if (n == 0) return 0;
    const float *v = cpu_read_f32(be, x, 0);
    if (!v) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static) reduction(+ : bad)
    for (int64_t i = 0; i < n; i++) bad += !isfinite(v[i]);
    *count = bad;
    return 0;
}
