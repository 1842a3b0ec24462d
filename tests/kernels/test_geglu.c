/* test_geglu - diffusers GEGLU (value, gate = chunk(2, -1); value * gelu(gate)) forward and
 * backward (which writes dx over whatever it held: NaN, 1e30) against float64 references and finite differences, odd shapes. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct geglu_ctx {
    int64_t rows, c;
} geglu_ctx;

static double gelu(double x)
{
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double gelu_grad(double x)
{
    return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

static void ref_forward(const double *x, double *y, void *arg)
{
    const geglu_ctx *g = arg;
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t j = 0; j < g->c; j++) y[r * g->c + j] = x[r * 2 * g->c + j] * gelu(x[r * 2 * g->c + g->c + j]);
}

static void ref_backward(const geglu_ctx *g, const double *x, const double *dy, double *dx)
{
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t j = 0; j < g->c; j++) {
            double value = x[r * 2 * g->c + j], gate = x[r * 2 * g->c + g->c + j], d = dy[r * g->c + j];
            dx[r * 2 * g->c + j] = d * gelu(gate);
            dx[r * 2 * g->c + g->c + j] = d * value * gelu_grad(gate);
        }
}

static void check_shape(sdt_backend *be, sdt_test_rng *r, int64_t batch, int64_t t, int64_t c)
{
    geglu_ctx g = {batch * t, c};
    int64_t nx = g.rows * 2 * c, ny = g.rows * c;
    float *x = kt_randn(r, nx, 1.5), *y = kt_alloc((size_t)ny * sizeof(float)), *dy = kt_randn(r, ny, 1.0);
    kt_grad dx = kt_grad_make_garbage(nx); /* backward writes dx (ops.h) */
    sdt_tensor tx = kt_f32(x, 3, batch, t, 2 * c, 0), ty = kt_f32(y, 3, batch, t, c, 0);
    sdt_tensor tdy = kt_f32(dy, 3, batch, t, c, 0), tdx = kt_f32(dx.fresh, 3, batch, t, 2 * c, 0);
    sdt_tensor tacc = kt_f32(dx.acc, 3, batch, t, 2 * c, 0);
    double *xd = kt_to_double(x, nx), *dyd = kt_to_double(dy, ny);
    double *yref = kt_alloc((size_t)ny * sizeof(double)), *dxref = kt_alloc((size_t)nx * sizeof(double));
    ref_forward(xd, yref, &g);
    ref_backward(&g, xd, dyd, dxref);

    CHECK(be->geglu_forward(be, &ty, &tx) == 0, "geglu forward failed: %s", be->error.message);
    double fwd = sdt_rel_err_fd(y, yref, ny);
    CHECK(fwd < 1e-5, "geglu forward [%lld,%lld,%lld]: rel err %.3g", (long long)batch, (long long)t, (long long)c,
          fwd);
    CHECK(be->geglu_backward(be, &tdx, &tdy, &tx) == 0 && be->geglu_backward(be, &tacc, &tdy, &tx) == 0,
          "geglu backward failed: %s", be->error.message);
    CHECK(kt_grad_written(&dx), "geglu backward over NaN and over 1e30 differ: it must write dx, not read it");
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, nx);
    CHECK(bwd < 1e-4, "geglu backward: f32 vs float64 rel err %.3g", bwd);
    double fd = sdt_fd_check_vjp(ref_forward, &g, xd, nx, dyd, ny, dxref);
    CHECK(fd < 1e-6, "geglu: float64 gradient vs finite differences rel err %.3g", fd);

    sdt_tensor wrong = kt_f32(y, 3, batch, t, c + 1, 0);
    CHECK(be->geglu_forward(be, &wrong, &tx) != 0, "geglu must reject out whose last dim is not half of x's");
    free(x), free(y), free(dy), free(xd), free(dyd), free(yref), free(dxref);
    kt_grad_free(&dx);
}

/* A row's GEGLU (forward and backward) has the same bits alone as inside a batch, at every place: the
 * vector erfc and expf (kernels/cpu/geglu.c) must not depend on where a value sits. c = 300 crosses a
 * 256-gate chunk and leaves tails of every length mod 4 across the rows' offsets. */
static void check_row_invariance(sdt_backend *be, sdt_test_rng *r)
{
    enum { ROWS = 5, C = 301 };
    float *x = kt_randn(r, ROWS * 2 * C, 3.0), *dy = kt_randn(r, ROWS * C, 1.0);
    float *y = kt_alloc(ROWS * C * sizeof(float)), *dx = kt_alloc(ROWS * 2 * C * sizeof(float));
    float y1[C], dx1[2 * C];
    sdt_tensor tx = kt_f32(x, 2, ROWS, 2 * C, 0, 0), ty = kt_f32(y, 2, ROWS, C, 0, 0);
    sdt_tensor tdy = kt_f32(dy, 2, ROWS, C, 0, 0), tdx = kt_f32(dx, 2, ROWS, 2 * C, 0, 0);
    CHECK(be->geglu_forward(be, &ty, &tx) == 0 && be->geglu_backward(be, &tdx, &tdy, &tx) == 0, "geglu failed: %s",
          be->error.message);
    for (int row = 0; row < ROWS; row++) {
        sdt_tensor rx = kt_f32(x + row * 2 * C, 2, 1, 2 * C, 0, 0), ry = kt_f32(y1, 2, 1, C, 0, 0);
        sdt_tensor rdy = kt_f32(dy + row * C, 2, 1, C, 0, 0), rdx = kt_f32(dx1, 2, 1, 2 * C, 0, 0);
        CHECK(be->geglu_forward(be, &ry, &rx) == 0 && be->geglu_backward(be, &rdx, &rdy, &rx) == 0, "geglu failed: %s",
              be->error.message);
        CHECK(memcmp(y1, y + row * C, sizeof y1) == 0 && memcmp(dx1, dx + row * 2 * C, sizeof dx1) == 0,
              "geglu row %d alone differs from the same row in a batch of %d", row, ROWS);
    }
    free(x), free(dy), free(y), free(dx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("geglu");
    sdt_backend *be = kt_backend();
    check_shape(be, &r, 1, 1, 1);
    check_shape(be, &r, 1, 3, 7);
    check_shape(be, &r, 2, 5, 13);
    check_shape(be, &r, 1, 2, 300);
    check_row_invariance(be, &r);
    be->destroy(be);
    return sdt_test_finish("geglu");
}
