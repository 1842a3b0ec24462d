/* Both checkpoint layouts (single-file LDM and a diffusers folder) written by
 * the project's generator load into the same UNet with the same outputs and
 * d(context): SD 1-style, SD 2-style (linear projections) and SDXL's (the UNet
 * alone, label_emb as diffusers' add_embedding; d(y) too), each detected as the
 * config it was written from. Skips where the generator (models/checkpoints/checkpoint_gen.h) is absent. */
#if defined(__has_include)
#if __has_include("checkpoint_gen.h")
#define HAVE_CHECKPOINT_GEN 1
#endif
#endif

#include <string.h>

#include "unet_test_util.h"

#ifndef HAVE_CHECKPOINT_GEN
int main(void)
{
    printf("unet_layouts: models/checkpoints/checkpoint_gen.h is not in this tree; skipping\n");
    return SDT_TEST_SKIP;
}
#else
#include "checkpoint_gen.h"

static sdt_unet *load(const char *path, sdt_weights **w)
{
    sdt_error error = {0};
    *w = sdt_weights_open(path, &error);
    CHECK(*w != NULL, "open %s: %s", path, error.message);
    if (!*w) return NULL;
    sdt_unet_config cfg;
    CHECK(sdt_unet_config_detect(*w, &cfg, &error), "detect %s: %s", path, error.message);
    sdt_unet *u = sdt_unet_load(&cfg, *w, &error);
    CHECK(u != NULL, "load %s: %s", path, error.message);
    return u;
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_layouts");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    sdt_error error = {0};
    char ldm[1100], folder[1100];
    snprintf(ldm, sizeof ldm, "%s/tiny.safetensors", dir);
    snprintf(folder, sizeof folder, "%s/tiny-diffusers", dir);
    for (int variant = 0; variant < 3; variant++) {
        const int linear = variant > 0;
        sdt_ckpt_spec spec;
        memset(&spec, 0, sizeof spec);
        spec.config = sd_config_preset(SD_FAMILY_TINY);
        spec.config.unet.linear_proj = linear;
        if (variant == 2) {
            spec.config.unet = sdt_unet_config_tiny_sdxl();
            spec.unet_only = true;
        }
        spec.dtype = SDT_F32;
        spec.seed = sdt_test_next(&rng);
        spec.perturb_all = true;
        spec.layout = SDT_CKPT_LDM;
        CHECK(sdt_ckpt_generate(ldm, &spec, &error), "generate ldm: %s", error.message);
        spec.layout = SDT_CKPT_DIFFUSERS;
        CHECK(sdt_ckpt_generate(folder, &spec, &error), "generate diffusers: %s", error.message);
        sdt_weights *wa = NULL, *wb = NULL;
        sdt_unet *a = load(ldm, &wa), *b = load(folder, &wb);
        if (!a || !b) break;
        const sdt_unet_config *ca = sdt_unet_get_config(a), *cb = sdt_unet_get_config(b);
        CHECK(!memcmp(ca, cb, sizeof *ca), "the layouts detect different configs (linear_proj %d)", linear);
        CHECK(ca->adm_in_channels == spec.config.unet.adm_in_channels &&
                  ca->middle_depth == spec.config.unet.middle_depth &&
                  ca->transformer_depth[2] == spec.config.unet.transformer_depth[2],
              "variant %d: the written label_emb and depths are detected", variant);
        ut_inputs in = ut_make_inputs(ca, &rng, 2, 8, 8, 4);
        int64_t n_y = in.y ? sdt_tensor_numel(&in.yt) : 0;
        float *gya = n_y ? kt_alloc((size_t)n_y * 4) : NULL, *gyb = n_y ? kt_alloc((size_t)n_y * 4) : NULL;
        int64_t ny = in.B * ca->out_channels * in.H * in.W, nc = sdt_tensor_numel(&in.ctx);
        float *ya = kt_alloc((size_t)ny * 4), *yb = kt_alloc((size_t)ny * 4);
        float *ga = kt_alloc((size_t)nc * 4), *gb = kt_alloc((size_t)nc * 4);
        sdt_unet_options opt = sdt_unet_options_default();
        in.d_y_out = gya;
        bool ran = ut_run(a, be, &opt, &in, ya, ga, NULL);
        in.d_y_out = gyb;
        CHECK(ran && ut_run(b, be, &opt, &in, yb, gb, NULL), "runs");
        CHECK(!n_y || !memcmp(gya, gyb, (size_t)n_y * 4), "LDM and diffusers layouts give different d(y)");
        free(gya);
        free(gyb);
        CHECK(!memcmp(ya, yb, (size_t)ny * 4), "LDM and diffusers layouts give different outputs (linear_proj %d)",
              linear);
        CHECK(!memcmp(ga, gb, (size_t)nc * 4), "LDM and diffusers layouts give different d(context) (linear_proj %d)",
              linear);
        free(ya);
        free(yb);
        free(ga);
        free(gb);
        ut_free_inputs(&in);
        sdt_unet_free(a);
        sdt_unet_free(b);
        sdt_weights_close(wa);
        sdt_weights_close(wb);
    }
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_layouts");
}
#endif
