/* rng.c - counter-based RNG (splitmix64 finaliser over a mixed key); see rng.h. */
#include "train/rng.h"

#include <math.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t sdt_rng_derive(uint64_t seed, uint64_t value)
{
    return mix64(seed ^ mix64(value + 0x9E3779B97F4A7C15ull));
}

uint64_t sdt_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    /* Two rounds of mixing so nearby (stream, counter) pairs decorrelate. */
    uint64_t key = mix64(seed + 0x9E3779B97F4A7C15ull * (stream + 1));
    return mix64(key ^ mix64(counter + 0xD1B54A32D192ED03ull));
}

double sdt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (double)(sdt_rng_bits(seed, stream, counter) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t sdt_rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n)
{
    /* Rejection keeps it unbiased; the retry index folds into the counter's high bits. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (uint64_t retry = 0;; retry++) {
        uint64_t r = sdt_rng_bits(seed, stream, counter ^ (retry << 56));
        if (r < limit) return r % n;
    }
}

void sdt_rng_normal_fill(uint64_t seed, uint64_t stream, uint64_t base, float *out, int64_t n)
{
    /* Box-Muller on a pair of uniforms per element: element i depends only on its counter. */
    for (int64_t i = 0; i < n; i++) {
        uint64_t c = (base + (uint64_t)i) * 2;
        double u1 = sdt_rng_uniform(seed, stream, c);
        double u2 = sdt_rng_uniform(seed, stream, c + 1);
        if (u1 < 1e-300) u1 = 1e-300;
        out[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}
