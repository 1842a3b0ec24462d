/* test_softmax.c - softmax over the last dim (torch.softmax(x, -1)) forward and
 * backward on the CPU against float64 and finite differences, including rows
 * with huge logits that overflow expf without max subtraction. */
#include "op_check.h"

typedef struct sm_ref {
    int64_t rows, n;
    double *x;
    const double *dout;
} sm_ref;

static void sm_forward_ref(const sm_ref *r, double *y)
{
    for (int64_t i = 0; i < r->rows; i++) {
        const double *x = r->x + i * r->n;
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < r->n; j++) max = x[j] > max ? x[j] : max;
        for (int64_t j = 0; j < r->n; j++) sum += (y[i * r->n + j] = exp(x[j] - max));
        for (int64_t j = 0; j < r->n; j++) y[i * r->n + j] /= sum;
    }
}

static double sm_loss(const double *param, void *ctx)
{
    (void)param;
    const sm_ref *r = ctx;
    double *y = op_zeros_d(r->rows * r->n);
    sm_forward_ref(r, y);
    double l = sdt_fd_dot(y, r->dout, r->rows * r->n);
    free(y);
    return l;
}

static void sm_backward_ref(const sm_ref *r, double *dx)
{
    double *y = op_zeros_d(r->rows * r->n);
    sm_forward_ref(r, y);
    for (int64_t i = 0; i < r->rows; i++) {
        double dot = 0;
        for (int64_t j = 0; j < r->n; j++) dot += r->dout[i * r->n + j] * y[i * r->n + j];
        for (int64_t j = 0; j < r->n; j++) dx[i * r->n + j] += y[i * r->n + j] * (r->dout[i * r->n + j] - dot);
    }
    free(y);
}

static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t b, int64_t rows, int64_t n, double logit_shift,
                     sdt_dtype xdtype)
{
    char what[96];
    snprintf(what, sizeof what, "softmax x[%lld,%lld,%lld] shift %g x:%s", (long long)b, (long long)rows, (long long)n,
             logit_shift, sdt_dtype_name(xdtype));
    const int64_t total = b * rows * n;
    float *x = kt_randn(rng, total, 2.0);
    for (int64_t i = 0; i < total; i++) x[i] += (float)logit_shift;
    void *x16 = op_store_as(x, total, xdtype);
    const int64_t s[3] = {b, rows, n};
    sdt_tensor tx = sdt_tensor_make(x16, xdtype, SDT_DEVICE_CPU, 3, s);
    float *y = kt_randn(rng, total, 1.0);
    sdt_tensor ty = op_tensor(y, 3, s);
    CHECK(be->softmax_forward(be, &ty, &tx) == 0, "%s forward failed: %s", what, be->error.message);
    float *dout = kt_randn(rng, total, 1.0);
    sm_ref r = {b * rows, n, kt_to_double(x, total), kt_to_double(dout, total)};
    double *ref = op_zeros_d(total);
    sm_forward_ref(&r, ref);
    op_check_forward(what, y, ref, total);

    kt_grad g_dx = kt_grad_make(rng, total);
    sdt_tensor tdout = op_tensor(dout, 3, s);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdx = op_tensor(op_grad_buf(&g_dx, pass), 3, s);
        CHECK(be->softmax_backward(be, &tdx, &tdout, &ty) == 0, "%s backward failed: %s", what, be->error.message);
    }
    double *g = op_zeros_d(total);
    sm_backward_ref(&r, g);
    char name[128];
    snprintf(name, sizeof name, "%s dx", what);
    op_check_grad(name, &g_dx, g, sm_loss, &r, r.x);
    op_store_free(x16, x);
    free(x);
    free(y);
    free(dout);
    free(ref);
    kt_grad_free(&g_dx);
    free(g);
    free(r.x);
    free((void *)r.dout);
}

static void check_rejects(sdt_backend *be)
{
    float buf[64] = {0};
    const int64_t a[2] = {3, 4}, b[2] = {4, 3};
    sdt_tensor x = op_tensor(buf, 2, a), y = op_tensor(buf, 2, b);
    op_check_rejects(be, be->softmax_forward(be, &y, &x), "softmax_forward", "an output of another shape");
}

int main(void)
{
    printf("op: softmax\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_softmax");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 2, 3, 7, 0.0, SDT_F32);
    run_case(be, &rng, 1, 1, 1, 0.0, SDT_F32);
    run_case(be, &rng, 3, 5, 77, 0.0, SDT_F32);
    run_case(be, &rng, 1, 4, 13, 200.0, SDT_F32); /* expf(200) overflows: max subtraction must prevent inf */
    run_case(be, &rng, 2, 3, 9, 0.0, SDT_F16);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_softmax");
}
