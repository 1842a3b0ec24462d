/* data_rng.h - the seeded RNG behind every random choice of the data pipeline.
 *
 * Template line, tag drop-out, tag shuffle and epoch order all draw from it, so
 * one 64-bit state (plus the seed) reproduces and resumes them bit for bit.
 * splitmix64: tiny state that is trivial to save in a checkpoint, good enough
 * statistics for choosing lines and permutations.
 */
#ifndef SDT_DATA_RNG_H
#define SDT_DATA_RNG_H

#include <stdint.h>

typedef struct sdt_data_rng {
    uint64_t state;
} sdt_data_rng;

static inline sdt_data_rng sdt_data_rng_seeded(uint64_t seed)
{
    sdt_data_rng r = {seed};
    return r;
}

static inline uint64_t sdt_data_rng_next(sdt_data_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits, like Python's random.random(). */
static inline double sdt_data_rng_uniform(sdt_data_rng *r)
{
    return (double)(sdt_data_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), unbiased (rejection of the short last interval). n > 0. */
static inline uint64_t sdt_data_rng_below(sdt_data_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = sdt_data_rng_next(r);
    while (x >= limit);
    return x % n;
}

/* A stream derived from (seed, index), e.g. one per epoch, independent of draw history. */
static inline sdt_data_rng sdt_data_rng_derived(uint64_t seed, uint64_t index)
{
    sdt_data_rng r = {seed ^ (index * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull)};
    (void)sdt_data_rng_next(&r);
    return r;
}

#endif
