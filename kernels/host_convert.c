/* host_convert.c - see host_convert.h. Both passes cut the tensor into fixed chunks that a few
 * threads claim one by one; small tensors stay on the calling thread.
 *
 * The threads are started and joined within each call, not OpenMP's pool: a pool that outlives
 * the call hangs the next parallel region of a child the host forks afterwards (libgomp is not
 * fork-safe), and hosts and tests do fork after loading a model. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "host_convert.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SDT_HAVE_F16C_PATH 1
#endif

enum {
    CHUNK = 1 << 18,  /* elements per claim */
    MAX_THREADS = 32, /* memory bandwidth is spent well before this */
    LANE_BLOCK = 4096 /* f32 elements converted through the stack at a time */
};

typedef struct pass {
    const void *src;
    sdt_dtype src_dtype;
    void *dst; /* NULL: the NaN/Inf scan */
    sdt_dtype dst_dtype;
    int64_t n, chunks;
    atomic_llong next;      /* the next chunk to claim */
    atomic_llong first_bad; /* the scan: the lowest chunk holding a NaN/Inf, chunks if none */
} pass;

static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void chunk_work(pass *p, int64_t c);

static void *worker(void *arg)
{
    pass *p = arg;
    for (;;) {
        int64_t c = atomic_fetch_add(&p->next, 1);
        if (c >= p->chunks) return NULL;
        chunk_work(p, c);
    }
}

/* Runs every chunk of p on the calling thread and up to cpus() - 1 more; a thread that cannot
 * start leaves its share to the others. */
static void run(pass *p)
{
    atomic_init(&p->next, 0);
    int want = p->chunks < 2 ? 1 : cpus();
    if (want > p->chunks) want = (int)p->chunks;
    if (want > MAX_THREADS) want = MAX_THREADS;
    pthread_t threads[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < want; i++)
        if (pthread_create(&threads[started], NULL, worker, p) == 0) started++;
    worker(p);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
}

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
    pass p = {.src = src, .src_dtype = dtype, .n = n, .chunks = (n + CHUNK - 1) / CHUNK};
    atomic_init(&p.first_bad, p.chunks);
    run(&p);
    int64_t bad = atomic_load(&p.first_bad);
    if (bad == p.chunks) return -1;
    int64_t start = bad * CHUNK, len = n - start < CHUNK ? n - start : CHUNK;
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
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = sdt_f16_to_f32(src[i]);
}

/* F16C and AVX in CPUID, and the OS saving the YMM registers (XCR0 bits 1 and 2). */
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C) || !(c & bit_AVX) || !(c & bit_OSXSAVE)) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}

static bool have_f16c(void)
{
    static int known; /* 0 unknown, 1 no, 2 yes: asked before any thread starts */
    if (!known) known = cpu_has_f16c() ? 2 : 1;
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

static void convert_chunk(const void *src, sdt_dtype src_dtype, void *dst, sdt_dtype dst_dtype, int64_t start,
                          int64_t len)
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

static void chunk_work(pass *p, int64_t c)
{
    int64_t start = c * CHUNK, len = p->n - start < CHUNK ? p->n - start : CHUNK;
    if (p->dst) {
        convert_chunk(p->src, p->src_dtype, p->dst, p->dst_dtype, start, len);
        return;
    }
    if (c >= atomic_load(&p->first_bad) || !chunk_has_nonfinite(p->src, p->src_dtype, start, len)) return;
    long long seen = atomic_load(&p->first_bad);
    while (c < seen && !atomic_compare_exchange_weak(&p->first_bad, &seen, c)) {}
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
    pass p = {.src = src,
              .src_dtype = src_dtype,
              .dst = dst,
              .dst_dtype = dst_dtype,
              .n = n,
              .chunks = (n + CHUNK - 1) / CHUNK};
    atomic_init(&p.first_bad, 0);
    run(&p);
}

/* One element's bytes, typed for the sizes tensors have so the copy is a load and a store. */
static inline void copy_element(const char *src, char *dst, size_t esize)
{
    if (esize == 4)
        memcpy(dst, src, 4);
    else if (esize == 2)
        memcpy(dst, src, 2);
    else
        memcpy(dst, src, esize);
}

void sdt_host_permute_channels(const void *src, void *dst, size_t esize, int64_t n, int64_t c, int64_t s,
                               bool to_channels_last)
{
    const char *from = src;
    char *to = dst;
    for (int64_t b = 0; b < n; b++)
        for (int64_t ci = 0; ci < c; ci++)
            for (int64_t si = 0; si < s; si++) {
                const int64_t rowmajor = (b * c + ci) * s + si, last = (b * s + si) * c + ci;
                const int64_t i = to_channels_last ? rowmajor : last, o = to_channels_last ? last : rowmajor;
                copy_element(from + (size_t)i * esize, to + (size_t)o * esize, esize);
            }
}
