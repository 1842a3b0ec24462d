/* test_mse_loss - mean((pred - target)^2), optionally weighted per element: forward against
 * float64, backward (dpred += dloss * dL/dpred) against the float64 gradient and finite differences. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct mse_ctx {
    const double *target, *weight;
    double dloss;
    int64_t n;
} mse_ctx;

static double ref_loss(const double *pred, void *arg)
{
    const mse_ctx *c = arg;
    double s = 0;
    for (int64_t i = 0; i < c->n; i++) {
        double d = pred[i] - c->target[i];
        s += (c->weight ? c->weight[i] : 1.0) * d * d;
    }
    return c->dloss * s / (double)c->n;
}

static void check_case(sdt_backend *be, sdt_test_rng *r, int64_t n, bool weighted)
{
    float *p = kt_randn(r, n, 1.0), *y = kt_randn(r, n, 1.0), *w = kt_alloc((size_t)n * sizeof(float));
    kt_grad dp = kt_grad_make(r, n);
    for (int64_t i = 0; i < n; i++) w[i] = (float)(0.1 + sdt_test_uniform(r));
    sdt_tensor tp = kt_f32(p, 2, 1, n, 0, 0), ty = tp, tw = tp, tdp = tp, tacc = tp;
    ty.data = y, tw.data = w, tdp.data = dp.fresh, tacc.data = dp.acc;
    double *pd = kt_to_double(p, n), *yd = kt_to_double(y, n), *wd = kt_to_double(w, n);
    float dloss = (float)(0.5 + sdt_test_uniform(r));
    mse_ctx c = {yd, weighted ? wd : NULL, 1.0, n};
    double want = ref_loss(pd, &c), loss = -1;
    CHECK(be->mse_loss_forward(be, &loss, &tp, &ty, weighted ? &tw : NULL) == 0, "mse forward failed: %s",
          be->error.message);
    CHECK(fabs(loss - want) <= 1e-5 * fabs(want), "mse (n=%lld, weighted %d): %.9g, want %.9g", (long long)n, weighted,
          loss, want);

    const sdt_tensor *weight = weighted ? &tw : NULL;
    CHECK(be->mse_loss_backward(be, &tdp, dloss, &tp, &ty, weight) == 0 &&
              be->mse_loss_backward(be, &tacc, dloss, &tp, &ty, weight) == 0,
          "mse backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dp), "mse backward must accumulate into dpred");
    double *grad = kt_alloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) grad[i] = dloss * 2.0 * (weighted ? wd[i] : 1.0) * (pd[i] - yd[i]) / (double)n;
    double bwd = sdt_rel_err_fd(dp.fresh, grad, n);
    CHECK(bwd < 1e-4, "mse backward (n=%lld): f32 vs float64 rel err %.3g", (long long)n, bwd);
    c.dloss = dloss;
    double fd = sdt_fd_check(ref_loss, &c, pd, n, grad);
    CHECK(fd < 1e-6, "mse: float64 gradient vs finite differences rel err %.3g", fd);
    free(p), free(y), free(w), free(pd), free(yd), free(wd), free(grad);
    kt_grad_free(&dp);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("mse_loss");
    sdt_backend *be = kt_backend();
    const int64_t sizes[] = {1, 7, 257, 1031};
    for (int i = 0; i < 4; i++) {
        check_case(be, &r, sizes[i], false);
        check_case(be, &r, sizes[i], true);
    }
    be->destroy(be);
    return sdt_test_finish("mse_loss");
}
