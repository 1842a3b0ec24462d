/* test_attention.c - scaled dot-product attention (torch.nn.functional.
 * scaled_dot_product_attention, scale 1/sqrt(D)) forward and backward on the CPU:
 * self, causal self and cross-attention (Tq != Tk), with the saved logsumexp and
 * with everything recomputed, at sizes that span several query and key tiles, against
 * a float64 reference and finite differences, backward writing its gradients over NaN and 1e30
 * (it writes them, ops.h); and f16 q, k, v whose logits pass f16's range
 * (diffusers' upcast_attention case: SD 2.1 in fp16) stay finite and right, since the logits
 * and the softmax are fp32 whatever the storage. Backward runs whole heads as units on one thread (each tile
 * pair's probabilities once) and tiles in two passes on three (the cases above): bit for bit the same. */
#include "cpu/gemm_avx512.h"
#include "op_check.h"

typedef struct attn_ref {
    int64_t b, tq, tk, h, d;
    bool causal;
    double *q, *k, *v;
    const double *dout;
} attn_ref;

static int64_t at(const attn_ref *r, int64_t t_len, int64_t bb, int64_t t, int64_t hh)
{
    return (bb * t_len + t) * r->h * r->d + hh * r->d;
}

/* probs [B, H, Tq, Tk], out [B, Tq, H*D] and (when not NULL) lse [B, H, Tq]. */
static void attn_forward_ref(const attn_ref *r, double *probs, double *out, double *lse)
{
    const double scale = 1.0 / sqrt((double)r->d);
    for (int64_t bb = 0; bb < r->b; bb++)
        for (int64_t hh = 0; hh < r->h; hh++)
            for (int64_t i = 0; i < r->tq; i++) {
                double *p = probs + ((bb * r->h + hh) * r->tq + i) * r->tk;
                double max = -INFINITY;
                for (int64_t j = 0; j < r->tk; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < r->d; e++)
                        s += r->q[at(r, r->tq, bb, i, hh) + e] * r->k[at(r, r->tk, bb, j, hh) + e];
                    p[j] = (r->causal && j > i) ? -INFINITY : s * scale;
                    if (p[j] > max) max = p[j];
                }
                double sum = 0;
                for (int64_t j = 0; j < r->tk; j++) sum += (p[j] = exp(p[j] - max));
                for (int64_t j = 0; j < r->tk; j++) p[j] /= sum;
                if (lse) lse[(bb * r->h + hh) * r->tq + i] = max + log(sum);
                for (int64_t e = 0; e < r->d; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < r->tk; j++) o += p[j] * r->v[at(r, r->tk, bb, j, hh) + e];
                    out[at(r, r->tq, bb, i, hh) + e] = o;
                }
            }
}

static double attn_loss(const double *param, void *ctx)
{
    (void)param;
    const attn_ref *r = ctx;
    double *p = op_zeros_d(r->b * r->h * r->tq * r->tk), *out = op_zeros_d(r->b * r->tq * r->h * r->d);
    attn_forward_ref(r, p, out, NULL);
    double l = sdt_fd_dot(out, r->dout, r->b * r->tq * r->h * r->d);
    free(p);
    free(out);
    return l;
}

static void attn_backward_ref(const attn_ref *r, double *dq, double *dk, double *dv)
{
    const double scale = 1.0 / sqrt((double)r->d);
    double *probs = op_zeros_d(r->b * r->h * r->tq * r->tk), *out = op_zeros_d(r->b * r->tq * r->h * r->d);
    double *dp = op_zeros_d(r->tk);
    attn_forward_ref(r, probs, out, NULL);
    for (int64_t bb = 0; bb < r->b; bb++)
        for (int64_t hh = 0; hh < r->h; hh++)
            for (int64_t i = 0; i < r->tq; i++) {
                const double *p = probs + ((bb * r->h + hh) * r->tq + i) * r->tk;
                const double *go = r->dout + at(r, r->tq, bb, i, hh);
                double dot = 0;
                for (int64_t j = 0; j < r->tk; j++) {
                    dp[j] = 0;
                    for (int64_t e = 0; e < r->d; e++) {
                        dp[j] += go[e] * r->v[at(r, r->tk, bb, j, hh) + e];
                        dv[at(r, r->tk, bb, j, hh) + e] += p[j] * go[e];
                    }
                    dot += dp[j] * p[j];
                }
                for (int64_t j = 0; j < r->tk; j++) {
                    const double ds = p[j] * (dp[j] - dot) * scale;
                    for (int64_t e = 0; e < r->d; e++) {
                        dq[at(r, r->tq, bb, i, hh) + e] += ds * r->k[at(r, r->tk, bb, j, hh) + e];
                        dk[at(r, r->tk, bb, j, hh) + e] += ds * r->q[at(r, r->tq, bb, i, hh) + e];
                    }
                }
            }
    free(probs);
    free(out);
    free(dp);
}

