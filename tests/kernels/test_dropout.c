/* test_dropout - inverted dropout: mask values are 0 or 1/(1-p), the kept fraction is 1-p
 * (statistically, within 7 sigma), the mask is the seed's splitmix64 stream (as on CUDA),
 * so it depends only on the seed (any thread count; another seed another mask),
 * out = x * mask, p = 0 and p = 1, and the backward (dx += dout * mask) against float64
 * and finite differences. */
#include "fd_check.h"
#include "kernel_test.h"

#include <string.h>

typedef struct drop_ctx {
    const double *mask;
    int64_t n;
} drop_ctx;

static void ref_dropout(const double *x, double *y, void *arg)
{
    const drop_ctx *d = arg;
    for (int64_t i = 0; i < d->n; i++) y[i] = x[i] * d->mask[i];
}

static void check_statistics(sdt_backend *be, sdt_backend *be1, sdt_test_rng *r, float p)
{
    const int64_t n = 7 * 14293; /* a prime number of columns */
    float *x = kt_randn(r, n, 1.0), *y = kt_alloc(n * sizeof(float)), *mask = kt_alloc(n * sizeof(float));
    float *mask1 = kt_alloc(n * sizeof(float)), *mask2 = kt_alloc(n * sizeof(float));
    uint64_t seed = sdt_test_next(r);
    sdt_tensor tx = kt_f32(x, 2, 7, n / 7, 0, 0), ty = tx, tm = tx, tm1 = tx, tm2 = tx;
    ty.data = y, tm.data = mask, tm1.data = mask1, tm2.data = mask2;
    CHECK(be->dropout_forward(be, &ty, &tm, &tx, p, seed) == 0, "dropout forward failed: %s", be->error.message);
    float keep_value = p < 1 ? 1.0f / (1.0f - p) : 0.0f;
    int64_t kept = 0, bad_value = 0, bad_out = 0;
    for (int64_t i = 0; i < n; i++) {
        kept += mask[i] != 0;
        bad_value += mask[i] != 0 && mask[i] != keep_value;
        bad_out += y[i] != x[i] * mask[i];
    }
    CHECK(bad_value == 0, "p=%g: %lld mask values are neither 0 nor 1/(1-p)", (double)p, (long long)bad_value);
    CHECK(bad_out == 0, "p=%g: %lld outputs differ from x * mask", (double)p, (long long)bad_out);
    double frac = (double)kept / (double)n, sigma = sqrt(p * (1 - p) / (double)n);
    CHECK(fabs(frac - (1 - p)) <= 7 * sigma + 1e-12, "p=%g: kept fraction %.5f, want %.5f", (double)p, frac,
          1 - (double)p);

    /* the documented stream, shared with the CUDA backend: u_i is the i-th splitmix64 output from seed */
    sdt_test_rng stream = {seed};
    int64_t off_stream = 0;
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(sdt_test_next(&stream) >> 40) * (1.0f / 16777216.0f);
        off_stream += (mask[i] != 0) != (u >= p);
    }
    CHECK(off_stream == 0, "p=%g: %lld mask entries differ from the splitmix64 stream of the seed", (double)p,
          (long long)off_stream);

    CHECK(be1->dropout_forward(be1, &ty, &tm1, &tx, p, seed) == 0, "single-thread dropout failed: %s", be1->error);
    CHECK(memcmp(mask, mask1, n * sizeof(float)) == 0, "p=%g: the mask must not depend on the thread count", (double)p);
    CHECK(be->dropout_forward(be, &ty, &tm2, &tx, p, seed + 1) == 0, "dropout failed: %s", be->error.message);
    if (p > 0 && p < 1)
        CHECK(memcmp(mask, mask2, n * sizeof(float)) != 0, "p=%g: another seed must give another mask", (double)p);
    free(x), free(y), free(mask), free(mask1), free(mask2);
}

static void check_backward(sdt_backend *be, sdt_test_rng *r, int64_t n, float p)
{
    float *x = kt_randn(r, n, 1.0), *y = kt_alloc((size_t)n * sizeof(float)), *mask = kt_alloc((size_t)n * 4);
    float *dy = kt_randn(r, n, 1.0);
    kt_grad dx = kt_grad_make(r, n);
    sdt_tensor tx = kt_f32(x, 1, n, 0, 0, 0), ty = tx, tm = tx, tdy = tx, tdx = tx, tacc = tx;
    ty.data = y, tm.data = mask, tdy.data = dy, tdx.data = dx.fresh, tacc.data = dx.acc;
    CHECK(be->dropout_forward(be, &ty, &tm, &tx, p, sdt_test_next(r)) == 0, "dropout failed: %s", be->error.message);
    CHECK(be->dropout_backward(be, &tdx, &tdy, &tm) == 0 && be->dropout_backward(be, &tacc, &tdy, &tm) == 0,
          "dropout backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dx), "dropout backward must accumulate into dx");
    double *xd = kt_to_double(x, n), *dyd = kt_to_double(dy, n), *md = kt_to_double(mask, n);
    double *dxref = kt_alloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) dxref[i] = dyd[i] * md[i];
    CHECK(sdt_rel_err_fd(dx.fresh, dxref, n) < 1e-6, "dropout backward (n=%lld) must be dout * mask", (long long)n);
    drop_ctx c = {md, n};
    double fd = sdt_fd_check_vjp(ref_dropout, &c, xd, n, dyd, n, dxref);
    CHECK(fd < 1e-6, "dropout: float64 gradient vs finite differences rel err %.3g", fd);
    free(x), free(y), free(mask), free(dy), free(xd), free(dyd), free(md), free(dxref);
    kt_grad_free(&dx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("dropout");
    sdt_backend *be = kt_backend(), *be1 = sdt_backend_cpu_create(1);
    const float ps[] = {0.0f, 0.1f, 0.3f, 0.5f, 1.0f};
    for (int i = 0; i < 5; i++) check_statistics(be, be1, &r, ps[i]);
    check_backward(be, &r, 1, 0.0f);
    check_backward(be, &r, 61, 0.5f);
    float v = 1, o, m;
    sdt_tensor tv = kt_f32(&v, 1, 1, 0, 0, 0), to = kt_f32(&o, 1, 1, 0, 0, 0), tm = kt_f32(&m, 1, 1, 0, 0, 0);
    CHECK(be->dropout_forward(be, &to, &tm, &tv, 1.5f, 1) != 0 && be->error.code == SDT_ERR_INVALID_ARGUMENT,
          "p > 1 must be refused");
    be->destroy(be);
    be1->destroy(be1);
    return sdt_test_finish("dropout");
}
