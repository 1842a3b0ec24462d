/* gemm_avx512.h - the CPU backend's own AVX-512 sgemm (internal to kernels/cpu; cpu_gemm.c calls it).
 *
 * Why our own: OpenBLAS picks its kernels per CPU, and its AVX2 kernels (what it runs on many AVX-512
 * CPUs, e.g. under OPENBLAS_CORETYPE=Haswell) leave half of an AVX-512 core's multiply-add width
 * unused; the convolutions and linears are most of the CPU step (bench/NOTES.md run 36). Each output
 * element is one fused multiply-add chain over k in order (acc = 0; acc = fma(a[i][k], b[k][j], acc)),
 * then alpha acc (beta = 0: C is not read) or fma(alpha, acc, beta c): its bits depend on its own row
 * of A, column of B and k alone, never on m, n, its place in the call, the blocking or the thread
 * split. gemm_avx512_reference computes the same bits one element at a time (the tests' model).
 */
#ifndef SDT_KERNELS_CPU_GEMM_AVX512_H
#define SDT_KERNELS_CPU_GEMM_AVX512_H

#include <stdbool.h>
#include <stddef.h>

/* Longest k the kernel takes: a packed column panel of B (k x 32 floats) then stays within L2; a
 * longer product goes to BLAS. A bound on k alone, so every row and column of a product takes one path. */
#define GEMM_AVX512_MAX_K 4096

/* True when this CPU and OS run AVX-512F (checked once). */
bool gemm_avx512_available(void);

/* Row-major C [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C, as cblas_sgemm, with the bits above.
 * Returns false, having written nothing, when the CPU lacks AVX-512F, k is over GEMM_AVX512_MAX_K or
 * its packing buffer cannot be allocated: the caller then runs BLAS. */
bool gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc);

/* B packed once for many products that share it (the attention's key tiles, read by every query tile):
 * gemm_avx512_packed with op(B) packed by gemm_avx512_pack_b gives gemm_avx512's bits, without packing
 * op(B) [k, n] again per call. Only where gemm_avx512_available() and 0 < k <= GEMM_AVX512_MAX_K.
 * gemm_avx512_packed_floats: the packed size (n rounded up to the 32-column panel, times k); the
 * buffer must be 64-byte aligned (aligned_alloc). */
size_t gemm_avx512_packed_floats(int n, int k);
void gemm_avx512_pack_b(bool trans_b, int n, int k, const float *b, int ldb, float *packed);
void gemm_avx512_packed(bool trans_a, int m, int n, int k, float alpha, const float *a, int lda, const float *packed,
                        float beta, float *c, int ldc);

/* The same bits, element by element in scalar code (any CPU): the tests' model of gemm_avx512. */
void gemm_avx512_reference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc);

#endif
