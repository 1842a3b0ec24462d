/* test_robust_loss - mean(w * rho(pred - target)) for L1 (|d|) and Huber (torch's huber_loss:
 * 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)), optionally weighted per element: forward
 * against float64, backward (dpred += dloss * dL/dpred) against the float64 gradient and finite
 * differences, the torch values at the kinks (sign(0) = 0, slope delta at |d| = delta). */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct robust_ctx {
    const double *target, *weight;
    double dloss, delta;
    bool huber;
    int64_t n;
} robust_ctx;

static double rho(const robust_ctx *c, double d)
{
    if (!c->huber) return fabs(d);
    return fabs(d) < c->delta ? 0.5 * d * d : c->delta * (fabs(d) - 0.5 * c->delta);
}

static double rho_grad(const robust_ctx *c, double d)
{
    if (!c->huber) return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
    return fabs(d) < c->delta ? d : (d > 0 ? c->delta : -c->delta);
}

static double ref_loss(const double *pred, void *arg)
{
    const robust_ctx *c = arg;
    double s = 0;
    for (int64_t i = 0; i < c->n; i++) s += (c->weight ? c->weight[i] : 1.0) * rho(c, pred[i] - c->target[i]);
    return c->dloss * s / (double)c->n;
}

static void check_case(sdt_backend *be, sdt_test_rng *r, int64_t n, bool weighted, bool huber, float delta)
{
    float *p = kt_randn(r, n, 1.0), *y = kt_randn(r, n, 1.0), *w = kt_alloc((size_t)n * sizeof(float));
    kt_grad dp = kt_grad_make(r, n);
    for (int64_t i = 0; i < n; i++) {
        w[i] = (float)(0.1 + sdt_test_uniform(r));
        /* finite differences need the loss smooth around each point: away from 0 and from |d| = delta */
        double d = (double)p[i] - (double)y[i];
        if (fabs(d) < 1e-2 || (huber && fabs(fabs(d) - delta) < 1e-2)) y[i] = p[i] - 0.5f * (float)delta - 0.25f;
    }
    sdt_tensor tp = kt_f32(p, 2, 1, n, 0, 0), ty = tp, tw = tp, tdp = tp, tacc = tp;
    ty.data = y, tw.data = w, tdp.data = dp.fresh, tacc.data = dp.acc;
    double *pd = kt_to_double(p, n), *yd = kt_to_double(y, n), *wd = kt_to_double(w, n);
    float dloss = (float)(0.5 + sdt_test_uniform(r));
    sdt_robust_loss kind = huber ? SDT_ROBUST_LOSS_HUBER : SDT_ROBUST_LOSS_L1;
    robust_ctx c = {yd, weighted ? wd : NULL, 1.0, delta, huber, n};
    const char *name = huber ? "huber" : "l1";
    double want = ref_loss(pd, &c), loss = -1;
    const sdt_tensor *weight = weighted ? &tw : NULL;
    CHECK(be->robust_loss_forward(be, &loss, &tp, &ty, weight, kind, delta) == 0, "%s forward failed: %s", name,
          be->error.message);
    CHECK(fabs(loss - want) <= 1e-5 * fabs(want), "%s (n=%lld, weighted %d, delta %g): %.9g, want %.9g", name,
          (long long)n, weighted, (double)delta, loss, want);

    CHECK(be->robust_loss_backward(be, &tdp, dloss, &tp, &ty, weight, kind, delta) == 0 &&
              be->robust_loss_backward(be, &tacc, dloss, &tp, &ty, weight, kind, delta) == 0,
          "%s backward failed: %s", name, be->error.message);
    CHECK(kt_grad_accumulated(&dp), "%s backward must accumulate into dpred", name);
    double *grad = kt_alloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        grad[i] = dloss * (weighted ? wd[i] : 1.0) * rho_grad(&c, pd[i] - yd[i]) / (double)n;
    double bwd = sdt_rel_err_fd(dp.fresh, grad, n);
    CHECK(bwd < 1e-4, "%s backward (n=%lld): f32 vs float64 rel err %.3g", name, (long long)n, bwd);
    c.dloss = dloss;
    double fd = sdt_fd_check(ref_loss, &c, pd, n, grad);
    CHECK(fd < 1e-6, "%s: float64 gradient vs finite differences rel err %.3g", name, fd);
    free(p), free(y), free(w), free(pd), free(yd), free(wd), free(grad);
    kt_grad_free(&dp);
}

/* torch's values where the formulas switch: L1's gradient at d = 0 is sign(0) = 0; Huber at
 * |d| = delta takes the linear branch (value delta^2 / 2 either way, slope +-delta). */
static void check_kinks(sdt_backend *be)
{
    float p[4] = {1.0f, 2.0f, -1.5f, 0.25f}, y[4] = {1.0f, 0.0f, 0.5f, 0.0f}, g[4] = {0};
    sdt_tensor tp = kt_f32(p, 1, 4, 0, 0, 0), ty = tp, tg = tp;
    ty.data = y, tg.data = g;
    double loss = 0;
    CHECK(be->robust_loss_forward(be, &loss, &tp, &ty, NULL, SDT_ROBUST_LOSS_HUBER, 2.0f) == 0 &&
              be->robust_loss_backward(be, &tg, 4.0f, &tp, &ty, NULL, SDT_ROBUST_LOSS_HUBER, 2.0f) == 0,
          "huber at the kink failed: %s", be->error.message);
    /* d = 0, 2, -2, 0.25 with delta 2: 0, 2, 2, 0.03125 */
    CHECK(fabs(loss - (0.0 + 2.0 + 2.0 + 0.03125) / 4.0) < 1e-7, "huber at |d| = delta: loss %.9g", loss);
    CHECK(g[0] == 0.0f && g[1] == 2.0f && g[2] == -2.0f && g[3] == 0.25f, "huber gradient at the kink: %g %g %g %g",
          (double)g[0], (double)g[1], (double)g[2], (double)g[3]);
    memset(g, 0, sizeof g);
    CHECK(be->robust_loss_backward(be, &tg, 4.0f, &tp, &ty, NULL, SDT_ROBUST_LOSS_L1, 1.0f) == 0, "l1 backward failed");
    CHECK(g[0] == 0.0f && g[1] == 1.0f && g[2] == -1.0f && g[3] == 1.0f, "l1 gradient (sign(0) = 0): %g %g %g %g",
          (double)g[0], (double)g[1], (double)g[2], (double)g[3]);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("robust_loss");
    sdt_backend *be = kt_backend();
    const int64_t sizes[] = {1, 7, 257, 1031};
    const float deltas[] = {1.0f, 0.3f};
    for (int i = 0; i < 4; i++)
        for (int weighted = 0; weighted < 2; weighted++) {
            check_case(be, &r, sizes[i], weighted, false, 1.0f);
            for (int k = 0; k < 2; k++) check_case(be, &r, sizes[i], weighted, true, deltas[k]);
        }
    check_kinks(be);
    be->destroy(be);
    return sdt_test_finish("robust_loss");
}
