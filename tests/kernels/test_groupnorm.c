/* test_groupnorm.c - groupnorm (torch.nn.GroupNorm) forward and backward on the CPU
 * against float64 and finite differences: several groups, one group, one channel
 * per group, 1-d and 2-d spatial extents, with and without affine parameters, and
 * fused with SiLU (the UNet's GroupNorm + SiLU, whose backward recomputes the norm). The fused
 * SiLU (its exponentials run 4 lanes at a time, kernels/cpu/vec_expf.h) is also checked bit for bit
 * against shared_math.h's scalar act_value / act_derivative applied to the plain norm. */
#include "op_check.h"
#include "shared_math.h"

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

static int same_floats(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

/* SiLU fused = the identity norm, then act_value(SILU) (forward) / dout * act_derivative(SILU) fed to
 * the identity backward: the same bits. 340 positions a channel: the SiLU rows' 256-value chunks
 * and a tail of 84 (not a multiple of 4). */
static void check_silu_bits(sdt_backend *be, sdt_test_rng *rng)
{
    const int64_t b = 2, c = 4, h = 20, w = 17, n = b * c * h * w;
    const int groups = 2;
    float *x = kt_randn(rng, n, 2.0), *gamma = kt_randn(rng, c, 1.0), *beta = kt_randn(rng, c, 1.0);
    float *dout = kt_randn(rng, n, 1.0), *dout_act = kt_alloc(sizeof(float) * (size_t)n);
    float *y_id = kt_alloc(sizeof(float) * (size_t)n), *y_silu = kt_alloc(sizeof(float) * (size_t)n);
    float *dx_id = kt_alloc(sizeof(float) * (size_t)n), *dx_silu = kt_alloc(sizeof(float) * (size_t)n);
    float mean[4], rstd[4];
    sdt_tensor tx = kt_f32(x, 4, b, c, h, w), tg = kt_f32(gamma, 1, c, 0, 0, 0), tb = kt_f32(beta, 1, c, 0, 0, 0);
    sdt_tensor tm = kt_f32(mean, 2, b, groups, 0, 0), tr = kt_f32(rstd, 2, b, groups, 0, 0);
    sdt_tensor tyi = kt_f32(y_id, 4, b, c, h, w), tys = kt_f32(y_silu, 4, b, c, h, w);
    CHECK(be->groupnorm_forward(be, &tyi, &tm, &tr, &tx, &tg, &tb, groups, 1e-5f, SDT_ACT_IDENTITY) == 0 &&
              be->groupnorm_forward(be, &tys, &tm, &tr, &tx, &tg, &tb, groups, 1e-5f, SDT_ACT_SILU) == 0,
          "silu bits: forward failed: %s", be->error.message);
    for (int64_t i = 0; i < n; i++) {
        dout_act[i] = dout[i] * act_derivative(SDT_ACT_SILU, y_id[i]);
        y_id[i] = act_value(SDT_ACT_SILU, y_id[i]);
    }
    CHECK(same_floats(y_silu, y_id, n), "groupnorm + silu forward differs in bits from act_value(SILU, norm)");
    sdt_tensor tdo = kt_f32(dout, 4, b, c, h, w), tdoa = kt_f32(dout_act, 4, b, c, h, w);
    sdt_tensor tdxi = kt_f32(dx_id, 4, b, c, h, w), tdxs = kt_f32(dx_silu, 4, b, c, h, w);
    memset(dx_id, 0, sizeof(float) * (size_t)n);
    memset(dx_silu, 0, sizeof(float) * (size_t)n);
    CHECK(be->groupnorm_backward(be, &tdxi, NULL, NULL, &tdoa, &tx, &tg, &tb, &tm, &tr, groups, SDT_ACT_IDENTITY) ==
                  0 &&
              be->groupnorm_backward(be, &tdxs, NULL, NULL, &tdo, &tx, &tg, &tb, &tm, &tr, groups, SDT_ACT_SILU) == 0,
          "silu bits: backward failed: %s", be->error.message);
    CHECK(same_floats(dx_silu, dx_id, n),
          "groupnorm + silu backward differs in bits from the identity backward of dout * act_derivative(SILU)");
    free(x), free(gamma), free(beta), free(dout), free(dout_act), free(y_id), free(y_silu), free(dx_id), free(dx_silu);
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
    check_silu_bits(be, &rng);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_groupnorm");
}
