/* test_attention_bias - attention with an additive f32 logit bias and an explicit scale (T5): forward (out,
 * lse) and backward (dq, dk, dv written over whatever they held) against a float64 reference, the reference
 * gradient against finite differences; a shared bias [1, H, Tq, Tk] and a per-batch one with -inf entries
 * (a padding mask), a fully masked row (zeros, no NaN), backward without the saved lse, NULL bias equal to
 * attention_forward at scale 1/sqrt(D), and sequences longer than the CPU's tiles. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct ab_ctx {
    int B, H, Tq, Tk, D;
    double scale;
    const double *bias; /* [Bb, H, Tq, Tk] or NULL */
    int Bb;
} ab_ctx;

/* x = [q (B Tq H D), k (B Tk H D), v (B Tk H D)] -> y = out (B Tq H D) */
static void ref_forward(const double *x, double *y, void *arg)
{
    const ab_ctx *c = arg;
    const int HD = c->H * c->D;
    const double *q = x, *k = q + (int64_t)c->B * c->Tq * HD, *v = k + (int64_t)c->B * c->Tk * HD;
    double *s = malloc(sizeof(double) * (size_t)c->Tk);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < c->Tq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < c->Tk; j++) {
                    double d = 0;
                    for (int e = 0; e < c->D; e++)
                        d += q[((int64_t)b * c->Tq + i) * HD + h * c->D + e] *
                             k[((int64_t)b * c->Tk + j) * HD + h * c->D + e];
                    s[j] =
                        c->scale * d +
                        (c->bias ? c->bias[(((int64_t)(c->Bb == 1 ? 0 : b) * c->H + h) * c->Tq + i) * c->Tk + j] : 0);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < c->Tk; j++) sum += (s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx));
                for (int e = 0; e < c->D; e++) {
                    double o = 0;
                    for (int j = 0; j < c->Tk; j++) o += s[j] * v[((int64_t)b * c->Tk + j) * HD + h * c->D + e];
                    y[((int64_t)b * c->Tq + i) * HD + h * c->D + e] = sum > 0 ? o / sum : 0;
                }
            }
    free(s);
}