static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t b, int64_t tq, int64_t tk, int64_t h, int64_t d,
                     bool causal, bool save_lse, sdt_dtype qdtype)
{
    char what[128];
    snprintf(what, sizeof what, "attention B%lld Tq%lld Tk%lld H%lld D%lld%s%s q:%s", (long long)b, (long long)tq,
             (long long)tk, (long long)h, (long long)d, causal ? " causal" : "",
             save_lse ? " saved-lse" : " recomputed", sdt_dtype_name(qdtype));
    const int64_t nq = b * tq * h * d, nk = b * tk * h * d, np = b * h * tq * tk, nl = b * h * tq;
    float *q = kt_randn(rng, nq, 1.0), *k = kt_randn(rng, nk, 1.0), *v = kt_randn(rng, nk, 1.0);
    void *q16 = op_store_as(q, nq, qdtype);
    const int64_t qs[3] = {b, tq, h * d}, ks[3] = {b, tk, h * d}, ls[3] = {b, h, tq};
    sdt_tensor tq_ = sdt_tensor_make(q16, qdtype, SDT_DEVICE_CPU, 3, qs);
    sdt_tensor tk_ = op_tensor(k, 3, ks), tv = op_tensor(v, 3, ks);
    float *out = kt_randn(rng, nq, 1.0), *lse = kt_randn(rng, nl, 1.0);
    sdt_tensor tout = op_tensor(out, 3, qs), tl = op_tensor(lse, 3, ls);
    CHECK(be->attention_forward(be, &tout, save_lse ? &tl : NULL, &tq_, &tk_, &tv, (int)h, causal) == 0,
          "%s forward failed: %s", what, be->error.message);

    float *dout = kt_randn(rng, nq, 1.0);
    attn_ref r = {
        b, tq, tk, h, d, causal, kt_to_double(q, nq), kt_to_double(k, nk), kt_to_double(v, nk), kt_to_double(dout, nq)};
    double *ref_p = op_zeros_d(np), *ref_o = op_zeros_d(nq), *ref_l = op_zeros_d(nl);
    attn_forward_ref(&r, ref_p, ref_o, ref_l);
    op_check_forward(what, out, ref_o, nq);
    char name[192];
    if (save_lse) {
        snprintf(name, sizeof name, "%s lse", what);
        op_check_forward(name, lse, ref_l, nl);
    }

    /* backward WRITES dq, dk, dv (ops.h): run it over NaN, then over 1e30 */
    kt_grad g_dq = kt_grad_make_garbage(nq), g_dk = kt_grad_make_garbage(nk), g_dv = kt_grad_make_garbage(nk);
    sdt_tensor tdout = op_tensor(dout, 3, qs);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdq = op_tensor(op_grad_buf(&g_dq, pass), 3, qs), tdk = op_tensor(op_grad_buf(&g_dk, pass), 3, ks),
                   tdv = op_tensor(op_grad_buf(&g_dv, pass), 3, ks);
        CHECK(be->attention_backward(be, &tdq, &tdk, &tdv, &tdout, &tq_, &tk_, &tv, save_lse ? &tout : NULL,
                                     save_lse ? &tl : NULL, (int)h, causal) == 0,
              "%s backward failed: %s", what, be->error.message);
    }
    double *gq = op_zeros_d(nq), *gk = op_zeros_d(nk), *gv = op_zeros_d(nk);
    attn_backward_ref(&r, gq, gk, gv);
    snprintf(name, sizeof name, "%s dq", what);
    op_check_written_grad(name, &g_dq, gq, attn_loss, &r, r.q);
    snprintf(name, sizeof name, "%s dk", what);
    op_check_written_grad(name, &g_dk, gk, attn_loss, &r, r.k);
    snprintf(name, sizeof name, "%s dv", what);
    op_check_written_grad(name, &g_dv, gv, attn_loss, &r, r.v);
    /* a gradient that is not wanted (NULL) changes nothing in the others: dq alone, then dk and dv */
    kt_grad only_q = kt_grad_make_garbage(nq), only_k = kt_grad_make_garbage(nk), only_v = kt_grad_make_garbage(nk);
    sdt_tensor oq = op_tensor(only_q.fresh, 3, qs), ok = op_tensor(only_k.fresh, 3, ks),
               ov = op_tensor(only_v.fresh, 3, ks);
    CHECK(be->attention_backward(be, &oq, NULL, NULL, &tdout, &tq_, &tk_, &tv, save_lse ? &tout : NULL,
                                 save_lse ? &tl : NULL, (int)h, causal) == 0 &&
              be->attention_backward(be, NULL, &ok, &ov, &tdout, &tq_, &tk_, &tv, save_lse ? &tout : NULL,
                                     save_lse ? &tl : NULL, (int)h, causal) == 0,
          "%s backward with NULL gradients failed: %s", what, be->error.message);
    CHECK(memcmp(only_q.fresh, g_dq.fresh, (size_t)nq * sizeof(float)) == 0 &&
              memcmp(only_k.fresh, g_dk.fresh, (size_t)nk * sizeof(float)) == 0 &&
              memcmp(only_v.fresh, g_dv.fresh, (size_t)nk * sizeof(float)) == 0,
          "%s: dq alone, or dk and dv without dq, must be written with the same bits as all three", what);
    kt_grad_free(&only_q);
    kt_grad_free(&only_k);
    kt_grad_free(&only_v);
    op_store_free(q16, q);
    free(q);
    free(k);
    free(v);
    free(out);
    free(lse);
    free(dout);
    free(ref_p);
    free(ref_o);
    free(ref_l);
    kt_grad_free(&g_dq);
    kt_grad_free(&g_dk);
    kt_grad_free(&g_dv);
    free(gq);
    free(gk);
    free(gv);
    free(r.q);
    free(r.k);
    free(r.v);
    free((void *)r.dout);
}

