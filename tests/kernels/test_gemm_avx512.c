/* test_gemm_avx512 - kernels/cpu/gemm_avx512.h, the CPU backend's own AVX-512 sgemm:
 * - the scalar model (gemm_avx512_reference) against a double-precision product within the bound of a
 *   k-term float sum, all four transposes, odd shapes around the 8 x 32 tile's edges, k = 0, alpha and beta;
 * - gemm_avx512 bit for bit equal to the model on the same cases, with leading dimensions wider than the
 *   shape, so nothing outside C [m, n] is written and beta = 0 never reads C (NaN there stays out), and
 *   A and B in blocks of exactly their size (a sanitizer build sees a read past them);
 * - a row's bits do not depend on its place in the call or the call's size (a 1 x n product against the
 *   same row inside m = 77 at each offset), nor a column's on n;
 * - cpu_sgemm split over 2 threads gives the 1-thread bits (the panels' boundaries change nothing);
 * - B packed once (gemm_avx512_pack_b) and multiplied by gemm_avx512_packed: the model's bits on every
 *   case above, twice from the same panels (the attention reuses one packed key tile over its query tiles).
 * Without AVX-512F only the model's part runs (the kernel's cases say so and are skipped). */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_context.h"
#include "cpu/cpu_gemm.h"
#include "cpu/gemm_avx512.h"
#include "sdt_test.h"

enum { MAXD = 80, PAD = 5, MAXK = 300 };

static uint32_t lcg = 2463534242u;
static float next_value(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return (float)(lcg >> 8) / 16777216.0f - 0.5f;
}

/* Operands of op(A) [m, k] and op(B) [k, n] stored with PAD extra columns per row. */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
} gemm_case;

static float a_buf[(MAXK + PAD) * (MAXD + PAD)], b_buf[(MAXK + PAD) * (MAXD + PAD)];
static float c_model[MAXD * (MAXD + PAD)], c_kernel[MAXD * (MAXD + PAD)], c_start[MAXD * (MAXD + PAD)];

static float a_at(const gemm_case *g, int i, int p)
{
    return g->ta ? a_buf[(size_t)p * g->lda + i] : a_buf[(size_t)i * g->lda + p];
}
static float b_at(const gemm_case *g, int p, int j)
{
    return g->tb ? b_buf[(size_t)j * g->ldb + p] : b_buf[(size_t)p * g->ldb + j];
}

static bool same_bits(const float *x, const float *y, size_t n)
{
    return memcmp(x, y, sizeof(float) * n) == 0;
}

/* The model against double precision: |c - exact| <= (k + 2) eps (|alpha| sum |a b| + |beta c|) + tiny. */
static void check_model(const gemm_case *g)
{
    int bad = 0;
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double exact = 0.0, mag = 0.0;
            for (int p = 0; p < g->k; p++) {
                const double t = (double)a_at(g, i, p) * (double)b_at(g, p, j);
                exact += t, mag += fabs(t);
            }
            const double c0 = c_start[(size_t)i * g->ldc + j];
            exact = g->alpha * exact + (g->beta == 0.0f ? 0.0 : g->beta * c0);
            mag = fabs(g->alpha) * mag + (g->beta == 0.0f ? 0.0 : fabs(g->beta * c0));
            const double err = fabs((double)c_model[(size_t)i * g->ldc + j] - exact);
            if (!(err <= (g->k + 2) * 0x1p-24 * mag + 1e-30)) bad++;
        }
    CHECK(bad == 0, "model %dx%dx%d ta %d tb %d: %d elements outside the float bound", g->m, g->n, g->k, g->ta, g->tb,
          bad);
}

