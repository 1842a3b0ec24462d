/* latent_cache.c - see latent_cache.h. */
#include "train/latent_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_io.h"
#include "train/rng.h"

bool latent_cache_init(latent_cache *lc, int n, latent_method method, float scaling, uint64_t seed)
{
    memset(lc, 0, sizeof(*lc));
    lc->items = calloc((size_t)(n > 0 ? n : 1), sizeof(latent_entry));
    lc->n = n;
    lc->method = method;
    lc->scaling = scaling;
    lc->seed = seed;
    return lc->items != NULL;
}

void latent_cache_set_shift(latent_cache *lc, float shift)
{
    lc->shift = shift;
}

bool latent_cache_enable_flip(latent_cache *lc)
{
    if (!lc->flipped) lc->flipped = calloc((size_t)(lc->n > 0 ? lc->n : 1), sizeof(latent_entry));
    return lc->flipped != NULL;
}

static void entries_free(latent_entry *items, int n)
{
    for (int i = 0; items && i < n; i++) {
        free(items[i].value);
        free(items[i].std);
        free(items[i].weight);
    }
    free(items);
}

void latent_cache_free(latent_cache *lc)
{
    entries_free(lc->items, lc->n);
    entries_free(lc->flipped, lc->n);
    memset(lc, 0, sizeof(*lc));
}

const latent_entry *latent_cache_entry(const latent_cache *lc, int index, bool flipped)
{
    return flipped && lc->flipped ? &lc->flipped[index] : &lc->items[index];
}

int64_t latent_cache_numel(const latent_cache *lc, int index)
{
    const latent_entry *e = &lc->items[index];
    return (int64_t)e->c * e->h * e->w;
}

static bool finite_values(const float *x, int64_t n)
{
    for (int64_t i = 0; x && i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static bool entry_is_finite(const latent_entry *e)
{
    int64_t n = (int64_t)e->c * e->h * e->w;
    return finite_values(e->value, n) && finite_values(e->std, n) && finite_values(e->weight, (int64_t)e->h * e->w);
}

bool latent_cache_is_finite(const latent_cache *lc, int index)
{
    return entry_is_finite(&lc->items[index]) && (!lc->flipped || entry_is_finite(&lc->flipped[index]));
}

typedef struct encode_tensors {
    sdt_tensor image, mean, logvar;
} encode_tensors;

static encode_tensors encode_alloc(sdt_arena *a, sdt_dtype dtype, int H, int W, int c, int h, int w)
{
    int64_t ishape[4] = {1, 3, H, W}, zshape[4] = {1, c, h, w};
    encode_tensors t = {sdt_arena_tensor(a, dtype, 4, ishape), sdt_arena_tensor(a, SDT_F32, 4, zshape),
                        sdt_arena_tensor(a, SDT_F32, 4, zshape)};
    return t;
}

/* One VAE encode on the backend: mean and logvar downloaded into host arrays (f32). */
static bool encode_moments(sd_runtime *rt, work_arena *wa, const float *pixels, int W, int H, float *mean,
                           float *logvar, sdt_error *error)
{
    if (!sd_runtime_vae_ready(rt, error)) return false;
    sdt_backend *be = rt->be;
    const vae_model *vae = &rt->model.vae;
    int f = vae_factor(&vae->cfg), c = vae->cfg.z_channels, h = H / f, w = W / f;
    sdt_arena measure;
    sdt_arena_init_measure(&measure, be);
    encode_tensors t = encode_alloc(&measure, rt->vae_dtype, H, W, c, h, w);
    if (!vae_encode(vae, be, &measure, &t.image, rt->vae_dtype, &t.mean, &t.logvar, error) ||
        !work_arena_reserve(wa, be, measure.peak, error))
        return false;
    t = encode_alloc(&wa->arena, rt->vae_dtype, H, W, c, h, w);
    size_t n = (size_t)3 * H * W, bytes = n * sdt_dtype_size(rt->vae_dtype);
    void *host = malloc(bytes);
    if (!host) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory encoding a %dx%d image", W, H);
        return false;
    }
    sdt_store_f32(pixels, host, rt->vae_dtype, (int64_t)n);
    int rc = be->upload(be, t.image.data, host, bytes);
    free(host);
    size_t zb = (size_t)c * h * w * sizeof(float);
    if (rc || !vae_encode(vae, be, &wa->arena, &t.image, rt->vae_dtype, &t.mean, &t.logvar, error) ||
        be->download(be, mean, t.mean.data, zb) || be->download(be, logvar, t.logvar.data, zb)) {
        if (rc || error->code == SDT_ERR_OK)
            sdt_fail(error, be->error.code, "encoding an image with the VAE failed: %s", be->error.message);
        return false;
    }
    return true;
}

/* One entry from its pixels; noise_slot numbers the entry's draws of "once" (the item, or n +
 * the item for its mirrored twin). */
static bool encode_entry(latent_cache *lc, latent_entry *e, uint64_t noise_slot, sd_runtime *rt, work_arena *wa,
                         const float *pixels, int W, int H, const float *weight, int weight_w, int weight_h,
                         sdt_error *error)
{
    free(e->value); /* encoding again (the fp32 fallback) replaces what was cached */
    free(e->std);
    free(e->weight);
    e->value = e->std = e->weight = NULL;
    int f = vae_factor(&rt->model.vae.cfg);
    e->c = rt->model.vae.cfg.z_channels;
    e->h = H / f;
    e->w = W / f;
    size_t n = (size_t)e->c * e->h * e->w;
    e->value = malloc(n * sizeof(float));
    e->std = malloc(n * sizeof(float));
    if (!e->value || !e->std) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory caching latents");
        return false;
    }
    sdt_error_clear(error);
    if (!encode_moments(rt, wa, pixels, W, H, e->value, e->std, error)) return false;
    for (size_t i = 0; i < n; i++) { /* ldm's DiagonalGaussianDistribution clamps logvar to [-30, 20] */
        float lv = e->std[i] < -30.0f ? -30.0f : e->std[i] > 20.0f ? 20.0f : e->std[i];
        e->std[i] = expf(0.5f * lv);
    }
    if (lc->method != LATENT_RANDOM) {
        float *noise = NULL;
        if (lc->method == LATENT_ONCE) {
            noise = malloc(n * sizeof(float));
            if (!noise) {
                sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory caching latents");
                return false;
            }
            sdt_rng_normal_fill(lc->seed, SDT_RNG_LATENT_SAMPLE, noise_slot * n, noise, (int64_t)n);
        }
        for (size_t i = 0; i < n; i++)
            e->value[i] = lc->scaling * (e->value[i] + (noise ? e->std[i] * noise[i] : 0.0f) - lc->shift);
        free(noise);
        free(e->std);
        e->std = NULL;
    }
    if (weight) {
        e->weight = malloc((size_t)e->h * e->w * sizeof(float));
        if (!e->weight) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory caching loss weights");
            return false;
        }
        if (weight_w == e->w && weight_h == e->h)
            memcpy(e->weight, weight, (size_t)e->h * e->w * sizeof(float));
        else
            sdt_image_resize_f32(weight, weight_w, weight_h, 1, e->weight, e->w, e->h);
    }
    return true;
}

