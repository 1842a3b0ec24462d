/* vec_expf.h - expf over an array, 4 lanes at a time where the CPU has AVX2 and FMA, with exactly
 * the bits glibc's expf returns (internal to kernels/cpu).
 *
 * Why: the CPU step called libm's scalar expf per element (attention's softmax forward and its
 * recomputation in backward, SiLU), 12% of the demo-sized step (bench/NOTES.md run 33). The vector
 * code is glibc's own algorithm (sysdeps/ieee754/flt-32/e_expf.c: a 32-entry table of 2^(i/32) and a
 * cubic in double) with the fused multiply-adds of the variant glibc runs on such a CPU
 * (__expf_fma), so every result is bit for bit expf's; lanes at |x| >= 88, inf and NaN go to expf
 * itself. It is used only after a check at first use finds it equal to this process's expf on a
 * spread of inputs (another libm: the scalar loop, the same bits as before). */
#ifndef SDT_KERNELS_CPU_VEC_EXPF_H
#define SDT_KERNELS_CPU_VEC_EXPF_H

#include <immintrin.h>
#include <stdint.h>

#include "shared_math.h"

/* e^x of 4 doubles by expf's method: shared_math.h's shared_exp_tabled (the same operations, in the
 * same order and with the same fusions as __expf_fma) 4 lanes at a time, so each lane has its bits and a
 * float x gives expf's bits after one rounding to float. For code compiled for AVX2 + FMA only. */
__attribute__((target("avx2,fma"))) static inline __m256d cpu_exp4d_avx2(__m256d xd)
{
    const __m256d invln2n = _mm256_set1_pd(SHARED_EXPF_INVLN2N), shift = _mm256_set1_pd(SHARED_EXPF_SHIFT);
    const __m256d kd_shifted = _mm256_fmadd_pd(invln2n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd_shifted);
    const __m256d kd = _mm256_sub_pd(kd_shifted, shift);
    const __m256d r = _mm256_fmsub_pd(invln2n, xd, kd);
    const __m256i tab =
        _mm256_i64gather_epi64((const long long *)shared_exp2f_table, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(tab, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(SHARED_EXPF_C0), r, _mm256_set1_pd(SHARED_EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d p = _mm256_fmadd_pd(r, _mm256_set1_pd(SHARED_EXPF_C2), _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(z, r2, p);
    return _mm256_mul_pd(p, s);
}

/* y[i] = expf(x[i]) for i < n; y may be x. */
void cpu_expf_array(const float *x, float *y, int64_t n);

/* Whether cpu_expf_array takes the vector path in this process (tests). */
int cpu_expf_array_is_vectorized(void);

#endif
