/* sample_augment.c - see sample_augment.h. */
#include "train/sample_augment.h"

#include "train/rng.h"

bool sdt_augment_flip(uint64_t seed, uint64_t draw)
{
    return (sdt_rng_bits(seed, SDT_RNG_FLIP, draw) >> 63) != 0;
}

bool sdt_augment_caption_dropped(uint64_t seed, uint64_t draw, double p)
{
    return p > 0 && sdt_rng_uniform(seed, SDT_RNG_CAPTION_DROPOUT, draw) < p;
}