/* Mirrors a [planes, h, w] array left-right into out. */
static void mirror_planes(const float *in, int planes, int h, int w, float *out)
{
    for (int64_t row = 0; row < (int64_t)planes * h; row++)
        for (int x = 0; x < w; x++) out[row * w + x] = in[row * w + (w - 1 - x)];
}

bool latent_cache_encode(latent_cache *lc, int index, sd_runtime *rt, work_arena *wa, const float *pixels, int W, int H,
                         const float *weight, int weight_w, int weight_h, sdt_error *error)
{
    if (!encode_entry(lc, &lc->items[index], (uint64_t)index, rt, wa, pixels, W, H, weight, weight_w, weight_h, error))
        return false;
    if (!lc->flipped) return true;
    float *mirrored = malloc((size_t)3 * W * H * sizeof(float));
    float *mirrored_weight = weight ? malloc((size_t)weight_w * weight_h * sizeof(float)) : NULL;
    bool ok = mirrored && (!weight || mirrored_weight);
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory mirroring a %dx%d image", W, H);
    if (ok) {
        mirror_planes(pixels, 3, H, W, mirrored);
        if (weight) mirror_planes(weight, 1, weight_h, weight_w, mirrored_weight);
        ok = encode_entry(lc, &lc->flipped[index], (uint64_t)lc->n + (uint64_t)index, rt, wa, mirrored, W, H,
                          mirrored_weight, weight_w, weight_h, error);
        if (!ok) sdt_error_wrap(error, "the image mirrored left-right (the flip option)");
    }
    free(mirrored);
    free(mirrored_weight);
    return ok;
}

void latent_cache_get(const latent_cache *lc, int index, uint64_t draw, bool flipped, float *out)
{
    const latent_entry *e = latent_cache_entry(lc, index, flipped);
    int64_t n = latent_cache_numel(lc, index);
    if (!e->std) {
        memcpy(out, e->value, (size_t)n * sizeof(float));
        return;
    }
    /* random: a fresh draw per use; the stream offset keeps draws of different uses (and of an
     * image and its mirrored twin) apart */
    uint64_t slot = (uint64_t)index + (e == &lc->items[index] ? 0 : (uint64_t)lc->n);
    sdt_rng_normal_fill(sdt_rng_derive(lc->seed, draw), SDT_RNG_LATENT_SAMPLE, slot * (uint64_t)n, out, n);
    for (int64_t i = 0; i < n; i++) out[i] = lc->scaling * (e->value[i] + e->std[i] * out[i] - lc->shift);
}
