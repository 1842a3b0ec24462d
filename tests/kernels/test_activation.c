/* test_activation - activation_forward/backward for every sdt_activation against float64
 * references of the PyTorch definitions, on odd shapes; backward accumulates and is checked
 * against the float64 gradient, which is checked against finite differences. */
#include "act_ref.h"
#include "fd_check.h"
#include "kernel_test.h"
#include "shared_math.h"

static const char *const act_names[SDT_ACT_COUNT] = {
    "identity", "relu",       "leaky_relu", "elu",         "gelu",       "quick_gelu", "silu", "tanh",
    "sigmoid",  "mish",       "hardswish",  "hardsigmoid", "hardtanh",   "relu6",      "selu", "softplus",
    "softsign", "tanhshrink", "logsigmoid", "hardshrink",  "softshrink", "gelu_tanh"};

typedef struct act_ctx {
    sdt_activation act;
    int64_t n;
} act_ctx;

static void ref_forward(const double *x, double *y, void *arg)
{
    const act_ctx *c = arg;
    for (int64_t i = 0; i < c->n; i++) y[i] = act_ref_value(c->act, x[i]);
}

static void check_one(sdt_backend *be, sdt_test_rng *r, sdt_activation act, int ndim, const int64_t *shape)
{
    sdt_tensor proto = sdt_tensor_make(NULL, SDT_F32, SDT_DEVICE_CPU, ndim, shape);
    int64_t n = sdt_tensor_numel(&proto);
    float *x = kt_randn(r, n, 2.0), *y = kt_alloc((size_t)n * sizeof(float));
    float *dy = kt_randn(r, n, 1.0);
    kt_grad dx = kt_grad_make(r, n);
    for (int64_t i = 0; i < n; i++) {
        /* |x| <= 5: far out a value like gelu(-7) ~ 1e-11 makes a one-element relative error
         * meaningless; check_tails covers the tails element by element */
        x[i] = fmodf(x[i], 5.0f);
        while (act_ref_near_kink(x[i])) x[i] += 0.0123f; /* keep finite differences off the kinks */
    }
    sdt_tensor tx = proto, ty = proto, tdy = proto, tdx = proto, tacc = proto;
    tx.data = x, ty.data = y, tdy.data = dy, tdx.data = dx.fresh, tacc.data = dx.acc;

    double *xd = kt_to_double(x, n), *dyd = kt_to_double(dy, n);
    double *yref = kt_alloc((size_t)n * sizeof(double)), *dxref = kt_alloc((size_t)n * sizeof(double));
    act_ctx c = {act, n};
    ref_forward(xd, yref, &c);
    for (int64_t i = 0; i < n; i++) dxref[i] = dyd[i] * act_ref_derivative(act, xd[i]);

    CHECK(be->activation_forward(be, &ty, &tx, act) == 0, "%s forward failed: %s", act_names[act], be->error.message);
    double fwd = sdt_rel_err_fd(y, yref, n);
    CHECK(fwd < 1e-5, "%s forward (n=%lld): rel err %.3g", act_names[act], (long long)n, fwd);

    CHECK(be->activation_backward(be, &tdx, &tdy, &tx, act) == 0 &&
              be->activation_backward(be, &tacc, &tdy, &tx, act) == 0,
          "%s backward failed: %s", act_names[act], be->error.message);
    CHECK(kt_grad_accumulated(&dx), "%s backward must accumulate into dx", act_names[act]);
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, n);
    CHECK(bwd < 1e-4, "%s backward (n=%lld): f32 vs float64 rel err %.3g", act_names[act], (long long)n, bwd);
    double fd = sdt_fd_check_vjp(ref_forward, &c, xd, n, dyd, n, dxref);
    CHECK(fd < 1e-6, "%s: float64 gradient vs finite differences rel err %.3g", act_names[act], fd);
    CHECK(be->activation_backward(be, NULL, &tdy, &tx, act) == 0, "%s backward must skip a NULL dx", act_names[act]);

    free(x), free(y), free(dy), free(xd), free(dyd), free(yref), free(dxref);
    kt_grad_free(&dx);
}

/* Far tails, element by element: values and derivatives stay accurate to themselves
 * (no 1 + erf or 1 - tanh^2 cancellation), and nothing overflows to NaN. */
