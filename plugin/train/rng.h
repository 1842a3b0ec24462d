/* rng.h - counter-based random numbers for training.
 *
 * Every draw is a pure function of (seed, stream, counter): no hidden state to
 * save, so a resumed run draws exactly what an uninterrupted run would, and the
 * result does not depend on the thread count. Streams separate the uses
 * (noise, timesteps, data order, templates, tag shuffle, dropout...).
 */
#ifndef SDT_TRAIN_RNG_H
#define SDT_TRAIN_RNG_H

#include <stdint.h>

typedef enum sdt_rng_stream {
    SDT_RNG_NOISE = 1,
    SDT_RNG_TIMESTEP,
    SDT_RNG_DATA_ORDER,
    SDT_RNG_TEMPLATE,
    SDT_RNG_TAGS,
    SDT_RNG_LATENT_SAMPLE,
    SDT_RNG_PREVIEW,
    SDT_RNG_DROPOUT,
    SDT_RNG_HN_INIT,               /* hypernetwork weight init */
    SDT_RNG_NOISE_OFFSET,          /* the noise offset's N(0,1) per sample and channel */
    SDT_RNG_NOISE_OFFSET_STRENGTH, /* its random strength per sample */
    SDT_RNG_FLIP,                  /* train/sample_augment.h: whether a sample is mirrored */
    SDT_RNG_CAPTION_DROPOUT,       /* train/sample_augment.h: whether a sample's caption is dropped */
} sdt_rng_stream;

/* 64 random bits for (seed, stream, counter). */
uint64_t sdt_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform double in [0, 1). */
double sdt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform integer in [0, n), unbiased. n > 0. */
uint64_t sdt_rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n);
/* Fills out[0..n) with N(0, 1) samples; element i uses counter base + i. */
void sdt_rng_normal_fill(uint64_t seed, uint64_t stream, uint64_t base, float *out, int64_t n);
/* Derives a sub-seed, e.g. per step: stable mixing of seed and a value. */
uint64_t sdt_rng_derive(uint64_t seed, uint64_t value);

#endif
