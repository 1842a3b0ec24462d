/* test_groupnorm.c - groupnorm (torch.nn.GroupNorm) forward and backward on the CPU
 * against float64 and finite differences: several groups, one group, one channel
 * per group, 1-d and 2-d spatial extents, with and without affine parameters, and
 * fused with SiLU (the UNet's GroupNorm + SiLU, whose backward recomputes the norm). */
#include "op_check.h"

typedef struct gn_ref {
    int64_t b, c, s, groups; /* s: spatial size */
    double eps;
    double *x, *gamma, *beta;
    const double *dout;
    bool silu; /* y = silu(norm) */
} gn_ref;

static double silu_d(double v)
{
    return v / (1.0 + exp(-v));
}
static double silu_grad_d(double v)
{
    double s = 1.0 / (1.0 + exp(-v));
    return s * (1.0 + v * (1.0 - s));
}

/* The norm's output at flat index i (before the activation). */
static double gn_norm_at(const gn_ref *r, int64_t i, int64_t ch, double mean, double rstd)
{
    return (r->x[i] - mean) * rstd * (r->gamma ? r->gamma[ch] : 1.0) + (r->beta ? r->beta[ch] : 0.0);
}

static void gn_stats(const gn_ref *r, int64_t bg, double *mean, double *rstd)
{
    const int64_t n = r->c / r->groups * r->s;
    const double *x = r->x + bg * n;
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)n + r->eps);
}

/* Channel of flat index i, and its (image, group) block. */
static int64_t gn_channel(const gn_ref *r, int64_t i)
{
    return (i / r->s) % r->c;
}
static int64_t gn_block(const gn_ref *r, int64_t i)
{
    return i / (r->c / r->groups * r->s);
}

static void gn_forward_ref(const gn_ref *r, double *y, double *mean, double *rstd)
{
    for (int64_t bg = 0; bg < r->b * r->groups; bg++) gn_stats(r, bg, &mean[bg], &rstd[bg]);
    for (int64_t i = 0; i < r->b * r->c * r->s; i++) {
        const int64_t ch = gn_channel(r, i), bg = gn_block(r, i);
        const double v = gn_norm_at(r, i, ch, mean[bg], rstd[bg]);
        y[i] = r->silu ? silu_d(v) : v;
    }
}

static double gn_loss(const double *param, void *ctx)
{
    (void)param;
    const gn_ref *r = ctx;
    const int64_t n = r->b * r->c * r->s;
    double *y = op_zeros_d(n), *m = op_zeros_d(r->b * r->groups), *s = op_zeros_d(r->b * r->groups);
    gn_forward_ref(r, y, m, s);
    double l = sdt_fd_dot(y, r->dout, n);
    free(y);
    free(m);
    free(s);
    return l;
}

static void gn_backward_ref(const gn_ref *r, double *dx, double *dgamma, double *dbeta)
{
    const int64_t n = r->b * r->c * r->s, nb = r->b * r->groups, per = r->c / r->groups * r->s;
    double *mean = op_zeros_d(nb), *rstd = op_zeros_d(nb), *sg = op_zeros_d(nb), *sgx = op_zeros_d(nb);
    double *dn = op_zeros_d(n); /* the gradient at the norm's output */
    for (int64_t bg = 0; bg < nb; bg++) gn_stats(r, bg, &mean[bg], &rstd[bg]);
    for (int64_t i = 0; i < n; i++) {
        const int64_t ch = gn_channel(r, i), bg = gn_block(r, i);
        dn[i] = r->silu ? r->dout[i] * silu_grad_d(gn_norm_at(r, i, ch, mean[bg], rstd[bg])) : r->dout[i];
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t ch = gn_channel(r, i), bg = gn_block(r, i);
        const double xhat = (r->x[i] - mean[bg]) * rstd[bg], g = dn[i] * (r->gamma ? r->gamma[ch] : 1.0);
        sg[bg] += g;
        sgx[bg] += g * xhat;
        dgamma[ch] += dn[i] * xhat;
        dbeta[ch] += dn[i];
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t ch = gn_channel(r, i), bg = gn_block(r, i);
        const double xhat = (r->x[i] - mean[bg]) * rstd[bg], g = dn[i] * (r->gamma ? r->gamma[ch] : 1.0);
        dx[i] += rstd[bg] * (g - sg[bg] / (double)per - xhat * sgx[bg] / (double)per);
    }
    free(mean);
    free(rstd);
    free(sg);
    free(sgx);
    free(dn);
}