/* q . k / sqrt(64) = 80000 > 65504 for the matching key: in f16 arithmetic the logit is inf
 * and the softmax NaN. The output is that key's value row, the logsumexp 80000. */
static void check_logits_past_f16(sdt_backend *be, sdt_test_rng *rng)
{
    enum { TK = 3, D = 64 };
    float q[D], k[TK * D], v[TK * D];
    for (int i = 0; i < D; i++) q[i] = sdt_test_uniform(rng) < 0.5 ? -100.0f : 100.0f;
    for (int j = 0; j < TK; j++)
        for (int i = 0; i < D; i++) {
            k[j * D + i] = j == 0 ? q[i] : (sdt_test_uniform(rng) < 0.5 ? -100.0f : 100.0f);
            v[j * D + i] = (float)sdt_test_normal(rng);
        }
    const int64_t qs[3] = {1, 1, D}, ks[3] = {1, TK, D}, ls[3] = {1, 1, 1};
    void *q16 = op_store_as(q, D, SDT_F16), *k16 = op_store_as(k, TK * D, SDT_F16),
         *v16 = op_store_as(v, TK * D, SDT_F16);
    uint16_t out16[D];
    float lse = 0.0f;
    sdt_tensor tq = sdt_tensor_make(q16, SDT_F16, SDT_DEVICE_CPU, 3, qs),
               tk = sdt_tensor_make(k16, SDT_F16, SDT_DEVICE_CPU, 3, ks);
    sdt_tensor tv = sdt_tensor_make(v16, SDT_F16, SDT_DEVICE_CPU, 3, ks),
               tout = sdt_tensor_make(out16, SDT_F16, SDT_DEVICE_CPU, 3, qs);
    sdt_tensor tl = op_tensor(&lse, 3, ls);
    CHECK(be->attention_forward(be, &tout, &tl, &tq, &tk, &tv, 1, false) == 0, "f16 past-range forward: %s",
          be->error.message);
    float out[D];
    sdt_load_f32(out16, SDT_F16, out, D);
    double worst = 0;
    for (int i = 0; i < D; i++) {
        double want = sdt_f16_to_f32(((const uint16_t *)v16)[i]);
        double e = isfinite(out[i]) ? fabs(out[i] - want) : INFINITY;
        if (e > worst) worst = e;
    }
    CHECK(worst <= 1e-3, "f16 logits of 80000: the output is the matching key's value row (worst error %g)", worst);
    CHECK(fabs(lse - 80000.0) <= 80000.0 * 1e-6, "the logsumexp is 80000, in f32 (got %.9g)", (double)lse);
    op_store_free(q16, q);
    op_store_free(k16, k);
    op_store_free(v16, v);
}

