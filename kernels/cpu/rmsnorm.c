/* rmsnorm.c - T5LayerNorm (RMS norm) over the last dimension on the CPU.
 *
 * x [..., C] is viewed as rows [N, C]; rstd [N] (f32) = 1 / sqrt(mean(x^2) + eps) is saved for
 * backward. No mean subtraction, no bias; gamma [C] may be NULL. The mean of squares is summed in
 * double, so the statistic does not depend on C's size or the thread count.
 */
#include <math.h>

#include "cpu_context.h"

int cpu_rmsnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *rstd, const sdt_tensor *x,
                        const sdt_tensor *gamma, float eps)
{
    const int64_t rows = sdt_tensor_rows(x), c = sdt_tensor_last_dim(x);
    if (rows * c == 0) return 0;
    const float *xf = cpu_read_f32(be, x, 0);
    const float *gf = cpu_read_f32(be, gamma, 1);
    float *of = cpu_write_begin(be, out, 2, false);
    if (!xf || (gamma && !gf) || !of) return cpu_fail_oom(be, "rmsnorm_forward", sdt_tensor_nbytes(x) * 2);
    float *rf = (float *)rstd->data;
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xf + r * c;
        double ss = 0;
        for (int64_t i = 0; i < c; i++) ss += (double)xr[i] * xr[i];
        const float rs = (float)(1.0 / sqrt(ss / (double)c + (double)eps));
        rf[r] = rs;
        for (int64_t i = 0; i < c; i++) of[r * c + i] = gf ? xr[i] * rs * gf[i] : xr[i] * rs;
    }
    cpu_write_end(be, out, of);
    return 0;
}

/* y = x r g with r = (mean(x^2) + eps)^(-1/2): dx_i += r g_i dy_i - r^3 x_i mean_j(g_j dy_j x_j);
 * dgamma_i += sum over rows of dy_i x_i r. */
int cpu_rmsnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, const sdt_tensor *dout,
                         const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *rstd)
{
    const int64_t rows = sdt_tensor_rows(x), c = sdt_tensor_last_dim(x);
    if ((!dx && !dgamma) || rows * c == 0) return 0;
    const float *xf = cpu_read_f32(be, x, 0);
    const float *gf = cpu_read_f32(be, gamma, 1);
    const float *df = cpu_read_f32(be, dout, 2);
    float *dxf = cpu_write_begin(be, dx, 3, true);
    float *dgf = cpu_write_begin(be, dgamma, 4, true);
    if (!xf || (gamma && !gf) || !df || (dx && !dxf) || (dgamma && !dgf))
        return cpu_fail_oom(be, "rmsnorm_backward", sdt_tensor_nbytes(x) * 3);
    const float *rf = (const float *)rstd->data;
    if (dxf) {
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = xf + r * c, *dr = df + r * c;
            const float rs = rf[r];
            double dot = 0;
            for (int64_t i = 0; i < c; i++) dot += (double)dr[i] * (gf ? gf[i] : 1.0f) * xr[i];
            const float k = (float)(dot / (double)c) * rs * rs * rs;
            for (int64_t i = 0; i < c; i++) dxf[r * c + i] += rs * dr[i] * (gf ? gf[i] : 1.0f) - k * xr[i];
        }
    }
    if (dgf) {
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
        for (int64_t i = 0; i < c; i++) {
            double sum = 0;
            for (int64_t r = 0; r < rows; r++) sum += (double)df[r * c + i] * xf[r * c + i] * rf[r];
            dgf[i] += (float)sum;
        }
    }
    cpu_write_end(be, dx, dxf);
    cpu_write_end(be, dgamma, dgf);
    return 0;
}
