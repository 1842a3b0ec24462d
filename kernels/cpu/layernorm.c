/* layernorm.c - torch.nn.LayerNorm over the last dimension on the CPU.
 *
 * x [..., C] is viewed as rows [N, C]; mean and rstd [N] (f32) are saved for
 * backward. gamma and beta [C] may be NULL (elementwise_affine=False).
 */
#include "norm_operands.h"
#include "norm_stats.h"

int cpu_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                          const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    const char *op = "layernorm_forward";
    cpu_norm_fwd f;
    if (cpu_norm_forward_begin(be, op, &f, out, mean, rstd, x, gamma, beta)) return -1;
    const int64_t rows = sdt_tensor_rows(x), c = sdt_tensor_last_dim(x);
    const float *xf = f.x, *gf = f.gamma, *bf = f.beta;
    float *of = f.out, *mf = f.mean, *rf = f.rstd;
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xf + r * c;
        float *orow = of + r * c;
        cpu_norm_stats(xr, c, eps, &mf[r], &rf[r]);
        const float mu = mf[r], rs = rf[r];
        for (int64_t i = 0; i < c; i++) {
            const float xhat = (xr[i] - mu) * rs;
            orow[i] = (gf ? xhat * gf[i] : xhat) + (bf ? bf[i] : 0.0f);
        }
    }
    cpu_norm_forward_end(be, &f, out, mean, rstd);
    return 0;
}

/* dx_r += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * gamma. */
static void layernorm_dx_row(float *dx, const float *dout, const float *x, const float *gamma, int64_t c, float mu,
                             float rs)
{
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < c; i++) {
        const double g = (double)dout[i] * (gamma ? gamma[i] : 1.0f);
        sum_g += g;
        sum_gx += g * ((x[i] - mu) * rs);
    }
    const float mg = (float)(sum_g / (double)c), mgx = (float)(sum_gx / (double)c);
    for (int64_t i = 0; i < c; i++) {
        const float g = dout[i] * (gamma ? gamma[i] : 1.0f);
        const float xhat = (x[i] - mu) * rs;
        dx[i] += rs * (g - mg - xhat * mgx);
    }
}

/* dgamma[i] += sum_r dout * xhat, dbeta[i] += sum_r dout; threads own column blocks. */
static void layernorm_affine_grads(float *dgamma, float *dbeta, const float *dout, const float *x, const float *mean,
                                   const float *rstd, int64_t rows, int64_t c, int threads)
{
    enum { BLOCK = 64 };
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i0 = 0; i0 < c; i0 += BLOCK) {
        const int64_t i1 = i0 + BLOCK < c ? i0 + BLOCK : c;
        double sg[BLOCK] = {0}, sb[BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = i0; i < i1; i++) {
                const float d = dout[r * c + i];
                sg[i - i0] += (double)d * ((x[r * c + i] - mean[r]) * rstd[r]);
                sb[i - i0] += d;
            }
        for (int64_t i = i0; i < i1; i++) {
            if (dgamma) dgamma[i] += (float)sg[i - i0];
            if (dbeta) dbeta[i] += (float)sb[i - i0];
        }
    }
}

int cpu_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                           const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean,
                           const sdt_tensor *rstd)
{
    const char *op = "layernorm_backward";
    const int64_t rows = sdt_tensor_rows(x), c = sdt_tensor_last_dim(x);
    cpu_norm_bwd nb;
    if (cpu_norm_backward_begin(be, op, &nb, dx, dgamma, dbeta, dout, x, gamma, NULL, mean, rstd)) return -1;
    const float *dof = nb.dout, *xf = nb.x, *gf = nb.gamma, *mf = nb.mean, *rf = nb.rstd;
    float *dxf = nb.dx, *dgf = nb.dgamma, *dbf = nb.dbeta;
    if (dxf) {
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
        for (int64_t r = 0; r < rows; r++) layernorm_dx_row(dxf + r * c, dof + r * c, xf + r * c, gf, c, mf[r], rf[r]);
    }
    if (dgf || dbf) layernorm_affine_grads(dgf, dbf, dof, xf, mf, rf, rows, c, cpu_threads_for(be, rows * c));
    cpu_norm_backward_end(be, &nb, dx, dgamma, dbeta);
    return 0;
}