static void check_rejects(sdt_backend *be)
{
    float buf[256] = {0};
    const int64_t qs[3] = {1, 4, 6}, ks[3] = {1, 3, 6};
    sdt_tensor q = op_tensor(buf, 3, qs), k = op_tensor(buf, 3, ks), out = op_tensor(buf, 3, qs);
    op_check_rejects(be, be->attention_forward(be, &out, NULL, &q, &k, &k, 4, false), "attention_forward",
                     "a head count that does not divide H*D");
    op_check_rejects(be, be->attention_forward(be, &out, NULL, &q, &k, &k, 2, true), "attention_forward",
                     "causal with Tq != Tk");
    const int64_t ls[3] = {1, 2, 4}, bad_ls[3] = {1, 2, 3};
    sdt_tensor lse = op_tensor(buf, 3, ls), bad_lse = op_tensor(buf, 3, bad_ls);
    op_check_rejects(be, be->attention_forward(be, &out, &bad_lse, &q, &k, &k, 2, false), "attention_forward",
                     "an lse that is not [B, H, Tq]");
    op_check_rejects(be, be->attention_backward(be, &out, NULL, NULL, &out, &q, &k, &k, NULL, &lse, 2, false),
                     "attention_backward", "lse without forward's out");
}

/* Backward on one thread (whole heads per unit: head_unit) and on three (few heads: the dk/dv and dq passes;
 * 12 heads: whole heads side by side) writes the same bits, with and without the saved lse, causal and cross, over several tiles. */
static void check_whole_heads_same_bits(sdt_backend *three, sdt_test_rng *rng)
{
    sdt_backend *one = sdt_backend_cpu_create(1);
    CHECK(one != NULL, "cannot create a 1-thread CPU backend");
    if (!one) return;
    /* the last shape has B x H = 12 = 4 x 3 heads: whole heads on three threads too (units side by side) */
    static const int64_t shapes[][5] = {
        {2, 150, 150, 2, 4}, {1, 70, 260, 2, 3}, {3, 9, 77, 2, 32}, {1, 64, 128, 1, 8}, {4, 70, 140, 3, 8}};
    for (int s = 0; s < 5; s++)
        for (int variant = 0; variant < 2; variant++) {
            const int64_t b = shapes[s][0], tq = shapes[s][1], tk = shapes[s][2], h = shapes[s][3], d = shapes[s][4];
            const bool causal = s == 0 && variant == 0, save_lse = variant == 0;
            const int64_t nq = b * tq * h * d, nk = b * tk * h * d, qs[3] = {b, tq, h * d}, ks[3] = {b, tk, h * d},
                          ls[3] = {b, h, tq};
            float *q = kt_randn(rng, nq, 1.0), *k = kt_randn(rng, nk, 1.0), *v = kt_randn(rng, nk, 1.0),
                  *dout = kt_randn(rng, nq, 1.0), *out = kt_randn(rng, nq, 1.0), *lse = kt_randn(rng, b * h * tq, 1.0);
            float *grads[2][3];
            sdt_tensor tq_ = op_tensor(q, 3, qs), tk_ = op_tensor(k, 3, ks), tv = op_tensor(v, 3, ks),
                       tdo = op_tensor(dout, 3, qs), to = op_tensor(out, 3, qs), tl = op_tensor(lse, 3, ls);
            CHECK(one->attention_forward(one, &to, &tl, &tq_, &tk_, &tv, (int)h, causal) == 0, "forward failed");
            for (int t = 0; t < 2; t++) {
                sdt_backend *be = t == 0 ? one : three;
                grads[t][0] = kt_randn(rng, nq, 1.0), grads[t][1] = kt_randn(rng, nk, 1.0);
                grads[t][2] = kt_randn(rng, nk, 1.0);
                sdt_tensor dq = op_tensor(grads[t][0], 3, qs), dk = op_tensor(grads[t][1], 3, ks),
                           dv = op_tensor(grads[t][2], 3, ks);
                CHECK(be->attention_backward(be, &dq, &dk, &dv, &tdo, &tq_, &tk_, &tv, save_lse ? &to : NULL,
                                             save_lse ? &tl : NULL, (int)h, causal) == 0,
                      "backward failed: %s", be->error.message);
            }
            const char *names[3] = {"dq", "dk", "dv"};
            for (int g = 0; g < 3; g++)
                CHECK(memcmp(grads[0][g], grads[1][g], sizeof(float) * (size_t)(g == 0 ? nq : nk)) == 0,
                      "B%lld Tq%lld Tk%lld H%lld D%lld%s%s: %s on 1 thread (whole heads) differs from 3 threads",
                      (long long)b, (long long)tq, (long long)tk, (long long)h, (long long)d, causal ? " causal" : "",
                      save_lse ? "" : " recomputed", names[g]);
            for (int t = 0; t < 2; t++)
                for (int g = 0; g < 3; g++) free(grads[t][g]);
            free(q), free(k), free(v), free(dout), free(out), free(lse);
        }
    one->destroy(one);
}

