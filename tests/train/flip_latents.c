/* The flip option's latents (train/latent_cache.h): with flip enabled, the mirrored twin of an
 * image is the VAE's encoding of the image mirrored left-right (as kohya's flip_aug caches it),
 * bit for bit what a cache without flip encodes from the mirrored pixels, and its loss weight is
 * the weight mirrored; it is not simply the latent mirrored (the VAE is not mirror-symmetric), and
 * the original entry is unchanged by enabling flip. On the demo model, CPU, f32.
 *
 * usage: train_flip_latents DEMO_MODEL_DIR */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sdt_test.h"
#include "train/latent_cache.h"
#include "train/rng.h"

enum { W = 64, H = 64, LW = W / 8, LH = H / 8 };

static bool encode(latent_cache *lc, sd_runtime *rt, work_arena *wa, const float *pixels, const float *weight)
{
    sdt_error error;
    sdt_error_clear(&error);
    bool ok = latent_cache_encode(lc, 0, rt, wa, pixels, W, H, weight, LW, LH, &error);
    CHECK(ok, "encode: %s", error.message);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: train_flip_latents DEMO_MODEL_DIR\n");
        return 2;
    }
    sdt_backend *be = sdt_backend_cpu_create(1);
    sd_runtime rt;
    work_arena wa;
    memset(&wa, 0, sizeof wa);
    sdt_error error;
    sdt_error_clear(&error);
    if (!be || !sd_runtime_open(&rt, argv[1], be, SDT_F32, SD_PREDICTION_AUTO, false, &error)) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], error.message);
        return 1;
    }
    /* an image that is not symmetric: a smooth ramp plus noise */
    static float pixels[3 * H * W], mirrored[3 * H * W], weight[LH * LW],
        weight_mirrored[LH * LW]; /* LW x LH: resized as needed */
    sdt_rng_normal_fill(5, SDT_RNG_NOISE, 0, pixels, 3 * H * W);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float *p = &pixels[(c * H + y) * W + x];
                *p = tanhf(0.3f * *p + (float)x / W - 0.5f);
                mirrored[(c * H + y) * W + (W - 1 - x)] = *p;
            }
    for (int y = 0; y < LH; y++)
        for (int x = 0; x < LW; x++) {
            weight[y * LW + x] = (float)(x + 1) / LW;
            weight_mirrored[y * LW + (LW - 1 - x)] = weight[y * LW + x];
        }
    for (int method = LATENT_ONCE; method <= LATENT_RANDOM; method++) {
        latent_cache with, plain, of_mirrored;
        latent_cache_init(&with, 1, (latent_method)method, rt.cfg.vae.scaling, 9);
        latent_cache_init(&plain, 1, (latent_method)method, rt.cfg.vae.scaling, 9);
        latent_cache_init(&of_mirrored, 1, (latent_method)method, rt.cfg.vae.scaling, 9);
        CHECK(latent_cache_enable_flip(&with), "enable_flip");
        bool ok = encode(&with, &rt, &wa, pixels, weight) && encode(&plain, &rt, &wa, pixels, weight) &&
                  encode(&of_mirrored, &rt, &wa, mirrored, weight_mirrored);
        if (!ok) break;
        int64_t n = latent_cache_numel(&with, 0);
        float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
        /* the original entry is what a cache without flip holds */
        latent_cache_get(&with, 0, 3, false, a);
        latent_cache_get(&plain, 0, 3, false, b);
        CHECK(!memcmp(a, b, (size_t)n * sizeof(float)), "method %d: enabling flip changed the image's own latent",
              method);
        /* the twin is the mirrored image's encoding ("once" draws its sample at its own counter, so
         * only the deterministic mean and the random method's mean compare) */
        const latent_entry *twin = latent_cache_entry(&with, 0, true), *ref = &of_mirrored.items[0];
        if (method == LATENT_DETERMINISTIC) {
            CHECK(!memcmp(twin->value, ref->value, (size_t)n * sizeof(float)),
                  "the mirrored twin is not the VAE's encoding of the mirrored image");
            double differs = 0;
            const latent_entry *own = &with.items[0];
            for (int c = 0; c < own->c; c++)
                for (int y = 0; y < own->h; y++)
                    for (int x = 0; x < own->w; x++)
                        differs = fmax(differs, fabs(twin->value[(c * own->h + y) * own->w + x] -
                                                     own->value[(c * own->h + y) * own->w + (own->w - 1 - x)]));
            CHECK(differs > 1e-3, "the twin equals the latent mirrored (max difference %g): the VAE was not run",
                  differs);
        }
        if (method == LATENT_RANDOM)
            CHECK(!memcmp(twin->value, ref->value, (size_t)n * sizeof(float)),
                  "random: the twin's mean is not the mirrored image's");
        size_t wbytes = (size_t)twin->h * twin->w * sizeof(float); /* the weights resized to the latent's size */
        CHECK(twin->weight && ref->weight && !memcmp(twin->weight, ref->weight, wbytes) &&
                  !memcmp(with.items[0].weight, plain.items[0].weight, wbytes),
              "method %d: the twin's loss weight is not the mirrored weight's", method);
        /* the twin's draws are its own, and reproducible */
        latent_cache_get(&with, 0, 3, true, a);
        latent_cache_get(&with, 0, 3, true, b);
        CHECK(!memcmp(a, b, (size_t)n * sizeof(float)), "method %d: the twin's latent is not reproducible", method);
        CHECK(latent_cache_is_finite(&with, 0), "method %d: not finite", method);
        free(a);
        free(b);
        latent_cache_free(&with);
        latent_cache_free(&plain);
        latent_cache_free(&of_mirrored);
    }
    work_arena_release(&wa);
    sd_runtime_close(&rt);
    be->destroy(be);
    return sdt_test_finish("train_flip_latents");
}
