/* test_optimizer - the optimisation ops: sum_squares (double accumulation across tensors and
 * dtypes, added to the caller's value), unscale_check (torch's fused unscale: every grad
 * scaled, found_inf set by an inf or NaN input anywhere and never cleared, f16 grads), and adamw_update over
 * several steps against a float64 torch.optim.AdamW reference. */
#include <string.h>

#include "kernel_test.h"

static void check_sum_squares(sdt_backend *be, sdt_test_rng *r)
{
    enum { K = 4 };
    const int64_t sizes[K] = {1, 13, 1031, 257};
    float *data[K];
    sdt_tensor t[K + 1];
    const sdt_tensor *list[K + 1];
    double want = 1.5;
    for (int k = 0; k < K; k++) {
        data[k] = kt_randn(r, sizes[k], 3.0);
        t[k] = kt_f32(data[k], 1, sizes[k], 0, 0, 0);
        if (k < K - 1)
            for (int64_t i = 0; i < sizes[k]; i++) want += (double)data[k][i] * data[k][i];
        list[k] = &t[k];
    }
    /* the last tensor stored as f16: its squares are of the f16 values */
    uint16_t *h = kt_alloc((size_t)sizes[K - 1] * 2);
    for (int64_t i = 0; i < sizes[K - 1]; i++) {
        h[i] = sdt_f32_to_f16(data[K - 1][i]);
        double v = sdt_f16_to_f32(h[i]);
        want += v * v;
    }
    t[K - 1] = sdt_tensor_4d(h, SDT_F16, 1, sizes[K - 1], 0, 0, 0);
    list[K] = NULL; /* skipped */
    double sumsq = 1.5;
    CHECK(be->sum_squares(be, &sumsq, list, K + 1) == 0, "sum_squares failed: %s", be->error.message);
    CHECK(fabs(sumsq - want) <= 1e-12 * want, "sum_squares: %.17g, want %.17g", sumsq, want);
    for (int k = 0; k < K; k++) free(data[k]);
    free(h);
}

static void check_unscale(sdt_backend *be, sdt_test_rng *r)
{
    enum { K = 3 };
    const int64_t sizes[K] = {1, 29, 4099};
    for (int scenario = 0; scenario < 4; scenario++) { /* finite, one inf, one NaN, finite with flag preset */
        float *g[K], *g0[K];
        sdt_tensor t[K];
        sdt_tensor *list[K];
        for (int k = 0; k < K; k++) {
            g[k] = kt_randn(r, sizes[k], 1000.0);
            t[k] = kt_f32(g[k], 1, sizes[k], 0, 0, 0);
            list[k] = &t[k];
        }
        int bad_k = (int)(sdt_test_next(r) % K);
        int64_t bad_i = (int64_t)(sdt_test_next(r) % (uint64_t)sizes[bad_k]);
        if (scenario == 1) g[bad_k][bad_i] = -INFINITY;
        if (scenario == 2) g[bad_k][bad_i] = NAN;
        for (int k = 0; k < K; k++) g0[k] = kt_copy(g[k], sizes[k]);
        float inv_scale = 1.0f / 65536.0f;
        bool found = scenario == 3;
        CHECK(be->unscale_check(be, list, K, inv_scale, &found) == 0, "unscale_check failed: %s", be->error.message);
        CHECK(found == (scenario != 0), "scenario %d: found_inf = %d", scenario, found);
        int scaled = 1;
        for (int k = 0; k < K; k++)
            for (int64_t i = 0; i < sizes[k]; i++) {
                float want = g0[k][i] * inv_scale;
                scaled &= isnan(want) ? isnan(g[k][i]) : g[k][i] == want;
            }
        CHECK(scaled, "scenario %d: every grad must be multiplied by inv_scale, non-finite or not", scenario);
        for (int k = 0; k < K; k++) free(g[k]), free(g0[k]);
    }
    /* inv_scale 1 leaves values bitwise unchanged; a finite value made inf by the scale is found */
    float v[3] = {1e30f, -2.5f, 0.0f}, v0[3];
    memcpy(v0, v, sizeof v);
    sdt_tensor tv = kt_f32(v, 1, 3, 0, 0, 0);
    sdt_tensor *one[1] = {&tv};
    bool found = false;
    CHECK(be->unscale_check(be, one, 1, 1.0f, &found) == 0 && !found && memcmp(v, v0, sizeof v) == 0,
          "inv_scale 1 must leave finite grads unchanged and unflagged");
    /* torch tests the input, not the product: a finite grad that overflows when scaled is not flagged */
    CHECK(be->unscale_check(be, one, 1, 1e10f, &found) == 0 && !found && isinf(v[0]),
          "a finite grad that overflows only when scaled must become inf without setting found_inf (torch)");

    /* f16 grads: the check reads the stored values, the product is rounded back to f16 */
    uint16_t h[3] = {sdt_f32_to_f16(60000.0f), sdt_f32_to_f16(-3.0f), 0x7c00u};
    sdt_tensor th = sdt_tensor_4d(h, SDT_F16, 1, 2, 0, 0, 0);
    sdt_tensor *half[1] = {&th};
    found = false;
    CHECK(be->unscale_check(be, half, 1, 0.5f, &found) == 0 && !found, "f16 60000 is finite and must not flag");
    CHECK(sdt_f16_to_f32(h[0]) == 30000.0f && sdt_f16_to_f32(h[1]) == -1.5f, "f16 grads must be scaled in place");
    th.shape[0] = 3;
    CHECK(be->unscale_check(be, half, 1, 0.5f, &found) == 0 && found && h[2] == 0x7c00u,
          "an f16 inf must flag and stay inf");
}

