/* vec_erfcf.c - shared_erfcf over an array, AVX2 + FMA where available, the same bits, and GELU's Phi and
 * derivative through it (vec_erfcf.h). */
#include "vec_erfcf.h"

#include "shared_math.h"
#include "vec_expf.h"
#include "vec_path.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* shared_erfcf of 4 floats, operation for operation: |z| clamped at the cut-off (NaN -> the cut-off)
 * so every lane computes something finite, then the lanes past it (0), the sign and NaN patched. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m128 erfc4_avx2(__m128 xf)
{
    const __m256d z = _mm256_cvtps_pd(xf);
    const __m256d sign = _mm256_set1_pd(-0.0), one = _mm256_set1_pd(1.0), zmax = _mm256_set1_pd(SHARED_ERFC_ZMAX);
    const __m256d a = _mm256_min_pd(_mm256_andnot_pd(sign, z), zmax);
    const __m256d t = _mm256_div_pd(one, _mm256_fmadd_pd(_mm256_set1_pd(0.5), a, one));
    /* shared_erfc_poly: Horner from the highest power */
    __m256d p = _mm256_set1_pd(SHARED_ERFC_P12);
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P11));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P10));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P9));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P8));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P7));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P6));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P5));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P4));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P3));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P2));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P1));
    p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(SHARED_ERFC_P0));
    const __m256d e = _mm256_mul_pd(t, cpu_exp4d_avx2(_mm256_fnmadd_pd(a, a, p))); /* fma(-a, a, p) */
    const __m256d pos = _mm256_andnot_pd(_mm256_cmp_pd(a, zmax, _CMP_GE_OQ), e);   /* +0 past the cut-off */
    const __m256d neg = _mm256_sub_pd(_mm256_set1_pd(2.0), pos);
    __m256d r = _mm256_blendv_pd(pos, neg, z);                     /* the sign bit of z picks (-0: 2 - erfc(0)) */
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
    if (i < n) { /* the tail through the same code */
        float in[4] = {0.0f, 0.0f, 0.0f, 0.0f}, out[4];
        memcpy(in, x + i, sizeof(float) * (size_t)(n - i));
        _mm_storeu_ps(out, erfc4_avx2(_mm_loadu_ps(in)));
        memcpy(y + i, out, sizeof(float) * (size_t)(n - i));
    }
}

static void erfcf_scalar(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = shared_erfcf(x[i]);
}

/* The first-use check: 1024 points over [-11, 11] (both cut-offs included) and edge values. */
static int erfcf_avx2_matches_shared(void)
{
    enum { CHECK = 1024 };
    float x[CHECK], v[CHECK];
    for (int i = 0; i < CHECK; i++) x[i] = -11.0f + 22.0f * (float)i / (float)(CHECK - 1);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 10.1f, x[3] = -10.1f, x[4] = 1e-30f, x[5] = -1e-30f, x[6] = NAN, x[7] = INFINITY;
    return cpu_vec_matches_scalar(erfcf_avx2, shared_erfcf, x, v, CHECK);
}

/* -1 unknown, 0 scalar, 1 vector (vec_path.h). */
static int erfcf_path = -1;

int cpu_erfcf_array_is_vectorized(void)
{
    return cpu_vec_path(&erfcf_path, erfcf_avx2_matches_shared);
}

void cpu_erfcf_array(const float *x, float *y, int64_t n)
{
    if (n <= 0) return;
    if (cpu_erfcf_array_is_vectorized())
        erfcf_avx2(x, y, n);
    else
        erfcf_scalar(x, y, n);
}

void cpu_normal_cdf_array(const float *x, float *cdf, float *grad, int64_t n)
{
    for (int64_t i = 0; i < n; i++) cdf[i] = -x[i] * ACT_INV_SQRT2;
    cpu_erfcf_array(cdf, cdf, n);
    for (int64_t i = 0; i < n; i++) cdf[i] = 0.5f * cdf[i];
    if (!grad) return;
    for (int64_t i = 0; i < n; i++) grad[i] = -0.5f * x[i] * x[i];
    cpu_expf_array(grad, grad, n);
    for (int64_t i = 0; i < n; i++) grad[i] = cdf[i] + x[i] * ACT_INV_SQRT_2PI * grad[i];
}
