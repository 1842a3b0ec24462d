/* test_rope - the rotary position embedding (Flux's, diffusers' apply_rotary_emb with interleaved pairs) forward
 * (also in place) and backward (accumulated) against float64 references, the reference gradient against finite
 * differences; tables both of real angles (a rotation per pair) and of unrelated values (the formula as ops.h
 * states it, pair members with their own cos and sin). */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct rope_ctx {
    int64_t rows, width, S, D;
    const double *cos, *sin;
} rope_ctx;

static void ref_forward(const double *x, double *y, void *arg)
{
    const rope_ctx *g = arg;
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t j = 0; j < g->width; j += 2) {
            const int64_t t = (r % g->S) * g->D + j % g->D;
            const double a = x[r * g->width + j], b = x[r * g->width + j + 1];
            y[r * g->width + j] = a * g->cos[t] - b * g->sin[t];
            y[r * g->width + j + 1] = b * g->cos[t + 1] + a * g->sin[t + 1];
        }
}

/* dx = J^T dy, written out from the forward's two equations */
static void ref_backward(const double *dy, double *dx, const rope_ctx *g)
{
    for (int64_t r = 0; r < g->rows; r++)
        for (int64_t j = 0; j < g->width; j += 2) {
            const int64_t t = (r % g->S) * g->D + j % g->D, o = r * g->width + j;
            dx[o] = dy[o] * g->cos[t] + dy[o + 1] * g->sin[t + 1];
            dx[o + 1] = -dy[o] * g->sin[t] + dy[o + 1] * g->cos[t + 1];
        }
}

static void check_shape(sdt_backend *be, sdt_test_rng *r, int64_t B, int64_t S, int64_t heads, int64_t D,
                        bool real_angles)
{
    const int64_t width = heads * D, n = B * S * width, nt = S * D;
    float *x = kt_randn(r, n, 1.0), *y = kt_alloc((size_t)n * sizeof(float)), *dy = kt_randn(r, n, 1.0);
    float *cf = kt_randn(r, nt, 1.0), *sf = kt_randn(r, nt, 1.0);
    if (real_angles) /* diffusers' tables: one angle per pair, repeated for both members */
        for (int64_t s = 0; s < S; s++)
            for (int64_t i = 0; i < D; i += 2) {
                const double angle = (double)(s * 3 % 7) / pow(10000.0, (double)i / (double)D);
                cf[s * D + i] = cf[s * D + i + 1] = (float)cos(angle);
                sf[s * D + i] = sf[s * D + i + 1] = (float)sin(angle);
            }
    kt_grad dx = kt_grad_make(r, n);
    sdt_tensor tx = kt_f32(x, 3, B, S, width, 0), ty = kt_f32(y, 3, B, S, width, 0),
               tdy = kt_f32(dy, 3, B, S, width, 0);
    sdt_tensor tc = kt_f32(cf, 2, S, D, 0, 0), ts = kt_f32(sf, 2, S, D, 0, 0);
    sdt_tensor tdx = kt_f32(dx.fresh, 3, B, S, width, 0), tdxa = kt_f32(dx.acc, 3, B, S, width, 0);
    double *xd = kt_to_double(x, n), *dyd = kt_to_double(dy, n), *cd = kt_to_double(cf, nt), *sd = kt_to_double(sf, nt);
    rope_ctx g = {B * S, width, S, D, cd, sd};
    double *yref = kt_alloc((size_t)n * sizeof(double)), *dxref = kt_alloc((size_t)n * sizeof(double));
    ref_forward(xd, yref, &g);
    ref_backward(dyd, dxref, &g);
    CHECK(be->rope_forward(be, &ty, &tx, &tc, &ts) == 0, "rope forward failed: %s", be->error.message);
    double fwd = sdt_rel_err_fd(y, yref, n);
    CHECK(fwd < 1e-6, "rope forward [%lld, %lld, %lld] D %lld: rel err %.3g", (long long)B, (long long)S,
          (long long)width, (long long)D, fwd);
    if (real_angles) { /* a rotation keeps each pair's length */
        double worst = 0;
        for (int64_t i = 0; i < n; i += 2) {
            double before = hypot(xd[i], xd[i + 1]), after = hypot((double)y[i], (double)y[i + 1]);
            worst = fmax(worst, fabs(after - before) / (before + 1e-12));
        }
        CHECK(worst < 1e-5, "rope with real angles must rotate each pair (length changed by %.3g)", worst);
    }
    float *xin = kt_copy(x, n);
    sdt_tensor txin = kt_f32(xin, 3, B, S, width, 0);
    CHECK(be->rope_forward(be, &txin, &txin, &tc, &ts) == 0 && memcmp(xin, y, (size_t)n * sizeof(float)) == 0,
          "rope forward in place must give the same bits as out of place");
    CHECK(be->rope_backward(be, &tdx, &tdy, &tc, &ts) == 0 && be->rope_backward(be, &tdxa, &tdy, &tc, &ts) == 0,
          "rope backward failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&dx), "rope backward must accumulate into dx");
    double bwd = sdt_rel_err_fd(dx.fresh, dxref, n);
    CHECK(bwd < 1e-6, "rope backward: rel err %.3g", bwd);
    double fd = sdt_fd_check_vjp(ref_forward, &g, xd, n, dyd, n, dxref);
    CHECK(fd < 1e-6, "rope: float64 gradient vs finite differences rel err %.3g", fd);
    free(x), free(y), free(dy), free(cf), free(sf), free(xd), free(dyd), free(cd), free(sd), free(yref), free(dxref),
        free(xin);
    kt_grad_free(&dx);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("rope");
    sdt_backend *be = kt_backend();
    check_shape(be, &r, 1, 3, 1, 2, true);
    check_shape(be, &r, 2, 5, 3, 16, true);
    check_shape(be, &r, 2, 7, 2, 6, false);
    check_shape(be, &r, 1, 33, 4, 128, true);
    be->destroy(be);
    return sdt_test_finish("rope");
}
