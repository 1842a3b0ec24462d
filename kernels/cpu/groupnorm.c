/* groupnorm.c - torch.nn.GroupNorm on the CPU.
 *
 * x [B, C, spatial...]; the C channels split into `groups` contiguous groups,
 * and each (image, group) block of (C/groups) * spatial values is normalised
 * on its own. mean and rstd [B, groups] (f32) are saved for backward; gamma and
 * beta [C] are per channel and may be NULL (affine=False). An activation after the
 * norm (SiLU in the UNet and VAE) is applied in the same pass; backward recomputes
 * the normalised value from x and the statistics, in the forward's exact expression.
 */
#include "norm_operands.h"
#include "norm_stats.h"
#include "shared_math.h"
#include "vec_expf.h"

#include <omp.h>

/* The per-thread dn blocks of backward: a slot norm_operands.c's backward leaves free. */
#define GROUPNORM_DN_SLOT 9

typedef struct gn_geom {
    int64_t batch, c, groups, spatial, cpg; /* cpg: channels per group */
} gn_geom;

/* The geometry of x [B, C, spatial...] in `groups` groups (checked before the op runs: op_checks.c). */
static void groupnorm_geometry(const sdt_tensor *x, int groups, gn_geom *g)
{
    const int64_t c = x->shape[1];
    g->batch = x->shape[0];
    g->c = c;
    g->groups = groups;
    g->cpg = c / groups;
    g->spatial = 1;
    for (int i = 2; i < x->ndim; i++) g->spatial *= x->shape[i];
}

/* SiLU's exponentials in chunks through cpu_expf_array (expf's bits, vec_expf.h); the expressions are
 * shared_math.h's act_value / act_derivative for SDT_ACT_SILU, so the results are theirs bit for bit. */
enum { SILU_CHUNK = 256 };

/* out = silu(y), y = (x - mu) * rs * scale + shift, over one channel's len values. */
static void norm_silu_row(float *out, const float *x, int64_t len, float mu, float rs, float scale, float shift)
{
    float y[SILU_CHUNK], e[SILU_CHUNK];
    for (int64_t s0 = 0; s0 < len; s0 += SILU_CHUNK) {
        const int n = len - s0 < SILU_CHUNK ? (int)(len - s0) : SILU_CHUNK;
        for (int k = 0; k < n; k++) {
            y[k] = (x[s0 + k] - mu) * rs * scale + shift;
            e[k] = -y[k];
        }
        cpu_expf_array(e, e, n);
        for (int k = 0; k < n; k++) out[s0 + k] = y[k] * (1.0f / (1.0f + e[k]));
    }
}

/* dn = dout * silu'(y), y as above, over one channel's len values. */
static void norm_silu_grad_row(float *dn, const float *dout, const float *x, int64_t len, float mu, float rs,
                               float scale, float shift)
{
    float y[SILU_CHUNK], en[SILU_CHUNK], ep[SILU_CHUNK];
    for (int64_t s0 = 0; s0 < len; s0 += SILU_CHUNK) {
        const int n = len - s0 < SILU_CHUNK ? (int)(len - s0) : SILU_CHUNK;
        for (int k = 0; k < n; k++) {
            y[k] = (x[s0 + k] - mu) * rs * scale + shift;
            en[k] = -y[k];
        }
        cpu_expf_array(en, en, n);
        cpu_expf_array(y, ep, n);
        for (int k = 0; k < n; k++)
            dn[s0 + k] = dout[s0 + k] * ((1.0f / (1.0f + en[k])) * (1.0f + y[k] * (1.0f / (1.0f + ep[k]))));
    }
}

int cpu_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                          const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act)
{
    const char *op = "groupnorm_forward";
    gn_geom g;
    groupnorm_geometry(x, groups, &g);
    cpu_norm_fwd f;
    if (cpu_norm_forward_begin(be, op, &f, out, mean, rstd, x, gamma, beta)) return -1;
    const float *xf = f.x, *gf = f.gamma, *bf = f.beta;
    float *of = f.out, *mf = f.mean, *rf = f.rstd;
    const int64_t block = g.cpg * g.spatial;
#pragma omp parallel for num_threads(cpu_threads_for(be, sdt_tensor_numel(x))) schedule(static)
    for (int64_t bg = 0; bg < g.batch * g.groups; bg++) {
        const float *xb = xf + bg * block;
        float *ob = of + bg * block;
        cpu_norm_stats(xb, block, eps, &mf[bg], &rf[bg]);
        const float mu = mf[bg], rs = rf[bg];
        const int64_t c0 = (bg % g.groups) * g.cpg;
        for (int64_t ci = 0; ci < g.cpg; ci++) {
            const float scale = gf ? gf[c0 + ci] : 1.0f, shift = bf ? bf[c0 + ci] : 0.0f;
            const int64_t i0 = ci * g.spatial;
            if (act == SDT_ACT_SILU) {
                norm_silu_row(ob + i0, xb + i0, g.spatial, mu, rs, scale, shift);
                continue;
            }
            for (int64_t s = 0; s < g.spatial; s++) {
                const int64_t i = i0 + s;
                ob[i] = act_value(act, (xb[i] - mu) * rs * scale + shift);
            }
        }
    }
    cpu_norm_forward_end(be, &f, out, mean, rstd);
    return 0;
}