/* x [b, c, h, w] when w > 0, else [b, c, h]. */
static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t b, int64_t c, int64_t h, int64_t w, int groups,
                     bool affine, sdt_dtype xdtype, sdt_activation act)
{
    char what[128];
    snprintf(what, sizeof what, "groupnorm x[%lld,%lld,%lld,%lld] groups %d%s x:%s%s", (long long)b, (long long)c,
             (long long)h, (long long)w, groups, affine ? " affine" : "", sdt_dtype_name(xdtype),
             act == SDT_ACT_SILU ? " + silu" : "");
    const int64_t s = h * (w > 0 ? w : 1), n = b * c * s, nb = b * groups;
    const float eps = 1e-5f;
    op_norm_case k = op_norm_case_make(rng, n, c, nb, 0.0, xdtype, affine);
    const int64_t xs[4] = {b, c, h, w}, cs[1] = {c}, ss[2] = {b, groups};
    const int nd = w > 0 ? 4 : 3;
    sdt_tensor tx = sdt_tensor_make(k.x_stored, xdtype, SDT_DEVICE_CPU, nd, xs);
    sdt_tensor tg = op_tensor(k.gamma, 1, cs), tb = op_tensor(k.beta, 1, cs);
    sdt_tensor ty = op_tensor(k.y, nd, xs), tm = op_tensor(k.mean, 2, ss), trs = op_tensor(k.rstd, 2, ss);
    CHECK(be->groupnorm_forward(be, &ty, &tm, &trs, &tx, affine ? &tg : NULL, affine ? &tb : NULL, groups, eps, act) ==
              0,
          "%s forward failed: %s", what, be->error.message);
    gn_ref r = {b, c, s, groups, eps, k.x64, k.gamma64, k.beta64, k.dout64, act == SDT_ACT_SILU};
    gn_forward_ref(&r, k.ref, k.ref_mean, k.ref_rstd);
    op_check_forward(what, k.y, k.ref, n);
    op_check_norm_stats(what, k.mean, k.ref_mean, k.rstd, k.ref_rstd, nb);

    sdt_tensor tdout = op_tensor(k.dout, nd, xs);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdx = op_tensor(op_grad_buf(&k.dx, pass), nd, xs),
                   tdg = op_tensor(op_grad_buf(&k.dgamma, pass), 1, cs),
                   tdb = op_tensor(op_grad_buf(&k.dbeta, pass), 1, cs);
        CHECK(be->groupnorm_backward(be, &tdx, affine ? &tdg : NULL, affine ? &tdb : NULL, &tdout, &tx,
                                     affine ? &tg : NULL, affine ? &tb : NULL, &tm, &trs, groups, act) == 0,
              "%s backward failed: %s", what, be->error.message);
    }
    gn_backward_ref(&r, k.gx, k.ggamma, k.gbeta);
    op_check_norm_grads(what, affine, &k.dx, &k.dgamma, &k.dbeta, k.gx, k.ggamma, k.gbeta, gn_loss, &r, k.x64,
                        k.gamma64, k.beta64);
    op_norm_case_free(&k);
}

static void check_rejects(sdt_backend *be)
{
    float buf[128] = {0};
    const int64_t xs[4] = {1, 6, 2, 2}, ss[2] = {1, 4};
    sdt_tensor x = op_tensor(buf, 4, xs), y = op_tensor(buf, 4, xs), m = op_tensor(buf, 2, ss);
    op_check_rejects(be, be->groupnorm_forward(be, &y, &m, &m, &x, NULL, NULL, 4, 1e-5f, SDT_ACT_IDENTITY),
                     "groupnorm_forward", "4 groups for 6 channels");
    op_check_rejects(be, be->groupnorm_forward(be, &y, &m, &m, &x, NULL, NULL, 3, 1e-5f, SDT_ACT_IDENTITY),
                     "groupnorm_forward", "mean sized for another group count");
    op_check_rejects(be, be->groupnorm_forward(be, &y, &m, &m, &x, NULL, NULL, 2, 1e-5f, SDT_ACT_COUNT),
                     "groupnorm_forward", "an unknown activation");
}

int main(void)
{
    printf("op: groupnorm\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_groupnorm");
    sdt_backend *be = kt_backend();
    for (int a = 0; a < 2; a++) {
        sdt_activation act = a ? SDT_ACT_SILU : SDT_ACT_IDENTITY;
        run_case(be, &rng, 2, 6, 3, 5, 3, true, SDT_F32, act);
        run_case(be, &rng, 1, 4, 7, 0, 1, true, SDT_F32, act);  /* one group, 1-d spatial */
        run_case(be, &rng, 2, 5, 3, 3, 5, true, SDT_F32, act);  /* one channel per group */
        run_case(be, &rng, 1, 8, 2, 3, 4, false, SDT_F32, act); /* no affine */
        run_case(be, &rng, 2, 4, 3, 3, 2, true, SDT_BF16, act);
    }
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_groupnorm");
}
