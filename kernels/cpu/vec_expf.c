/* vec_expf.c - expf over an array with glibc's bits, AVX2 + FMA where available (vec_expf.h). */
#include "vec_expf.h"

#include "vec_path.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define EXPF_SPECIAL_TOP 0x42a /* (bits >> 20) & 0x7ff above this: |x| >= 88, inf, NaN */

static void expf_scalar(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

__attribute__((target("avx2,fma"))) static void expf_avx2(const float *x, float *y, int64_t n)
{
    const __m128i top_mask = _mm_set1_epi32(0x7ff), top_limit = _mm_set1_epi32(EXPF_SPECIAL_TOP);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 xf = _mm_loadu_ps(x + i);
        const __m128i top = _mm_and_si128(_mm_srli_epi32(_mm_castps_si128(xf), 20), top_mask);
        if (_mm_movemask_epi8(_mm_cmpgt_epi32(top, top_limit))) { /* a special lane: expf's own path */
            expf_scalar(x + i, y + i, 4);
            continue;
        }
        _mm_storeu_ps(y + i, _mm256_cvtpd_ps(cpu_exp4d_avx2(_mm256_cvtps_pd(xf))));
    }
    expf_scalar(x + i, y + i, n - i);
}

/* The first-use check: 1024 points over [-104, 104] (both special ranges included) and edge values. */
static int expf_avx2_matches_libm(void)
{
    enum { CHECK = 1024 };
    float x[CHECK], v[CHECK];
    for (int i = 0; i < CHECK; i++) x[i] = -104.0f + 208.0f * (float)i / (float)(CHECK - 1);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = 88.0f, x[3] = -87.9f, x[4] = 1e-30f, x[5] = -1e-30f, x[6] = NAN, x[7] = INFINITY;
    return cpu_vec_matches_scalar(expf_avx2, expf, x, v, CHECK);
}

/* -1 unknown, 0 scalar, 1 vector (vec_path.h). */
static int expf_path = -1;

int cpu_expf_array_is_vectorized(void)
{
    return cpu_vec_path(&expf_path, expf_avx2_matches_libm);
}

void cpu_expf_array(const float *x, float *y, int64_t n)
{
    if (n >= 4 && cpu_expf_array_is_vectorized())
        expf_avx2(x, y, n);
    else
        expf_scalar(x, y, n);
}
