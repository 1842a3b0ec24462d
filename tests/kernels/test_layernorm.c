/* test_layernorm.c - layernorm (torch.nn.LayerNorm over the last dim) forward and
 * backward on the CPU against float64 and finite differences, with and without
 * the affine parameters, including rows with a large mean. */
#include "op_check.h"

typedef struct ln_ref {
    int64_t rows, c;
    double eps;
    double *x, *gamma, *beta; /* gamma, beta may be NULL */
    const double *dout;
} ln_ref;

static void ln_stats(const ln_ref *r, int64_t i, double *mean, double *rstd)
{
    double m = 0, v = 0;
    for (int64_t j = 0; j < r->c; j++) m += r->x[i * r->c + j];
    m /= (double)r->c;
    for (int64_t j = 0; j < r->c; j++) v += (r->x[i * r->c + j] - m) * (r->x[i * r->c + j] - m);
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)r->c + r->eps);
}

static void ln_forward_ref(const ln_ref *r, double *y, double *mean, double *rstd)
{
    for (int64_t i = 0; i < r->rows; i++) {
        ln_stats(r, i, &mean[i], &rstd[i]);
        for (int64_t j = 0; j < r->c; j++) {
            const double xhat = (r->x[i * r->c + j] - mean[i]) * rstd[i];
            y[i * r->c + j] = xhat * (r->gamma ? r->gamma[j] : 1.0) + (r->beta ? r->beta[j] : 0.0);
        }
    }
}

static double ln_loss(const double *param, void *ctx)
{
    (void)param;
    const ln_ref *r = ctx;
    double *y = op_zeros_d(r->rows * r->c), *m = op_zeros_d(r->rows), *s = op_zeros_d(r->rows);
    ln_forward_ref(r, y, m, s);
    double l = sdt_fd_dot(y, r->dout, r->rows * r->c);
    free(y);
    free(m);
    free(s);
    return l;
}

static void ln_backward_ref(const ln_ref *r, double *dx, double *dgamma, double *dbeta)
{
    for (int64_t i = 0; i < r->rows; i++) {
        double mean, rstd, sg = 0, sgx = 0;
        ln_stats(r, i, &mean, &rstd);
        for (int64_t j = 0; j < r->c; j++) {
            const double xhat = (r->x[i * r->c + j] - mean) * rstd, d = r->dout[i * r->c + j];
            const double g = d * (r->gamma ? r->gamma[j] : 1.0);
            sg += g;
            sgx += g * xhat;
            dgamma[j] += d * xhat;
            dbeta[j] += d;
        }
        for (int64_t j = 0; j < r->c; j++) {
            const double xhat = (r->x[i * r->c + j] - mean) * rstd;
            const double g = r->dout[i * r->c + j] * (r->gamma ? r->gamma[j] : 1.0);
            dx[i * r->c + j] += rstd * (g - sg / (double)r->c - xhat * sgx / (double)r->c);
        }
    }
}

static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t b, int64_t t, int64_t c, bool affine, double offset,
                     sdt_dtype xdtype)
{
    char what[112];
    snprintf(what, sizeof what, "layernorm x[%lld,%lld,%lld]%s offset %g x:%s", (long long)b, (long long)t,
             (long long)c, affine ? " affine" : "", offset, sdt_dtype_name(xdtype));
    const int64_t rows = b * t, n = rows * c;
    const float eps = 1e-5f;
    op_norm_case k = op_norm_case_make(rng, n, c, rows, offset, xdtype, affine);
    const int64_t xs[3] = {b, t, c}, cs[1] = {c}, rs[2] = {b, t};
    sdt_tensor tx = sdt_tensor_make(k.x_stored, xdtype, SDT_DEVICE_CPU, 3, xs);
    sdt_tensor tg = op_tensor(k.gamma, 1, cs), tb = op_tensor(k.beta, 1, cs);
    sdt_tensor ty = op_tensor(k.y, 3, xs), tm = op_tensor(k.mean, 2, rs), trs = op_tensor(k.rstd, 2, rs);
    CHECK(be->layernorm_forward(be, &ty, &tm, &trs, &tx, affine ? &tg : NULL, affine ? &tb : NULL, eps) == 0,
          "%s forward failed: %s", what, be->error.message);
    ln_ref r = {rows, c, eps, k.x64, k.gamma64, k.beta64, k.dout64};
    ln_forward_ref(&r, k.ref, k.ref_mean, k.ref_rstd);
    op_check_forward(what, k.y, k.ref, n);
    op_check_norm_stats(what, k.mean, k.ref_mean, k.rstd, k.ref_rstd, rows);

    sdt_tensor tdout = op_tensor(k.dout, 3, xs);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdx = op_tensor(op_grad_buf(&k.dx, pass), 3, xs),
                   tdg = op_tensor(op_grad_buf(&k.dgamma, pass), 1, cs),
                   tdb = op_tensor(op_grad_buf(&k.dbeta, pass), 1, cs);
        CHECK(be->layernorm_backward(be, &tdx, affine ? &tdg : NULL, affine ? &tdb : NULL, &tdout, &tx,
                                     affine ? &tg : NULL, &tm, &trs) == 0,
              "%s backward failed: %s", what, be->error.message);
    }
    ln_backward_ref(&r, k.gx, k.ggamma, k.gbeta);
    op_check_norm_grads(what, affine, &k.dx, &k.dgamma, &k.dbeta, k.gx, k.ggamma, k.gbeta, ln_loss, &r, k.x64,
                        k.gamma64, k.beta64);
    op_norm_case_free(&k);
}

static void check_rejects(sdt_backend *be)
{
    float buf[64] = {0};
    const int64_t xs[2] = {3, 4}, gs[1] = {5}, ms[1] = {3};
    sdt_tensor x = op_tensor(buf, 2, xs), g = op_tensor(buf, 1, gs), m = op_tensor(buf, 1, ms);
    sdt_tensor y = op_tensor(buf, 2, xs);
    op_check_rejects(be, be->layernorm_forward(be, &y, &m, &m, &x, &g, NULL, 1e-5f), "layernorm_forward",
                     "gamma of the wrong length");
    op_check_rejects(be, be->layernorm_forward(be, &y, &g, &m, &x, NULL, NULL, 1e-5f), "layernorm_forward",
                     "mean of the wrong length");
}

int main(void)
{
    printf("op: layernorm\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_layernorm");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 2, 3, 13, true, 0.0, SDT_F32);
    run_case(be, &rng, 1, 1, 3, true, 0.0, SDT_F32); /* C = 2 would leave dx ~ eps only: ill-conditioned */
    run_case(be, &rng, 1, 5, 67, false, 0.0, SDT_F32);
    run_case(be, &rng, 2, 2, 31, true, 50.0, SDT_F32); /* large mean: variance must not cancel */
    run_case(be, &rng, 1, 3, 11, true, 0.0, SDT_F16);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_layernorm");
}