/* The gradient at the norm's output: dout through the activation's derivative at the normalised
 * value, recomputed as the forward computed it. */
static inline float norm_out_grad(sdt_activation act, float dout, float x, float mu, float rs, float scale, float shift)
{
    return act == SDT_ACT_IDENTITY ? dout : dout * act_derivative(act, (x - mu) * rs * scale + shift);
}

/* One (image, group) block: dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dn * gamma[c],
 * dn the gradient at the norm's output. dn is computed once per element into `dn` (block floats):
 * through an activation it costs two expf (SiLU), and both passes read it. */
static void groupnorm_dx_block(const gn_geom *g, float *dx, const float *dout, const float *x, const float *gamma,
                               const float *beta, sdt_activation act, int64_t c0, float mu, float rs, float *dn)
{
    double sum_g = 0, sum_gx = 0;
    for (int64_t ci = 0; ci < g->cpg; ci++) {
        const float scale = gamma ? gamma[c0 + ci] : 1.0f, shift = beta ? beta[c0 + ci] : 0.0f;
        const int64_t i0 = ci * g->spatial;
        if (act == SDT_ACT_SILU)
            norm_silu_grad_row(dn + i0, dout + i0, x + i0, g->spatial, mu, rs, scale, shift);
        else
            for (int64_t i = i0; i < i0 + g->spatial; i++)
                dn[i] = norm_out_grad(act, dout[i], x[i], mu, rs, scale, shift);
        for (int64_t s = 0; s < g->spatial; s++) {
            const int64_t i = i0 + s;
            const double gi = (double)dn[i] * scale;
            sum_g += gi;
            sum_gx += gi * ((x[i] - mu) * rs);
        }
    }
    const double n = (double)(g->cpg * g->spatial);
    const float mg = (float)(sum_g / n), mgx = (float)(sum_gx / n);
    for (int64_t ci = 0; ci < g->cpg; ci++) {
        const float scale = gamma ? gamma[c0 + ci] : 1.0f;
        for (int64_t s = 0; s < g->spatial; s++) {
            const int64_t i = ci * g->spatial + s;
            dx[i] += rs * (dn[i] * scale - mg - (x[i] - mu) * rs * mgx);
        }
    }
}

int cpu_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                           const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta,
                           const sdt_tensor *mean, const sdt_tensor *rstd, int groups, sdt_activation act)
{
    const char *op = "groupnorm_backward";
    gn_geom g;
    groupnorm_geometry(x, groups, &g);
    cpu_norm_bwd nb;
    if (cpu_norm_backward_begin(be, op, &nb, dx, dgamma, dbeta, dout, x, gamma, act == SDT_ACT_IDENTITY ? NULL : beta,
                                mean, rstd))
        return -1;
    const float *dof = nb.dout, *xf = nb.x, *gf = nb.gamma, *bf = nb.beta, *mf = nb.mean, *rf = nb.rstd;
    float *dxf = nb.dx, *dgf = nb.dgamma, *dbf = nb.dbeta;
    const int64_t block = g.cpg * g.spatial;
    if (dxf) {
        const int threads = cpu_threads_for(be, sdt_tensor_numel(x));
        float *dn = cpu_scratch_floats(be, GROUPNORM_DN_SLOT, (int64_t)threads * block);
        if (!dn) return cpu_fail_oom(be, op, sizeof(float) * (size_t)threads * (size_t)block);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t bg = 0; bg < g.batch * g.groups; bg++)
            groupnorm_dx_block(&g, dxf + bg * block, dof + bg * block, xf + bg * block, gf, bf, act,
                               (bg % g.groups) * g.cpg, mf[bg], rf[bg], dn + omp_get_thread_num() * block);
    }
    if (dgf || dbf) {
        /* Per channel, summed over images and spatial positions; threads own channels. */
#pragma omp parallel for num_threads(cpu_threads_for(be, sdt_tensor_numel(x))) schedule(static)
        for (int64_t c = 0; c < g.c; c++) {
            double sg = 0, sb = 0;
            const float scale = gf ? gf[c] : 1.0f, shift = bf ? bf[c] : 0.0f;
            for (int64_t b = 0; b < g.batch; b++) {
                const int64_t bg = b * g.groups + c / g.cpg;
                const int64_t off = (b * g.c + c) * g.spatial;
                for (int64_t s = 0; s < g.spatial; s++) {
                    const float d = norm_out_grad(act, dof[off + s], xf[off + s], mf[bg], rf[bg], scale, shift);
                    sg += (double)d * ((xf[off + s] - mf[bg]) * rf[bg]);
                    sb += d;
                }
            }
            if (dgf) dgf[c] += (float)sg;
            if (dbf) dbf[c] += (float)sb;
        }
    }
    cpu_norm_backward_end(be, &nb, dx, dgamma, dbeta);
    return 0;
}
