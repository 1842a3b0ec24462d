/* test_rmsnorm - T5LayerNorm (RMS norm) forward and backward (dx and dgamma accumulate) against float64
 * references, the reference gradient against finite differences, odd shapes, with and without gamma. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct rms_ctx {
    int64_t rows, c;
    const double *gamma; /* NULL: ones */
    double eps;
} rms_ctx;

/* x then (in the fd check of dgamma) nothing: gamma is fixed in ctx */
static void ref_forward(const double *x, double *y, void *arg)
{
    const rms_ctx *g = arg;
    for (int64_t r = 0; r < g->rows; r++) {
        double ss = 0;
        for (int64_t i = 0; i < g->c; i++) ss += x[r * g->c + i] * x[r * g->c + i];
        double rs = 1 / sqrt(ss / (double)g->c + g->eps);
        for (int64_t i = 0; i < g->c; i++) y[r * g->c + i] = x[r * g->c + i] * rs * (g->gamma ? g->gamma[i] : 1);
    }
}

static void check_shape(sdt_backend *be, sdt_test_rng *r, int64_t rows, int64_t c, bool with_gamma)
{
    int64_t n = rows * c;
    float *x = kt_randn(r, n, 1.5), *y = kt_alloc((size_t)n * sizeof(float)), *dy = kt_randn(r, n, 1.0);
    float *gamma = with_gamma ? kt_randn(r, c, 1.0) : NULL, *rstd = kt_alloc((size_t)rows * sizeof(float));
    kt_grad dx = kt_grad_make(r, n), dg = kt_grad_make(r, c);
    sdt_tensor tx = kt_f32(x, 2, rows, c, 0, 0), ty = kt_f32(y, 2, rows, c, 0, 0), tdy = kt_f32(dy, 2, rows, c, 0, 0);
    sdt_tensor tg = kt_f32(gamma, 1, c, 0, 0, 0), trs = kt_f32(rstd, 1, rows, 0, 0, 0);
    sdt_tensor tdx = kt_f32(dx.fresh, 2, rows, c, 0, 0), tdxa = kt_f32(dx.acc, 2, rows, c, 0, 0);
    sdt_tensor tdg = kt_f32(dg.fresh, 1, c, 0, 0, 0), tdga = kt_f32(dg.acc, 1, c, 0, 0, 0);
    double *xd = kt_to_double(x, n), *dyd = kt_to_double(dy, n), *gd = with_gamma ? kt_to_double(gamma, c) : NULL;
    rms_ctx g = {rows, c, gd, 1e-6};
    double *yref = kt_alloc((size_t)n * sizeof(double)), *dxref = kt_alloc((size_t)n * sizeof(double));
    double *dgref = kt_alloc((size_t)c * sizeof(double));
    ref_forward(xd, yref, &g);
    /* analytic float64 gradients */
    memset(dgref, 0, (size_t)c * sizeof(double));
    for (int64_t row = 0; row < rows; row++) {
        const double *xr = xd + row * c, *dr = dyd + row * c;
        double ss = 0, dot = 0;
        for (int64_t i = 0; i < c; i++) ss += xr[i] * xr[i];
        double rs = 1 / sqrt(ss / (double)c + 1e-6);
        for (int64_t i = 0; i < c; i++) dot += dr[i] * (gd ? gd[i] : 1) * xr[i];
        for (int64_t i = 0; i < c; i++) {
            dxref[row * c + i] = rs * dr[i] * (gd ? gd[i] : 1) - rs * rs * rs * xr[i] * dot / (double)c;
            dgref[i] += dr[i] * xr[i] * rs;
        }
    }
    CHECK(be->rmsnorm_forward(be, &ty, &trs, &tx, with_gamma ? &tg : NULL, 1e-6f) == 0, "rmsnorm forward failed: %s",
          be->error.message);
    double fwd = sdt_rel_err_fd(y, yref, n);
    CHECK(fwd < 1e-6, "rmsnorm forward [%lld, %lld]: rel err %.3g", (long long)rows, (long long)c, fwd);
    sdt_tensor *dgp = with_gamma ? &tdg : NULL, *dgap = with_gamma ? &tdga : NULL;
    CHECK(be->rmsnorm_backward(be, &tdx, dgp, &tdy, &tx, with_gamma ? &tg : NULL, &trs) == 0 &&
              be->rmsnorm_backward(be, &tdxa, dgap, &tdy, &tx, with_gamma ? &tg : NULL, &trs) == 0,
          "rmsnorm backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dx), "rmsnorm backward must accumulate into dx");
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, n);
    CHECK(bwd < 1e-5, "rmsnorm backward dx [%lld, %lld]: rel err %.3g", (long long)rows, (long long)c, bwd);
    if (with_gamma) {
        CHECK(kt_grad_accumulated(&dg), "rmsnorm backward must accumulate into dgamma");
        double bg = sdt_rel_err_fd(dg.fresh, dgref, c);
        CHECK(bg < 1e-5, "rmsnorm backward dgamma: rel err %.3g", bg);
    }
    double fd = sdt_fd_check_vjp(ref_forward, &g, xd, n, dyd, n, dxref);
    CHECK(fd < 1e-6, "rmsnorm: float64 gradient vs finite differences rel err %.3g", fd);
    free(x), free(y), free(dy), free(gamma), free(rstd), free(xd), free(dyd), free(gd), free(yref), free(dxref),
        free(dgref);
    kt_grad_free(&dx), kt_grad_free(&dg);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("rmsnorm");
    sdt_backend *be = kt_backend();
    check_shape(be, &r, 2, 3, true);
    check_shape(be, &r, 3, 7, false);
    check_shape(be, &r, 5, 64, true);
    check_shape(be, &r, 4, 300, true);
    be->destroy(be);
    return sdt_test_finish("rmsnorm");
}
