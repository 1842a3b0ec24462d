/* cpu_gemm.h - the CPU backend's one entry to sgemm (internal to kernels/cpu).
 *
 * Why not call cblas_sgemm directly: OpenBLAS (Debian's pthread build) keeps
 * its own worker pool, and its workers and OpenMP's spin-wait for work after
 * each call. On a small machine the two pools then fight over the cores: a
 * layernorm or an im2col right before a GEMM ran up to 5x slower in
 * bench/kernels_cpu. So the backend uses ONE pool, OpenMP's: when the host runs
 * OpenBLAS on one thread (the plugin never sets it), cpu_sgemm splits each GEMM of
 * CPU_GEMM_MIN_MACS or more into column (or row) panels that the backend's OpenMP
 * threads compute side by side. Called inside
 * an OpenMP parallel region (e.g. one attention head per thread) it runs on
 * the calling thread alone, since nested regions are inactive.
 */
#ifndef SDT_KERNELS_CPU_GEMM_H
#define SDT_KERNELS_CPU_GEMM_H

#include "cpu_context.h"

/* Row-major C [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C, as cblas_sgemm. */
void cpu_sgemm(sdt_backend *be, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);

#endif
