/* test_utilities - convert, axpy, scale, transpose_forward/backward and count_nonfinite:
 * exact results against float64 references on odd shapes, the transpose's backward against
 * finite differences, accumulation into existing gradients. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct transpose_ctx {
    int64_t b, m, n;
} transpose_ctx;

/* y[b, j, i] = x[b, i, j] */
static void ref_transpose(const double *x, double *y, void *arg)
{
    const transpose_ctx *t = arg;
    for (int64_t b = 0; b < t->b; b++)
        for (int64_t i = 0; i < t->m; i++)
            for (int64_t j = 0; j < t->n; j++) y[(b * t->n + j) * t->m + i] = x[(b * t->m + i) * t->n + j];
}

static void check_transpose(sdt_backend *be, sdt_test_rng *r, int64_t b, int64_t m, int64_t n, int ndim4)
{
    transpose_ctx t = {b, m, n};
    int64_t total = b * m * n;
    float *x = kt_randn(r, total, 1.0), *y = kt_alloc((size_t)total * sizeof(float));
    float *dy = kt_randn(r, total, 1.0);
    kt_grad dx = kt_grad_make(r, total);
    /* ndim4: x as NCHW [b, m, 1, n], the layout transpose meets in the UNet */
    sdt_tensor tx = ndim4 ? kt_f32(x, 4, b, m, 1, n) : kt_f32(x, 3, b, m, n, 0), ty = kt_f32(y, 3, b, n, m, 0);
    sdt_tensor tdy = kt_f32(dy, 3, b, n, m, 0), tdx = tx, tacc = tx;
    tdx.data = dx.fresh, tacc.data = dx.acc;
    double *xd = kt_to_double(x, total), *dyd = kt_to_double(dy, total);
    double *yref = kt_alloc((size_t)total * sizeof(double)), *dxref = kt_alloc((size_t)total * sizeof(double));
    ref_transpose(xd, yref, &t);
    transpose_ctx back = {b, n, m};
    ref_transpose(dyd, dxref, &back); /* the adjoint of a transpose is the transpose back */

    CHECK(be->transpose_forward(be, &ty, &tx) == 0, "transpose forward failed: %s", be->error.message);
    CHECK(sdt_rel_err_fd(y, yref, total) == 0, "transpose forward [%lld,%lld,%lld] is not exact", (long long)b,
          (long long)m, (long long)n);
    CHECK(be->transpose_backward(be, &tdx, &tdy) == 0 && be->transpose_backward(be, &tacc, &tdy) == 0,
          "transpose backward failed: %s", be->error.message);
    CHECK(sdt_rel_err_fd(dx.fresh, dxref, total) == 0, "transpose backward must be dout's transpose exactly");
    CHECK(kt_grad_accumulated(&dx), "transpose backward must accumulate into dx");
    double fd = sdt_fd_check_vjp(ref_transpose, &t, xd, total, dyd, total, dxref);
    CHECK(fd < 1e-6, "transpose: float64 gradient vs finite differences rel err %.3g", fd);
    free(x), free(y), free(dy), free(xd), free(dyd), free(yref), free(dxref);
    kt_grad_free(&dx);
}

static void check_axpy_scale_convert(sdt_backend *be, sdt_test_rng *r, int64_t n)
{
    float *a = kt_randn(r, n, 1.0), *b = kt_randn(r, n, 1.0), *b0 = kt_copy(b, n);
    float alpha = (float)sdt_test_normal(r);
    sdt_tensor ta = kt_f32(a, 1, n, 0, 0, 0), tb = kt_f32(b, 1, n, 0, 0, 0);
    CHECK(be->axpy(be, &tb, alpha, &ta) == 0, "axpy failed: %s", be->error.message);
    double err = 0;
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(b[i] - ((double)b0[i] + (double)alpha * a[i])));
    CHECK(err < 1e-6 * (1 + fabs(alpha)) * 8, "axpy (n=%lld): max err %.3g", (long long)n, err);

    memcpy(b, b0, (size_t)n * sizeof(float));
    CHECK(be->scale(be, &tb, alpha) == 0, "scale failed: %s", be->error.message);
    int exact = 1;
    for (int64_t i = 0; i < n; i++) exact &= b[i] == b0[i] * alpha;
    CHECK(exact, "scale (n=%lld) must equal the float product", (long long)n);

    uint16_t *h = kt_alloc((size_t)n * 2);
    sdt_tensor th = sdt_tensor_4d(h, SDT_BF16, 1, n, 0, 0, 0);
    CHECK(be->convert(be, &th, &ta) == 0 && be->convert(be, &tb, &th) == 0, "convert failed: %s", be->error.message);
    exact = 1;
    for (int64_t i = 0; i < n; i++) exact &= b[i] == sdt_round_to_dtype(a[i], SDT_BF16);
    CHECK(exact, "convert f32->bf16->f32 (n=%lld) must equal the scalar rounding", (long long)n);
    sdt_tensor shorter = kt_f32(a, 1, n + 1, 0, 0, 0);
    CHECK(be->axpy(be, &shorter, 1.0f, &tb) != 0 && be->error.code == SDT_ERR_INVALID_ARGUMENT,
          "axpy must reject different sizes");
    free(a), free(b), free(b0), free(h);
}

static void check_count_nonfinite(sdt_backend *be, sdt_test_rng *r, int64_t n)
{
    float *x = kt_randn(r, n, 1.0);
    int64_t want = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = sdt_test_next(r) % 10;
        if (k == 0) x[i] = NAN;
        if (k == 1) x[i] = INFINITY;
        if (k == 2) x[i] = -INFINITY;
        want += k <= 2;
    }
    int64_t got = -1;
    sdt_tensor t = kt_f32(x, 1, n, 0, 0, 0);
    CHECK(be->count_nonfinite(be, &t, &got) == 0 && got == want, "count_nonfinite (n=%lld): %lld, want %lld",
          (long long)n, (long long)got, (long long)want);
    free(x);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("utilities");
    sdt_backend *be = kt_backend();
    check_transpose(be, &r, 1, 1, 1, 0);
    check_transpose(be, &r, 2, 7, 13, 0);
    check_transpose(be, &r, 3, 37, 5, 1);
    check_transpose(be, &r, 1, 41, 67, 0); /* larger than one 32x32 tile both ways */
    const int64_t sizes[] = {1, 13, 1031, 40009};
    for (int i = 0; i < 4; i++) {
        check_axpy_scale_convert(be, &r, sizes[i]);
        check_count_nonfinite(be, &r, sizes[i]);
    }
    be->destroy(be);
    return sdt_test_finish("utilities (convert, axpy, scale, transpose, count_nonfinite)");
}
