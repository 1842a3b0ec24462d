/* host_convert.c - see host_convert.h. Both passes cut the tensor into fixed chunks that
 * OpenMP's threads share; small tensors stay on the calling thread. */
#include "host_convert.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SDT_HAVE_F16C_PATH 1
#endif

enum {
    CHUNK = 1 << 16,             /* elements per task */
    PARALLEL_MIN = 1 << 18,      /* below this many elements one thread is faster */
    LANE_BLOCK = 4096            /* f32 elements converted through the stack at a time */
};

/* ---- the NaN/Inf scan: an all-ones exponent field, tested on the bits (vectorizes) ---- */

static bool chunk_has_nonfinite(const void *src, sdt_dtype dtype, int64_t start, int64_t len)
{
    unsigned bad = 0;
    if (dtype == SDT_F32) {
        const uint32_t *x = (const uint32_t *)src + start;
        for (int64_t i = 0; i < len; i++) bad |= (x[i] & 0x7f800000u) == 0x7f800000u;
    } else {
        const uint16_t *x = (const uint16_t *)src + start;
        const uint16_t mask = dtype == SDT_F16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = 0; i < len; i++) bad |= (uint16_t)(x[i] & mask) == mask;
    }
    return bad != 0;
}

int64_t sdt_host_first_nonfinite(const void *src, sdt_dtype dtype, int64_t n)
{
    if (dtype != SDT_F32 && dtype != SDT_F16 && dtype != SDT_BF16) return -1;
    int64_t chunks = (n + CHUNK - 1) / CHUNK, first_bad = chunks;
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN) reduction(min : first_bad)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
        if (c < first_bad && chunk_has_nonfinite(src, dtype, start, len)) first_bad = c;
    }
    if (first_bad == chunks) return -1;
    int64_t start = first_bad * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
    for (int64_t i = start; i < start + len; i++)
        if (chunk_has_nonfinite(src, dtype, i, 1)) return i;
    return -1; /* not reached: the chunk held one */
}

/* ---- conversion ---------------------------------------------------------------------- */

#ifdef SDT_HAVE_F16C_PATH
/* vcvtph2ps is exact for every f16 (denormals included, whatever MXCSR says) and quiets a
 * signalling NaN by setting the same bit sdt_f16_to_f32 sets (tests/kernels/test_host_convert
 * compares all 65536 inputs). */
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = sdt_f16_to_f32(src[i]);
}

static bool have_f16c(void)
{
    static int known; /* 0 unknown, 1 no, 2 yes: the same answer from any thread */
    if (!known) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c") ? 2 : 1;
    }
    return known == 2;
}
#endif

static void load_block(const void *src, sdt_dtype dtype, float *dst, int64_t n)
{
#ifdef SDT_HAVE_F16C_PATH
    if (dtype == SDT_F16 && have_f16c()) {
        f16_to_f32_f16c(src, dst, n);
        return;
    }
#endif
    sdt_load_f32(src, dtype, dst, n);
}

static void convert_chunk(const void *src, sdt_dtype src_dtype, void *dst, sdt_dtype dst_dtype, int64_t start, int64_t len)
{
    size_t si = sdt_dtype_size(src_dtype), di = sdt_dtype_size(dst_dtype);
    const char *s = (const char *)src + (size_t)start * si;
    char *d = (char *)dst + (size_t)start * di;
    if (dst_dtype == SDT_F32) {
        load_block(s, src_dtype, (float *)d, len);
        return;
    }
    float block[LANE_BLOCK];
    for (int64_t i = 0; i < len; i += LANE_BLOCK) {
        int64_t m = len - i < LANE_BLOCK ? len - i : LANE_BLOCK;
        load_block(s + (size_t)i * si, src_dtype, block, m);
        sdt_store_f32(block, d + (size_t)i * di, dst_dtype, m);
    }
}

void sdt_host_convert(const void *src, sdt_dtype src_dtype, void *dst, sdt_dtype dst_dtype, int64_t n)
{
    if (src_dtype == dst_dtype) {
        memcpy(dst, src, (size_t)n * sdt_dtype_size(src_dtype));
        return;
    }
#ifdef SDT_HAVE_F16C_PATH
    (void)have_f16c(); /* answered before the threads start */
#endif
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
    #pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
        convert_chunk(src, src_dtype, dst, dst_dtype, start, len);
    }
}