static void run_case(const gemm_case *g, bool kernel)
{
    for (size_t i = 0; i < sizeof a_buf / sizeof *a_buf; i++) a_buf[i] = next_value();
    for (size_t i = 0; i < sizeof b_buf / sizeof *b_buf; i++) b_buf[i] = next_value();
    const size_t cn = (size_t)g->m * g->ldc;
    for (size_t i = 0; i < cn; i++) c_start[i] = g->beta == 0.0f ? NAN : next_value(); /* beta 0: never read */
    memcpy(c_model, c_start, sizeof(float) * cn);
    gemm_avx512_reference(g->ta, g->tb, g->m, g->n, g->k, g->alpha, a_buf, g->lda, b_buf, g->ldb, g->beta, c_model,
                          g->ldc);
    check_model(g);
    for (int i = 0; i < g->m; i++) /* the padding columns keep their start values */
        CHECK(same_bits(c_model + (size_t)i * g->ldc + g->n, c_start + (size_t)i * g->ldc + g->n, PAD),
              "model wrote outside C");
    if (!kernel) return;
    memcpy(c_kernel, c_start, sizeof(float) * cn);
    /* The operands again in blocks of exactly their size, so a sanitizer build sees any read past them. */
    const size_t an = (size_t)(g->ta ? g->k : g->m) * g->lda, bn = (size_t)(g->tb ? g->n : g->k) * g->ldb;
    float *a = malloc(sizeof(float) * (an ? an : 1)), *b = malloc(sizeof(float) * (bn ? bn : 1));
    CHECK(a && b, "out of memory");
    if (a && b) {
        memcpy(a, a_buf, sizeof(float) * an), memcpy(b, b_buf, sizeof(float) * bn);
        const bool ran =
            gemm_avx512(g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->lda, b, g->ldb, g->beta, c_kernel, g->ldc);
        CHECK(ran, "gemm_avx512 declined %dx%dx%d", g->m, g->n, g->k);
    }
    free(a), free(b);
    CHECK(same_bits(c_kernel, c_model, cn), "kernel %dx%dx%d ta %d tb %d alpha %g beta %g: bits differ from the model",
          g->m, g->n, g->k, g->ta, g->tb, (double)g->alpha, (double)g->beta);
    if (g->k == 0) return; /* the packed entry takes 0 < k only */
    /* B packed once, then the product twice from the same panels (the second must not see the first). */
    const size_t floats = gemm_avx512_packed_floats(g->n, g->k);
    float *packed = aligned_alloc(64, (sizeof(float) * floats + 63) / 64 * 64);
    CHECK(packed != NULL, "out of memory");
    if (!packed) return;
    gemm_avx512_pack_b(g->tb, g->n, g->k, b_buf, g->ldb, packed);
    for (int pass = 0; pass < 2; pass++) {
        memcpy(c_kernel, c_start, sizeof(float) * cn);
        gemm_avx512_packed(g->ta, g->m, g->n, g->k, g->alpha, a_buf, g->lda, packed, g->beta, c_kernel, g->ldc);
        CHECK(same_bits(c_kernel, c_model, cn), "packed %dx%dx%d ta %d tb %d pass %d: bits differ from the model", g->m,
              g->n, g->k, g->ta, g->tb, pass);
    }
    free(packed);
}

static gemm_case make_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
    gemm_case g = {ta, tb, m, n, k, 0, 0, n + PAD, alpha, beta};
    g.lda = (ta ? m : k) + PAD, g.ldb = (tb ? k : n) + PAD;
    return g;
}

/* Row r of a product with m rows, alone and at offsets 0, 5, 76 of m = 77; then a column of n = 1 against n = 77. */
static void check_place_independence(void)
{
    const int k = 131, n = 45;
    gemm_case whole = make_case(false, true, 77, n, k, 1.0f, 0.0f);
    for (size_t i = 0; i < sizeof a_buf / sizeof *a_buf; i++) a_buf[i] = next_value();
    for (size_t i = 0; i < sizeof b_buf / sizeof *b_buf; i++) b_buf[i] = next_value();
    gemm_avx512(false, true, 77, n, k, 1.0f, a_buf, whole.lda, b_buf, whole.ldb, 0.0f, c_kernel, whole.ldc);
    const int rows[] = {0, 5, 76};
    for (int r = 0; r < 3; r++) {
        float alone[MAXD];
        gemm_avx512(false, true, 1, n, k, 1.0f, a_buf + (size_t)rows[r] * whole.lda, whole.lda, b_buf, whole.ldb, 0.0f,
                    alone, n);
        CHECK(same_bits(alone, c_kernel + (size_t)rows[r] * whole.ldc, n), "row %d alone differs from row %d of 77",
              rows[r], rows[r]);
    }
    gemm_case wide = make_case(false, false, 9, 77, k, 1.0f, 0.0f);
    gemm_avx512(false, false, 9, 77, k, 1.0f, a_buf, wide.lda, b_buf, wide.ldb, 0.0f, c_kernel, wide.ldc);
    const int cols[] = {0, 31, 32, 76};
    for (int q = 0; q < 4; q++) {
        float alone[9];
        gemm_avx512(false, false, 9, 1, k, 1.0f, a_buf, wide.lda, b_buf + cols[q], wide.ldb, 0.0f, alone, 1);
        int differ = 0;
        for (int i = 0; i < 9; i++) differ += !same_bits(&alone[i], c_kernel + (size_t)i * wide.ldc + cols[q], 1);
        CHECK(differ == 0, "column %d alone differs from column %d of 77 in %d rows", cols[q], cols[q], differ);
    }
}

