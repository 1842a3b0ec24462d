/* test_gated_activation - out = act(gate) * up (T5's gated GELU with GELU tanh, and GELU and SiLU) forward and
 * backward (which writes dgate and dup over whatever they held) against float64 references and finite
 * differences. */
#include "act_ref.h"
#include "fd_check.h"
#include "kernel_test.h"

typedef struct gated_ctx {
    int64_t n;
    sdt_activation act;
} gated_ctx;

/* x = [gate, up] */
static void ref_forward(const double *x, double *y, void *arg)
{
    const gated_ctx *g = arg;
    for (int64_t i = 0; i < g->n; i++) y[i] = act_ref_value(g->act, x[i]) * x[g->n + i];
}

static void check_one(sdt_backend *be, sdt_test_rng *r, sdt_activation act, int64_t rows, int64_t c)
{
    int64_t n = rows * c;
    float *x = kt_randn(r, 2 * n, 1.5), *y = kt_alloc((size_t)n * sizeof(float)), *dy = kt_randn(r, n, 1.0);
    kt_grad dx = kt_grad_make_garbage(2 * n);
    sdt_tensor tg = kt_f32(x, 2, rows, c, 0, 0), tu = kt_f32(x + n, 2, rows, c, 0, 0), ty = kt_f32(y, 2, rows, c, 0, 0);
    sdt_tensor tdy = kt_f32(dy, 2, rows, c, 0, 0);
    sdt_tensor tdg = kt_f32(dx.fresh, 2, rows, c, 0, 0), tdu = kt_f32(dx.fresh + n, 2, rows, c, 0, 0);
    sdt_tensor tdga = kt_f32(dx.acc, 2, rows, c, 0, 0), tdua = kt_f32(dx.acc + n, 2, rows, c, 0, 0);
    gated_ctx g = {n, act};
    double *xd = kt_to_double(x, 2 * n), *dyd = kt_to_double(dy, n);
    double *yref = kt_alloc((size_t)n * sizeof(double)), *dxref = kt_alloc((size_t)2 * n * sizeof(double));
    ref_forward(xd, yref, &g);
    for (int64_t i = 0; i < n; i++) {
        dxref[i] = dyd[i] * xd[n + i] * act_ref_derivative(act, xd[i]);
        dxref[n + i] = dyd[i] * act_ref_value(act, xd[i]);
    }
    CHECK(be->gated_activation_forward(be, &ty, &tg, &tu, act) == 0, "gated forward failed: %s", be->error.message);
    double fwd = sdt_rel_err_fd(y, yref, n);
    CHECK(fwd < 1e-5, "gated act %d forward: rel err %.3g", (int)act, fwd);
    CHECK(be->gated_activation_backward(be, &tdg, &tdu, &tdy, &tg, &tu, act) == 0 &&
              be->gated_activation_backward(be, &tdga, &tdua, &tdy, &tg, &tu, act) == 0,
          "gated backward failed: %s", be->error.message);
    CHECK(kt_grad_written(&dx), "gated backward over NaN and over 1e30 differ: it must write, not read");
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, 2 * n);
    CHECK(bwd < 1e-5, "gated act %d backward: rel err %.3g", (int)act, bwd);
    double fd = sdt_fd_check_vjp(ref_forward, &g, xd, 2 * n, dyd, n, dxref);
    CHECK(fd < 1e-6, "gated act %d: float64 gradient vs finite differences rel err %.3g", (int)act, fd);
    free(x), free(y), free(dy), free(xd), free(dyd), free(yref), free(dxref);
    kt_grad_free(&dx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("gated_activation");
    sdt_backend *be = kt_backend();
    const sdt_activation acts[] = {SDT_ACT_GELU_TANH, SDT_ACT_GELU, SDT_ACT_SILU};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        check_one(be, &r, acts[a], 1, 1);
        check_one(be, &r, acts[a], 3, 17);
    }
    be->destroy(be);
    return sdt_test_finish("gated_activation");
}
