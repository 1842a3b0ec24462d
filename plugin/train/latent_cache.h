/* latent_cache.h - every training image encoded once by the VAE, kept on the host.
 *
 * A1111's three latent sampling methods: "once" draws one sample per image when it
 * is cached, "deterministic" keeps the mean, "random" keeps mean and standard
 * deviation and draws a fresh sample each time the image is used. All draws come
 * from the counter-based RNG, so a resumed run draws what an uninterrupted one would.
 * Latents are small (4 x H/8 x W/8 floats), so they live on the host and the pixels
 * can be dropped as soon as an image is encoded.
 */
#ifndef SDT_TRAIN_LATENT_CACHE_H
#define SDT_TRAIN_LATENT_CACHE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/sd_runtime.h"
#include "train/work_arena.h"

typedef enum latent_method { LATENT_ONCE = 0, LATENT_DETERMINISTIC = 1, LATENT_RANDOM = 2 } latent_method;

typedef struct latent_entry {
    int c, h, w;
    float *value;  /* once/deterministic: the scaled latent; random: the mean */
    float *std;    /* random only: exp(0.5 * clamp(logvar, -30, 20)) */
    float *weight; /* [h, w] loss weight, NULL = 1 everywhere */
} latent_entry;

typedef struct latent_cache {
    latent_method method;
    float scaling;
    float shift; /* the 16-channel VAE's (SD3, Flux): latents = scaling (z - shift); 0 for SD's */
    uint64_t seed;
    int n;
    latent_entry *items;
    latent_entry *flipped; /* [n] the mirrored images' latents (the flip option), or NULL */
} latent_cache;

bool latent_cache_init(latent_cache *lc, int n, latent_method method, float scaling, uint64_t seed);
/* The VAE's latent shift (vae_config.shift), before the first encode; init leaves it 0. */
void latent_cache_set_shift(latent_cache *lc, float shift);
/* The flip option: every encode also caches the image mirrored left-right, through the VAE (as
 * kohya's flip_aug does: a VAE is not exactly mirror-symmetric, so the latent is not mirrored
 * instead). Before the first encode. false: out of memory. */
bool latent_cache_enable_flip(latent_cache *lc);
void latent_cache_free(latent_cache *lc);
/* Encodes item index from pixels [3, H, W] in [-1, 1]; weight (may be NULL) is the
 * alpha loss weight at weight_w x weight_h, resized to the latent size if needed. */
bool latent_cache_encode(latent_cache *lc, int index, sd_runtime *rt, work_arena *wa, const float *pixels, int W, int H,
                         const float *weight, int weight_w, int weight_h, sdt_error *error);
/* The latent to train on for this use of the item, mirrored when flipped (the cache must have
 * enable_flip); draw identifies the use (for "random"). */
void latent_cache_get(const latent_cache *lc, int index, uint64_t draw, bool flipped, float *out);
/* The entry of the item as used: the mirrored one when flipped. */
const latent_entry *latent_cache_entry(const latent_cache *lc, int index, bool flipped);
int64_t latent_cache_numel(const latent_cache *lc, int index);
/* false when the cached latent (mean and spread for "random") or loss weight, mirrored ones included, holds NaN/Inf. */
bool latent_cache_is_finite(const latent_cache *lc, int index);

#endif
