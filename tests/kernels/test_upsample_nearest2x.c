/* test_upsample_nearest2x - F.interpolate(scale_factor=2, mode="nearest") forward (exact)
 * and backward (sum of each 2x2 block, accumulated) on odd shapes, with finite differences. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct up_ctx {
    int64_t planes, h, w;
} up_ctx;

static void ref_upsample(const double *x, double *y, void *arg)
{
    const up_ctx *u = arg;
    for (int64_t p = 0; p < u->planes; p++)
        for (int64_t i = 0; i < 2 * u->h; i++)
            for (int64_t j = 0; j < 2 * u->w; j++)
                y[(p * 2 * u->h + i) * 2 * u->w + j] = x[(p * u->h + i / 2) * u->w + j / 2];
}

static void ref_backward(const double *dy, double *dx, const up_ctx *u)
{
    for (int64_t k = 0; k < u->planes * u->h * u->w; k++) dx[k] = 0;
    for (int64_t p = 0; p < u->planes; p++)
        for (int64_t i = 0; i < 2 * u->h; i++)
            for (int64_t j = 0; j < 2 * u->w; j++)
                dx[(p * u->h + i / 2) * u->w + j / 2] += dy[(p * 2 * u->h + i) * 2 * u->w + j];
}

static void check_shape(sdt_backend *be, sdt_test_rng *r, int64_t batch, int64_t ch, int64_t h, int64_t w)
{
    up_ctx u = {batch * ch, h, w};
    int64_t nx = u.planes * h * w, ny = 4 * nx;
    float *x = kt_randn(r, nx, 1.0), *y = kt_alloc((size_t)ny * sizeof(float)), *dy = kt_randn(r, ny, 1.0);
    kt_grad dx = kt_grad_make(r, nx);
    sdt_tensor tx = kt_f32(x, 4, batch, ch, h, w), ty = kt_f32(y, 4, batch, ch, 2 * h, 2 * w);
    sdt_tensor tdy = kt_f32(dy, 4, batch, ch, 2 * h, 2 * w), tdx = kt_f32(dx.fresh, 4, batch, ch, h, w);
    sdt_tensor tacc = kt_f32(dx.acc, 4, batch, ch, h, w);
    double *xd = kt_to_double(x, nx), *dyd = kt_to_double(dy, ny);
    double *yref = kt_alloc((size_t)ny * sizeof(double)), *dxref = kt_alloc((size_t)nx * sizeof(double));
    ref_upsample(xd, yref, &u);
    ref_backward(dyd, dxref, &u);

    CHECK(be->upsample_nearest2x_forward(be, &ty, &tx) == 0, "upsample forward failed: %s", be->error.message);
    CHECK(sdt_rel_err_fd(y, yref, ny) == 0, "upsample forward [%lld,%lld,%lld,%lld] is not exact", (long long)batch,
          (long long)ch, (long long)h, (long long)w);
    CHECK(be->upsample_nearest2x_backward(be, &tdx, &tdy) == 0 && be->upsample_nearest2x_backward(be, &tacc, &tdy) == 0,
          "upsample backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dx), "upsample backward must accumulate into dx");
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, nx);
    CHECK(bwd < 1e-4, "upsample backward: f32 vs float64 rel err %.3g", bwd);
    double fd = sdt_fd_check_vjp(ref_upsample, &u, xd, nx, dyd, ny, dxref);
    CHECK(fd < 1e-6, "upsample: float64 gradient vs finite differences rel err %.3g", fd);
    sdt_tensor wrong = kt_f32(y, 4, batch, ch, 2 * h, 2 * w - 1);
    CHECK(be->upsample_nearest2x_forward(be, &wrong, &tx) != 0, "upsample must reject an out that is not 2x");
    free(x), free(y), free(dy), free(xd), free(dyd), free(yref), free(dxref);
    kt_grad_free(&dx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("upsample_nearest2x");
    sdt_backend *be = kt_backend();
    check_shape(be, &r, 1, 1, 1, 1);
    check_shape(be, &r, 2, 3, 5, 7);
    check_shape(be, &r, 1, 5, 1, 11);
    be->destroy(be);
    return sdt_test_finish("upsample_nearest2x");
}