/* blas_gemm_only (the core-variant tests' hook) sends the attention's tile products to BLAS too, not to the
 * packed AVX-512 kernel: at d = 64 BLAS's sums are ordered otherwise, so the forward's bits differ. */
static void check_blas_gemm_only(sdt_test_rng *rng)
{
    if (!gemm_avx512_available()) return; /* both are BLAS there */
    sdt_backend *own = sdt_backend_cpu_create(1), *blas = sdt_backend_cpu_create(1);
    CHECK(own && blas, "cannot create the CPU backends");
    if (own && blas) {
        blas->blas_gemm_only = true;
        const int64_t n = 64 * 64, shape[3] = {1, 64, 64};
        float *q = kt_randn(rng, n, 1.0), *out_own = kt_randn(rng, n, 1.0), *out_blas = kt_randn(rng, n, 1.0);
        sdt_tensor tq_ = op_tensor(q, 3, shape), to = op_tensor(out_own, 3, shape), tb = op_tensor(out_blas, 3, shape);
        CHECK(own->attention_forward(own, &to, NULL, &tq_, &tq_, &tq_, 1, false) == 0 &&
                  blas->attention_forward(blas, &tb, NULL, &tq_, &tq_, &tq_, 1, false) == 0,
              "forward failed");
        CHECK(memcmp(out_own, out_blas, sizeof(float) * (size_t)n) != 0,
              "blas_gemm_only: the attention's products did not go to BLAS (the same bits as the AVX-512 kernel)");
        free(q), free(out_own), free(out_blas);
    }
    if (own) own->destroy(own);
    if (blas) blas->destroy(blas);
}

int main(void)
{
    printf("op: attention\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_attention");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 2, 5, 5, 2, 3, false, true, SDT_F32);   /* self */
    run_case(be, &rng, 2, 6, 6, 2, 5, true, true, SDT_F32);    /* causal self (CLIP) */
    run_case(be, &rng, 1, 7, 7, 1, 8, true, false, SDT_F32);   /* causal, recomputed in backward */
    run_case(be, &rng, 2, 7, 3, 3, 4, false, true, SDT_F32);   /* cross-attention Tq > Tk */
    run_case(be, &rng, 1, 2, 11, 2, 3, false, false, SDT_F32); /* cross-attention Tq < Tk, recomputed */
    run_case(be, &rng, 1, 1, 1, 1, 1, false, true, SDT_F32);   /* everything 1 */
    run_case(be, &rng, 1, 5, 4, 2, 3, false, true, SDT_F16);   /* f16 q storage */
    /* Several query tiles (64 rows) and key tiles (128 keys), partial last tiles. */
    run_case(be, &rng, 1, 150, 150, 1, 4, true, true, SDT_F32);  /* causal across tiles */
    run_case(be, &rng, 1, 70, 260, 2, 3, false, false, SDT_F32); /* cross, recomputed */
    check_logits_past_f16(be, &rng);
    check_whole_heads_same_bits(be, &rng);
    check_blas_gemm_only(&rng);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_attention");
}
