/* cpu_gemm.c - GEMMs split over the backend's OpenMP threads when BLAS is single-threaded.
 *
 * The plugin never changes OpenBLAS's thread count: that setting is process-wide, and the host
 * (or its OPENBLAS_NUM_THREADS) owns it. When BLAS runs one thread, the product is split into
 * panels over the backend's OpenMP threads (the fast path; sdt-host asks for it). When BLAS
 * has its own threads, each product is one BLAS call and BLAS threads it, so the two pools are
 * never stacked on top of each other (docs/DESIGN.md section 8).
 *
 * On a CPU with AVX-512F, products with k <= GEMM_AVX512_MAX_K run gemm_avx512 (our kernel, one
 * thread a call) instead of BLAS: each element's bits then depend on k alone, so they are the same
 * for any panel split, thread count, row place or OPENBLAS_CORETYPE, and the panels are split over
 * the OpenMP threads whatever BLAS's own thread count (bench/NOTES.md run 36). */
#include "cpu_gemm.h"

#include "gemm_avx512.h"

#include <cblas.h>
#include <omp.h>

void cpu_sgemm(sdt_backend *be, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    const bool own = !be->blas_gemm_only && k <= GEMM_AVX512_MAX_K && gemm_avx512_available();
    /* Inside a parallel region (attention runs heads side by side) the caller's thread does it
     * all, even where a host enabled nested parallelism; a threaded BLAS splits on its own. */
    const int parts = omp_in_parallel() || (!own && openblas_get_num_threads() > 1) /* read, never set */
                          ? 1
                          : cpu_threads_over(be, (int64_t)m * n * (k > 0 ? k : 1), CPU_GEMM_MIN_MACS);
    /* Split the longer side of C into panels; the 16-multiple keeps panels on SIMD/cache-line boundaries. */
    const bool split_n = n >= m;
    const int len = split_n ? n : m;
    int panel = (len + parts - 1) / parts;
    panel = (panel + 15) / 16 * 16;
    if (parts <= 1 || panel >= len) {
        if (!own || !gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
            cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    const int npanels = (len + panel - 1) / panel;
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int p = 0; p < npanels; p++) {
        const int start = p * panel, size = start + panel <= len ? panel : len - start;
        /* columns [start, start+size) of B and C, or rows [start, start+size) of A and C */
        const int pm = split_n ? m : size, pn = split_n ? size : n;
        const float *pa = split_n ? a : a + (trans_a ? (size_t)start : (size_t)start * lda);
        const float *pb = !split_n ? b : b + (trans_b ? (size_t)start * ldb : (size_t)start);
        float *pc = split_n ? c + start : c + (size_t)start * ldc;
        if (!own || !gemm_avx512(trans_a, trans_b, pm, pn, k, alpha, pa, lda, pb, ldb, beta, pc, ldc))
            cblas_sgemm(CblasRowMajor, ta, tb, pm, pn, k, alpha, pa, lda, pb, ldb, beta, pc, ldc);
    }
}