/* cpu_sgemm on 1 and 2 threads (every product split: thread_small_work) gives the same bits. */
static void check_threads(void)
{
    sdt_backend *one = sdt_backend_cpu_create(1), *two = sdt_backend_cpu_create(2);
    CHECK(one && two, "cannot create the CPU backend");
    if (one && two) {
        ((cpu_context *)two->ctx)->thread_small_work = true;
        static const int shapes[][3] = {{64, 77, 200}, {77, 64, 33}};
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 4; t++) {
                gemm_case g = make_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 1.0f);
                for (size_t i = 0; i < sizeof a_buf / sizeof *a_buf; i++) a_buf[i] = next_value();
                for (size_t i = 0; i < sizeof b_buf / sizeof *b_buf; i++) b_buf[i] = next_value();
                for (size_t i = 0; i < (size_t)g.m * g.ldc; i++) c_start[i] = next_value();
                memcpy(c_model, c_start, sizeof(float) * (size_t)g.m * g.ldc);
                memcpy(c_kernel, c_start, sizeof(float) * (size_t)g.m * g.ldc);
                cpu_sgemm(one, g.ta, g.tb, g.m, g.n, g.k, 1.0f, a_buf, g.lda, b_buf, g.ldb, 1.0f, c_model, g.ldc);
                cpu_sgemm(two, g.ta, g.tb, g.m, g.n, g.k, 1.0f, a_buf, g.lda, b_buf, g.ldb, 1.0f, c_kernel, g.ldc);
                CHECK(same_bits(c_model, c_kernel, (size_t)g.m * g.ldc), "%dx%dx%d ta %d tb %d: 2 threads differ", g.m,
                      g.n, g.k, g.ta, g.tb);
            }
    }
    if (one) one->destroy(one);
    if (two) two->destroy(two);
}

/* blas_gemm_only (what the tests' GEMM hook sets): cpu_sgemm gives BLAS's own bits, every shape. */
static void check_blas_only(void)
{
    sdt_backend *be = sdt_backend_cpu_create(1);
    CHECK(be != NULL, "cannot create the CPU backend");
    if (!be) return;
    be->blas_gemm_only = true;
    gemm_case g = make_case(false, true, 33, 77, 40, 1.0f, 0.0f);
    for (size_t i = 0; i < sizeof a_buf / sizeof *a_buf; i++) a_buf[i] = next_value();
    for (size_t i = 0; i < sizeof b_buf / sizeof *b_buf; i++) b_buf[i] = next_value();
    cpu_sgemm(be, g.ta, g.tb, g.m, g.n, g.k, 1.0f, a_buf, g.lda, b_buf, g.ldb, 0.0f, c_kernel, g.ldc);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.m, g.n, g.k, 1.0f, a_buf, g.lda, b_buf, g.ldb, 0.0f, c_model,
                g.ldc);
    CHECK(same_bits(c_model, c_kernel, (size_t)g.m * g.ldc), "blas_gemm_only: cpu_sgemm is not BLAS's result");
    be->destroy(be);
}

int main(void)
{
    const bool kernel = gemm_avx512_available();
    printf("test_gemm_avx512: %s\n", kernel ? "AVX-512F: kernel and model" : "no AVX-512F: the model only");
    static const int dims[] = {1, 7, 8, 9, 16, 17, 31, 32, 33, 77};
    static const int ks[] = {0, 1, 8, 9, 33, 300};
    const float scalars[][2] = {{1.0f, 0.0f}, {0.125f, 1.0f}, {-0.7f, 0.5f}};
    int cases = 0;
    for (int t = 0; t < 4; t++)
        for (size_t mi = 0; mi < sizeof dims / sizeof *dims; mi++)
            for (size_t ni = 0; ni < sizeof dims / sizeof *dims; ni += 1 + (mi & 1))
                for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
                    const float *s = scalars[(mi + ni + ki) % 3];
                    gemm_case g = make_case(t & 1, t & 2, dims[mi], dims[ni], ks[ki], s[0], s[1]);
                    run_case(&g, kernel);
                    cases++;
                }
    printf("test_gemm_avx512: %d shapes\n", cases);
    if (kernel) {
        check_place_independence();
        check_threads();
        check_blas_only();
        CHECK(!gemm_avx512(false, false, 2, 2, GEMM_AVX512_MAX_K + 1, 1.0f, a_buf, GEMM_AVX512_MAX_K + 1, b_buf, 2,
                           0.0f, c_kernel, 2),
              "k over GEMM_AVX512_MAX_K must go to BLAS");
    }
    return sdt_test_finish("test_gemm_avx512");
}