typedef struct adam_hp {
    float lr, beta1, beta2, eps, wd, grad_scale;
} adam_hp;

/* torch.optim.AdamW's step in float64 */
static void ref_adamw(double *p, double *m, double *v, const float *g, int64_t n, const adam_hp *h, int64_t step)
{
    double bc1 = 1 - pow(h->beta1, (double)step), bc2 = 1 - pow(h->beta2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        double gi = (double)g[i] * h->grad_scale;
        p[i] *= 1 - (double)h->lr * h->wd;
        m[i] = h->beta1 * m[i] + (1 - (double)h->beta1) * gi;
        v[i] = h->beta2 * v[i] + (1 - (double)h->beta2) * gi * gi;
        double denom = sqrt(v[i]) / sqrt(bc2) + h->eps;
        p[i] -= h->lr / bc1 * m[i] / denom;
    }
}

/* max |a - b| / max(max |b|, floor) */
static double rel_err_floor(const float *a, const double *b, int64_t n, double floor)
{
    double num = 0, den = floor;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || d != d) num = d; /* a NaN must fail, not vanish in a max */
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

static void check_adamw(sdt_backend *be, sdt_test_rng *r, int64_t n, const adam_hp *h)
{
    float *p = kt_randn(r, n, 1.0), *m = kt_alloc((size_t)n * 4), *v = kt_alloc((size_t)n * 4);
    double *pd = kt_to_double(p, n), *md = kt_alloc((size_t)n * 8), *vd = kt_alloc((size_t)n * 8);
    sdt_tensor tp = kt_f32(p, 1, n, 0, 0, 0), tm = kt_f32(m, 1, n, 0, 0, 0), tv = kt_f32(v, 1, n, 0, 0, 0);
    for (int64_t step = 1; step <= 6; step++) {
        float *g = kt_randn(r, n, 0.1);
        sdt_tensor tg = kt_f32(g, 1, n, 0, 0, 0);
        CHECK(be->adamw_update(be, &tp, &tg, &tm, &tv, h->lr, h->beta1, h->beta2, h->eps, h->wd, step, h->grad_scale) ==
                  0,
              "adamw failed: %s", be->error.message);
        ref_adamw(pd, md, vd, g, n, h, step);
        free(g);
    }
    /* m and v may cancel to near zero over steps: measure against the size of one step's term */
    double g_size = 0.1 * h->grad_scale;
    double ep = rel_err_floor(p, pd, n, 0), em = rel_err_floor(m, md, n, (1 - h->beta1) * g_size);
    double ev = rel_err_floor(v, vd, n, (1 - h->beta2) * g_size * g_size);
    CHECK(ep < 1e-5 && em < 1e-5 && ev < 1e-5, "adamw (n=%lld, lr %g, wd %g): rel err param %.3g m %.3g v %.3g",
          (long long)n, (double)h->lr, (double)h->wd, ep, em, ev);
    float g0 = 0;
    sdt_tensor tg0 = kt_f32(&g0, 1, 1, 0, 0, 0), tp1 = kt_f32(p, 1, 1, 0, 0, 0);
    sdt_tensor tm1 = kt_f32(m, 1, 1, 0, 0, 0), tv1 = kt_f32(v, 1, 1, 0, 0, 0);
    CHECK(be->adamw_update(be, &tp1, &tg0, &tm1, &tv1, h->lr, h->beta1, h->beta2, h->eps, h->wd, 0, 1) != 0,
          "adamw must refuse step 0");
    free(p), free(m), free(v), free(pd), free(md), free(vd);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("optimizer");
    sdt_backend *be = kt_backend();
    check_sum_squares(be, &r);
    check_unscale(be, &r);
    const adam_hp plain = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 1.0f};
    const adam_hp scaled = {5e-2f, 0.8f, 0.99f, 1e-6f, 0.1f, 0.37f};
    const int64_t sizes[] = {1, 7, 1031};
    for (int i = 0; i < 3; i++) {
        check_adamw(be, &r, sizes[i], &plain);
        check_adamw(be, &r, sizes[i], &scaled);
    }
    be->destroy(be);
    return sdt_test_finish("optimizer (sum_squares, unscale_check, adamw_update)");
}