static void check_case(sdt_backend *be, sdt_test_rng *r, int B, int H, int Tq, int Tk, int D, int Bb, bool masked)
{
    const int HD = H * D;
    const int64_t nq = (int64_t)B * Tq * HD, nk = (int64_t)B * Tk * HD, nx = nq + 2 * nk,
                  nb = (int64_t)Bb * H * Tq * Tk;
    float *x = kt_randn(r, nx, 1.0), *bias = Bb ? kt_randn(r, nb, 1.0) : NULL;
    if (masked) /* batch row b masks its last b + 1 keys; batch 1's query 0 sees nothing in head 0 */
        for (int b = 0; b < Bb; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < Tq; i++)
                    for (int j = 0; j < Tk; j++)
                        if (j >= Tk - 1 - b || (b == 1 && h == 0 && i == 0))
                            bias[(((int64_t)b * H + h) * Tq + i) * Tk + j] = -INFINITY;
    float *out = kt_alloc((size_t)nq * sizeof(float)), *lse = kt_alloc((size_t)B * H * Tq * sizeof(float));
    float *dy = kt_randn(r, nq, 1.0);
    kt_grad g = kt_grad_make_garbage(nx), g2 = kt_grad_make_garbage(nx);
    sdt_tensor tq = kt_f32(x, 3, B, Tq, HD, 0), tk = kt_f32(x + nq, 3, B, Tk, HD, 0),
               tv = kt_f32(x + nq + nk, 3, B, Tk, HD, 0);
    sdt_tensor tb = kt_f32(bias, 4, Bb, H, Tq, Tk), to = kt_f32(out, 3, B, Tq, HD, 0), tl = kt_f32(lse, 3, B, H, Tq, 0);
    sdt_tensor tdy = kt_f32(dy, 3, B, Tq, HD, 0);
    const double scale = Bb ? 0.7 : 1.0 / sqrt((double)D);
    double *xd = kt_to_double(x, nx), *dyd = kt_to_double(dy, nq), *bd = Bb ? kt_to_double(bias, nb) : NULL;
    ab_ctx c = {B, H, Tq, Tk, D, scale, bd, Bb};
    double *yref = kt_alloc((size_t)nq * sizeof(double)), *dxref = kt_alloc((size_t)nx * sizeof(double));
    ref_forward(xd, yref, &c);
    /* the float64 reference gradient: central differences of sum(dy * out) */
    sdt_fd_vjp vjp = {ref_forward, &c, dyd, kt_alloc((size_t)nq * sizeof(double)), nq};
    sdt_fd_gradient(sdt_fd_vjp_loss, &vjp, xd, nx, 1e-6, dxref);
    free(vjp.y);

    CHECK(be->attention_bias_forward(be, &to, &tl, &tq, &tk, &tv, Bb ? &tb : NULL, H, (float)scale) == 0,
          "attention_bias forward failed: %s", be->error.message);
    double fwd = sdt_rel_err_fd(out, yref, nq);
    CHECK(fwd < 1e-5, "attention_bias forward B%d H%d Tq%d Tk%d D%d Bb%d: rel err %.3g", B, H, Tq, Tk, D, Bb, fwd);
    bool finite = true;
    for (int64_t i = 0; i < nq; i++) finite = finite && isfinite(out[i]);
    CHECK(finite, "attention_bias forward: a fully masked row must give zeros, not NaN");
    sdt_tensor dq = kt_f32(g.fresh, 3, B, Tq, HD, 0), dk = kt_f32(g.fresh + nq, 3, B, Tk, HD, 0);
    sdt_tensor dv = kt_f32(g.fresh + nq + nk, 3, B, Tk, HD, 0);
    sdt_tensor dqa = kt_f32(g.acc, 3, B, Tq, HD, 0), dka = kt_f32(g.acc + nq, 3, B, Tk, HD, 0);
    sdt_tensor dva = kt_f32(g.acc + nq + nk, 3, B, Tk, HD, 0);
    CHECK(be->attention_bias_backward(be, &dq, &dk, &dv, &tdy, &tq, &tk, &tv, &to, &tl, Bb ? &tb : NULL, H,
                                      (float)scale) == 0 &&
              be->attention_bias_backward(be, &dqa, &dka, &dva, &tdy, &tq, &tk, &tv, &to, &tl, Bb ? &tb : NULL, H,
                                          (float)scale) == 0,
          "attention_bias backward failed: %s", be->error.message);
    CHECK(kt_grad_written(&g), "attention_bias backward over NaN and over 1e30 differ: it must write dq, dk, dv");
    double bwd = sdt_rel_err_fd(g.fresh, dxref, nx);
    CHECK(bwd < 1e-4, "attention_bias backward B%d H%d Tq%d Tk%d: f32 vs float64 (finite differences) rel err %.3g", B,
          H, Tq, Tk, bwd);
    /* without the saved statistics backward recomputes them: the same values */
    sdt_tensor dq2 = kt_f32(g2.fresh, 3, B, Tq, HD, 0), dk2 = kt_f32(g2.fresh + nq, 3, B, Tk, HD, 0);
    sdt_tensor dv2 = kt_f32(g2.fresh + nq + nk, 3, B, Tk, HD, 0);
    CHECK(be->attention_bias_backward(be, &dq2, &dk2, &dv2, &tdy, &tq, &tk, &tv, NULL, NULL, Bb ? &tb : NULL, H,
                                      (float)scale) == 0,
          "attention_bias backward (recompute) failed: %s", be->error.message);
    double rec = sdt_rel_err_fd(g2.fresh, dxref, nx);
    CHECK(rec < 1e-4, "attention_bias backward without lse: rel err %.3g", rec);
    if (!Bb) { /* no bias and SDPA's scale: attention_forward's numbers */
        float *o2 = kt_alloc((size_t)nq * sizeof(float));
        sdt_tensor to2 = kt_f32(o2, 3, B, Tq, HD, 0);
        CHECK(be->attention_forward(be, &to2, NULL, &tq, &tk, &tv, H, false) == 0, "attention failed");
        CHECK(memcmp(o2, out, (size_t)nq * sizeof(float)) == 0,
              "attention_bias without bias differs from attention_forward");
        free(o2);
    }
    free(x), free(bias), free(out), free(lse), free(dy), free(xd), free(dyd), free(bd), free(yref), free(dxref);
    kt_grad_free(&g), kt_grad_free(&g2);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("attention_bias");
    sdt_backend *be = kt_backend();
    check_case(be, &r, 1, 1, 1, 1, 1, 1, false);
    check_case(be, &r, 2, 3, 5, 7, 4, 1, false);    /* shared bias, Tq != Tk */
    check_case(be, &r, 2, 2, 6, 6, 8, 2, true);     /* per-batch bias with a mask and a fully masked row */
    check_case(be, &r, 1, 2, 70, 140, 4, 1, false); /* past the CPU's 64 x 128 tiles */
    check_case(be, &r, 2, 2, 9, 9, 8, 0, false);    /* no bias */
    be->destroy(be);
    return sdt_test_finish("attention_bias");
}
