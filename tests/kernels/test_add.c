/* test_add - residual add (out = a + b, also in place) and the per-channel add
 * x[b, c, ...] += v[b, c] with its backward dv += sum over spatial of dout, against
 * float64 references and finite differences on odd shapes. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct channel_ctx {
    int64_t bc, spatial;
} channel_ctx;

/* y = broadcast of v over spatial (the part of x += v that depends on v) */
static void ref_broadcast(const double *v, double *y, void *arg)
{
    const channel_ctx *c = arg;
    for (int64_t i = 0; i < c->bc; i++)
        for (int64_t s = 0; s < c->spatial; s++) y[i * c->spatial + s] = v[i];
}

static void check_add(sdt_backend *be, sdt_test_rng *r, int64_t n)
{
    float *a = kt_randn(r, n, 1.0), *b = kt_randn(r, n, 1.0), *out = kt_alloc((size_t)n * sizeof(float));
    float *a0 = kt_copy(a, n);
    sdt_tensor ta = kt_f32(a, 2, 1, n, 0, 0), tb = kt_f32(b, 2, 1, n, 0, 0), to = kt_f32(out, 2, 1, n, 0, 0);
    CHECK(be->add_forward(be, &to, &ta, &tb) == 0, "add failed: %s", be->error.message);
    int exact = 1;
    for (int64_t i = 0; i < n; i++) exact &= out[i] == a[i] + b[i];
    CHECK(exact, "add (n=%lld) must equal the float sum", (long long)n);
    CHECK(be->add_forward(be, &ta, &ta, &tb) == 0, "in-place add failed: %s", be->error.message);
    exact = 1;
    for (int64_t i = 0; i < n; i++) exact &= a[i] == out[i];
    CHECK(exact, "add with out aliasing a must give the same result");
    free(a), free(b), free(out), free(a0);
}

static void check_add_channel(sdt_backend *be, sdt_test_rng *r, int64_t batch, int64_t ch, int64_t h, int64_t w)
{
    channel_ctx c = {batch * ch, h * w};
    int64_t nx = c.bc * c.spatial;
    float *x = kt_randn(r, nx, 1.0), *x0 = kt_copy(x, nx), *v = kt_randn(r, c.bc, 1.0);
    float *dy = kt_randn(r, nx, 1.0);
    kt_grad dv = kt_grad_make(r, c.bc);
    sdt_tensor tx = kt_f32(x, 4, batch, ch, h, w), tv = kt_f32(v, 2, batch, ch, 0, 0);
    sdt_tensor tdy = kt_f32(dy, 4, batch, ch, h, w), tdv = kt_f32(dv.fresh, 2, batch, ch, 0, 0);
    sdt_tensor tacc = kt_f32(dv.acc, 2, batch, ch, 0, 0);
    double *vd = kt_to_double(v, c.bc), *dyd = kt_to_double(dy, nx);
    double *yref = kt_alloc((size_t)nx * sizeof(double)), *dvref = kt_alloc((size_t)c.bc * sizeof(double));
    ref_broadcast(vd, yref, &c);
    for (int64_t i = 0; i < nx; i++) yref[i] += x0[i];
    for (int64_t i = 0; i < c.bc; i++) {
        dvref[i] = 0;
        for (int64_t s = 0; s < c.spatial; s++) dvref[i] += dyd[i * c.spatial + s];
    }

    CHECK(be->add_channel_forward(be, &tx, &tv) == 0, "add_channel forward failed: %s", be->error.message);
    double fwd = sdt_rel_err_fd(x, yref, nx);
    CHECK(fwd < 1e-6, "add_channel forward [%lld,%lld,%lld,%lld]: rel err %.3g", (long long)batch, (long long)ch,
          (long long)h, (long long)w, fwd);
    CHECK(be->add_channel_backward(be, &tdv, &tdy) == 0 && be->add_channel_backward(be, &tacc, &tdy) == 0,
          "add_channel backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dv), "add_channel backward must accumulate into dv");
    double bwd = sdt_rel_err_fd(dv.fresh, dvref, c.bc);
    CHECK(bwd < 1e-4, "add_channel backward: f32 vs float64 rel err %.3g", bwd);
    double fd = sdt_fd_check_vjp(ref_broadcast, &c, vd, c.bc, dyd, nx, dvref);
    CHECK(fd < 1e-6, "add_channel: float64 gradient vs finite differences rel err %.3g", fd);
    sdt_tensor wrong = kt_f32(v, 2, batch, ch + 1, 0, 0);
    CHECK(be->add_channel_forward(be, &tx, &wrong) != 0, "add_channel must reject v whose C differs from x's");
    free(x), free(x0), free(v), free(dy), free(vd), free(dyd), free(yref), free(dvref);
    kt_grad_free(&dv);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("add");
    sdt_backend *be = kt_backend();
    check_add(be, &r, 1);
    check_add(be, &r, 97);
    check_add(be, &r, 10007);
    check_add_channel(be, &r, 1, 1, 1, 1);
    check_add_channel(be, &r, 2, 3, 5, 7);
    check_add_channel(be, &r, 3, 11, 1, 13);
    be->destroy(be);
    return sdt_test_finish("add (add_forward, add_channel_forward/backward)");
}