static void check_tails(sdt_backend *be, sdt_activation act)
{
    enum { N = 10 };
    float x[N] = {-100, -30, -12, -6, -3.5f, 3.5f, 6, 12, 30, 100}, y[N], dy[N], dx[N] = {0};
    for (int i = 0; i < N; i++) dy[i] = 1;
    sdt_tensor tx = kt_f32(x, 1, N, 0, 0, 0), ty = kt_f32(y, 1, N, 0, 0, 0);
    sdt_tensor tdy = kt_f32(dy, 1, N, 0, 0, 0), tdx = kt_f32(dx, 1, N, 0, 0, 0);
    CHECK(be->activation_forward(be, &ty, &tx, act) == 0 && be->activation_backward(be, &tdx, &tdy, &tx, act) == 0,
          "%s on the tails failed: %s", act_names[act], be->error.message);
    for (int i = 0; i < N; i++) {
        double v = act_ref_value(act, x[i]), d = act_ref_derivative(act, x[i]);
        CHECK(fabs(y[i] - v) <= 1e-5 * fabs(v) + 1e-30, "%s(%g) = %.9g, want %.9g", act_names[act], (double)x[i],
              (double)y[i], v);
        CHECK(fabs(dx[i] - d) <= 1e-5 * fabs(d) + 1e-30, "%s'(%g) = %.9g, want %.9g", act_names[act], (double)x[i],
              (double)dx[i], d);
    }
}

/* SiLU and QuickGELU run their expf 4 lanes at a time (kernels/cpu/activation.c): the bits must stay
 * act_value's and act_derivative's (one rounding changed fails this), at every length's tail, over
 * |x| up to 100 (expf's special lanes) and with inf. */
static void check_vector_bits(sdt_backend *be, sdt_activation act)
{
    enum { N = 1031 };
    float *x = kt_alloc(N * sizeof(float)), *y = kt_alloc(N * sizeof(float)), *g = kt_alloc(N * sizeof(float));
    float *gx = kt_alloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        x[i] = -100.0f + 200.0f * (float)i / (float)(N - 1) * (i % 3 ? 0.07f : 1.0f);
        g[i] = 0.5f + (float)(i % 7) * 0.31f;
        gx[i] = (float)(i % 5) * 0.1f;
    }
    x[0] = INFINITY, x[1] = -INFINITY, x[2] = 0.0f, x[3] = -0.0f;
    sdt_tensor tx = kt_f32(x, 1, N, 0, 0, 0), ty = kt_f32(y, 1, N, 0, 0, 0), tg = kt_f32(g, 1, N, 0, 0, 0);
    sdt_tensor tgx = kt_f32(gx, 1, N, 0, 0, 0);
    CHECK(be->activation_forward(be, &ty, &tx, act) == 0 && be->activation_backward(be, &tgx, &tg, &tx, act) == 0,
          "activation %s failed: %s", act_names[act], be->error.message);
    int64_t fwd = 0, bwd = 0;
    for (int i = 0; i < N; i++) {
        const float v = act_value(act, x[i]), d = (float)(i % 5) * 0.1f + g[i] * act_derivative(act, x[i]);
        fwd += memcmp(&v, &y[i], 4) != 0 && !(isnan(v) && isnan(y[i]));
        bwd += memcmp(&d, &gx[i], 4) != 0 && !(isnan(d) && isnan(gx[i]));
    }
    CHECK(fwd == 0 && bwd == 0, "%s: %lld forward and %lld backward values differ from act_value/act_derivative's bits",
          act_names[act], (long long)fwd, (long long)bwd);
    free(x), free(y), free(g), free(gx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("activation");
    sdt_backend *be = kt_backend();
    const int64_t shapes[4][3] = {{1, 1, 1}, {7, 1, 1}, {3, 13, 1}, {2, 5, 11}};
    const int ndims[4] = {1, 1, 2, 3};
    for (int a = 0; a < SDT_ACT_COUNT; a++)
        for (int s = 0; s < 4; s++) check_one(be, &r, (sdt_activation)a, ndims[s], shapes[s]);
    for (int a = 0; a < SDT_ACT_COUNT; a++) check_tails(be, (sdt_activation)a);
    check_vector_bits(be, SDT_ACT_SILU);
    check_vector_bits(be, SDT_ACT_QUICK_GELU);

    float v = 1.0f, o;
    sdt_tensor tv = kt_f32(&v, 1, 1, 0, 0, 0), to = kt_f32(&o, 1, 1, 0, 0, 0);
    CHECK(be->activation_forward(be, &to, &tv, SDT_ACT_COUNT) != 0 && be->error.code == SDT_ERR_INVALID_ARGUMENT,
          "an unknown activation must fail with a message");
    be->destroy(be);
    return sdt_test_finish("activation (identity, relu, leaky_relu, elu, gelu, quick_gelu, silu, tanh, sigmoid, mish, "
                           "hardswish, hardsigmoid, hardtanh, relu6, selu, softplus, softsign, tanhshrink, "
                           "logsigmoid, hardshrink, softshrink)");
}
