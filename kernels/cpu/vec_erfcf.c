/* vec_erfcf.c - erfcf over an array, AVX2 + FMA where available, within 1 ulp (vec_erfcf.h). */
#include "vec_erfcf.h"

#include "vec_expf.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* P(t) = log(erfc(z)) + z^2 - log(t) for t = 1 / (1 + z/2), z in [0, ERFC_ZMAX]: a Chebyshev fit of
 * degree 12 (in 40-digit arithmetic, then written in powers of t), |error| < 1.8e-10 there. */
static const double ERFC_P[13] = {-1.26550500693142,   0.9997496174400674, 0.37893021440096725, 0.04694636887575912,
                                  0.13526588951579818, -1.072909061160392, 2.6656883731792234,  -5.759291416304022,
                                  8.547826685074751,   -7.890685057457067, 4.403927008689779,   -1.3763060109374339,
                                  0.18636239579025465};
/* erfc(z) < 2^-150 (half the least subnormal) beyond this: the float result is +0. */
#define ERFC_ZMAX 10.1

__attribute__((target("avx2,fma"), always_inline)) static inline __m128 erfc4_avx2(__m128 xf)
{
    const __m256d z = _mm256_cvtps_pd(xf);
    const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0), zmax = _mm256_set1_pd(ERFC_ZMAX);
    const __m256d a = _mm256_min_pd(_mm256_andnot_pd(sign, z), zmax); /* |z|, NaN -> zmax (patched below) */
    const __m256d t = _mm256_div_pd(one, _mm256_fmadd_pd(_mm256_set1_pd(0.5), a, one));
    __m256d p = _mm256_set1_pd(ERFC_P[12]);
    for (int i = 11; i >= 0; i--) p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(ERFC_P[i]));
    /* -a^2 is exact in double (a has 24 bits); + P(t) is the one rounding before exp */
    const __m256d e = _mm256_mul_pd(t, cpu_exp4d_avx2(_mm256_fnmadd_pd(a, a, p)));
    const __m256d pos = _mm256_andnot_pd(_mm256_cmp_pd(a, zmax, _CMP_GE_OQ), e); /* erfc(|z|), 0 past zmax */
    const __m256d neg = _mm256_sub_pd(_mm256_set1_pd(2.0), pos);                 /* erfc(-|z|) = 2 - erfc(|z|) */
    __m256d r = _mm256_blendv_pd(pos, neg, z); /* the sign bit of z picks (-0 gives 2 - 1 = 1 too) */
    r = _mm256_blendv_pd(r, z, _mm256_cmp_pd(z, z, _CMP_UNORD_Q)); /* NaN in, NaN out */
    return _mm256_cvtpd_ps(r);
}

__attribute__((target("avx2,fma"))) static void erfcf_avx2(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) { /* two independent chains in flight: the polynomial is latency-bound */
        const __m128 lo = erfc4_avx2(_mm_loadu_ps(x + i)), hi = erfc4_avx2(_mm_loadu_ps(x + i + 4));
        _mm_storeu_ps(y + i, lo), _mm_storeu_ps(y + i + 4, hi);
    }
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, erfc4_avx2(_mm_loadu_ps(x + i)));
    if (i < n) { /* the tail through the same code, so a value never depends on its place */
        float in[4] = {0.0f, 0.0f, 0.0f, 0.0f}, out[4];
        memcpy(in, x + i, sizeof(float) * (size_t)(n - i));
        _mm_storeu_ps(out, erfc4_avx2(_mm_loadu_ps(in)));
        memcpy(y + i, out, sizeof(float) * (size_t)(n - i));
    }
}

/* -1 unknown, 0 scalar, 1 vector; decided once (a race decides it twice, the same way). */
static int erfcf_path = -1;

int cpu_erfcf_array_is_vectorized(void)
{
    int path = __atomic_load_n(&erfcf_path, __ATOMIC_RELAXED);
    if (path < 0) {
        __builtin_cpu_init();
        path = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&erfcf_path, path, __ATOMIC_RELAXED);
    }
    return path;
}

void cpu_erfcf_array(const float *x, float *y, int64_t n)
{
    if (n <= 0) return;
    if (cpu_erfcf_array_is_vectorized()) {
        erfcf_avx2(x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = erfcf(x[i]);
}
