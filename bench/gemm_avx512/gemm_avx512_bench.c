/* gemm_avx512_bench - kernels/cpu/gemm_avx512 against cblas_sgemm (whatever kernels OpenBLAS took: see
 * OPENBLAS_CORETYPE) on one thread, at the GEMM shapes that carry the demo step (bench/NOTES.md run 36),
 * plus a check that each product's bits equal the scalar model's. Times are thread CPU seconds, the
 * best of 5 rounds of ~0.1 s each, so a loaded machine slows both sides alike rather than one:
 *   OPENBLAS_NUM_THREADS=1 taskset -c 1 build/bench/gemm_avx512/gemm_avx512_bench */
#define _GNU_SOURCE
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/gemm_avx512.h"

static double thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float next_value(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

int main(void)
{
    if (!gemm_avx512_available()) {
        printf("gemm_avx512_bench: this CPU has no AVX-512F; nothing to compare\n");
        return 0;
    }
    /* m, n, k, trans_a, trans_b: the demo step's 14 costliest shapes at batch 4 under Haswell's kernels
     * (bench/gemm_shapes, run 36), in that order: attention tiles (q k^T at 128 and 77 keys, p v, p^T dout),
     * conv forward per image (w [oc, 9c] x columns), conv input gradient (w^T dout), the linears. */
    static const int shapes[][5] = {
        {64, 128, 32, 0, 1},   {64, 77, 32, 0, 1},   {64, 256, 576, 0, 0},  {1152, 256, 64, 1, 0},
        {64, 256, 1152, 0, 0}, {64, 32, 128, 0, 0},  {128, 32, 64, 1, 0},   {256, 64, 512, 0, 0},
        {576, 256, 64, 1, 0},  {256, 512, 64, 0, 1}, {1152, 16, 128, 1, 0}, {128, 16, 1152, 0, 0},
        {256, 64, 64, 0, 0},   {256, 64, 64, 0, 1},
    };
    const char *core = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS %s, core %s (OPENBLAS_CORETYPE %s), 1 thread\n", openblas_get_config(), openblas_get_corename(),
           core ? core : "unset");
    printf(
        "| m x n x k | ta tb | ours GFLOP/s | OpenBLAS GFLOP/s | ours / OpenBLAS | bits = model |\n|---|---|---|---|---|---|\n");
    unsigned seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
        const int lda = ta ? m : k, ldb = tb ? k : n;
        float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
        float *c = malloc(sizeof(float) * (size_t)m * n), *model = malloc(sizeof(float) * (size_t)m * n);
        if (!a || !b || !c || !model) return 1;
        for (size_t i = 0; i < (size_t)m * k; i++) a[i] = next_value(&seed);
        for (size_t i = 0; i < (size_t)k * n; i++) b[i] = next_value(&seed);
        gemm_avx512(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
        gemm_avx512_reference(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, model, n);
        const int same = memcmp(c, model, sizeof(float) * (size_t)m * n) == 0;
        const int reps = (int)(1e8 / (2.0 * m * n * k)) + 3;
        double ours = 1e30, blas = 1e30;
        for (int round = 0; round < 5; round++) {
            double t = thread_seconds();
            for (int r = 0; r < reps; r++) gemm_avx512(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
            t = thread_seconds() - t;
            ours = t < ours ? t : ours;
            t = thread_seconds();
            for (int r = 0; r < reps; r++)
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k,
                            1.0f, a, lda, b, ldb, 0.0f, c, n);
            t = thread_seconds() - t;
            blas = t < blas ? t : blas;
        }
        const double flops = 2.0 * m * n * k * reps * 1e-9;
        printf("| %d x %d x %d | %d %d | %.0f | %.0f | %.2f | %s |\n", m, n, k, ta, tb, flops / ours, flops / blas,
               blas / ours, same ? "yes" : "NO");
        free(a), free(b), free(c), free(model);
    }
    return 0;
}
