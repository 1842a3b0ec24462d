/* sha256.c - see sha256.h. The block function follows the SHA extensions' programming model
 * (Intel's "Intel SHA Extensions" paper): four rounds per group of four message words, the
 * schedule by sha256msg1/sha256msg2, the state kept as ABEF/CDGH halves. */
#include "sha256.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SDT_SHA_NI 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#ifdef SDT_SHA_NI
bool sdt_sha256_accelerated(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & (1u << 29)) != 0; /* CPUID.(EAX=7,ECX=0):EBX.SHA */
}

__attribute__((target("sha,sse4.1,ssse3"))) static void blocks(uint32_t state[8], const uint8_t *data, size_t n_blocks)
{
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);  /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B); /* EFGH */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                            /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                                 /* CDGH */
    for (; n_blocks; n_blocks--, data += 64) {
        __m128i abef = s0, cdgh = s1, w[4];
        for (int g = 0; g < 16; g++) { /* w[g % 4] holds words 4g..4g+3 once computed */
            if (g < 4) {
                w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), byte_swap);
            } else {
                __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);               /* W[t-16] + s0(W[t-15]) */
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4)); /* + W[t-7] */
                w[g % 4] = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);                       /* + s1(W[t-2]) */
            }
            __m128i m = _mm_add_epi32(w[g % 4], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                                      /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                                     /* DCHG */
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(t, s1, 0xF0)); /* DCBA */
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(s1, t, 8));    /* HGFE */
}
#else
bool sdt_sha256_accelerated(void)
{
    return false;
}
static void blocks(uint32_t state[8], const uint8_t *data, size_t n_blocks)
{
    (void)state, (void)data, (void)n_blocks;
}
#endif

void sdt_sha256_init(sdt_sha256 *s, bool accelerated)
{
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memset(s, 0, sizeof(*s));
    memcpy(s->state, initial, sizeof(initial));
    if (!accelerated || !sdt_sha256_accelerated()) s->portable = g_checksum_new(G_CHECKSUM_SHA256);
}

void sdt_sha256_update(sdt_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    if (s->portable) {
        while (n) { /* GChecksum takes a gssize */
            size_t m = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
            g_checksum_update(s->portable, p, (gssize)m);
            p += m;
            n -= m;
        }
        return;
    }
    s->total += n;
    if (s->used) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used < 64) return;
        blocks(s->state, s->block, 1);
        s->used = 0;
    }
    blocks(s->state, p, n / 64);
    p += n / 64 * 64;
    s->used = n % 64;
    memcpy(s->block, p, s->used);
}

void sdt_sha256_finish_hex(sdt_sha256 *s, char hex[65])
{
    if (s->portable) {
        snprintf(hex, 65, "%s", g_checksum_get_string(s->portable));
        g_checksum_free(s->portable);
        s->portable = NULL;
        return;
    }
    uint64_t bits = s->total * 8;
    uint8_t tail[128] = {0x80};
    size_t pad = (s->used < 56 ? 56 : 120) - s->used; /* 0x80, zeros, then the 8-byte length */
    for (int i = 0; i < 8; i++) tail[pad + i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t total = s->total;
    sdt_sha256_update(s, tail, pad + 8);
    s->total = total;
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", (unsigned)s->state[i]);
}
