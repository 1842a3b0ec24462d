/* upsample_nearest2x.c - F.interpolate(x, scale_factor=2, mode="nearest") on NCHW:
 * out[n, c, i, j] = x[n, c, i/2, j/2]; backward sums each 2x2 block of dout. */
#include "cpu_context.h"

int cpu_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t planes = x->shape[0] * x->shape[1], h = x->shape[2], w = x->shape[3];
    if (planes * h * w == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
#pragma omp parallel for collapse(2) num_threads(cpu_threads_for(be, 4 * planes * h * w)) schedule(static)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < 2 * h; i++) {
            const float *src = xs + (p * h + i / 2) * w;
            float *dst = o + (p * 2 * h + i) * 2 * w;
            for (int64_t j = 0; j < w; j++) dst[2 * j] = dst[2 * j + 1] = src[j];
        }
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    if (!dx) return 0;
    int64_t planes = dx->shape[0] * dx->shape[1], h = dx->shape[2], w = dx->shape[3];
    if (planes * h * w == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    float *gx = cpu_write_begin(be, dx, 1, true);
    if (!g || !gx) return -1;
#pragma omp parallel for collapse(2) num_threads(cpu_threads_for(be, 4 * planes * h * w)) schedule(static)
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < h; i++) {
            const float *top = g + (p * 2 * h + 2 * i) * 2 * w, *bottom = top + 2 * w;
            float *dst = gx + (p * h + i) * w;
            for (int64_t j = 0; j < w; j++)
                dst[j] += (top[2 * j] + top[2 * j + 1]) + (bottom[2 * j] + bottom[2 * j + 1]);
        }
    cpu_write_end(be, dx, gx);
    return 0;
}
