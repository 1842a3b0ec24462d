/* inpaint_cond.c - see inpaint_cond.h. */
#include "train/inpaint_cond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/latent_cache.h"

int inpaint_extra_channels(const sd_runtime *rt)
{
    int extra = rt->cfg.unet.in_channels - rt->cfg.vae.z_channels;
    return extra > 0 ? extra : 0;
}

const float *inpaint_cond_get(inpaint_cond *ic, sd_runtime *rt, work_arena *wa, int h, int w, sdt_error *error)
{
    if (ic->values && ic->h == h && ic->w == w && ic->dtype == rt->dtype) return ic->values;
    inpaint_cond_free(ic);
    int z = rt->cfg.vae.z_channels, extra = inpaint_extra_channels(rt);
    if (extra != 1 + z) {
        sdt_fail(error, SDT_ERR_UNSUPPORTED,
                 "the UNet takes %d input channels; sdtrain trains ordinary models (%d) and inpainting "
                 "models (%d: latent, mask, masked-image latent)",
                 rt->cfg.unet.in_channels, z, 2 * z + 1);
        return NULL;
    }
    int f = vae_factor(&rt->model.vae.cfg), W = w * f, H = h * f;
    size_t hw = (size_t)h * w;
    float *grey = calloc((size_t)3 * W * H, sizeof(float)); /* 0.5 in [0, 1] is 0 in [-1, 1] */
    float *values = malloc((size_t)extra * hw * sizeof(float));
    latent_cache one;
    bool cached = grey && values && latent_cache_init(&one, 1, LATENT_DETERMINISTIC, rt->cfg.vae.scaling, 0);
    if (!cached) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the inpainting model's extra channels");
    bool ok = cached && latent_cache_encode(&one, 0, rt, wa, grey, W, H, NULL, 0, 0, error);
    if (ok) {
        for (size_t i = 0; i < hw; i++) values[i] = 1.0f; /* the mask: everything is to be painted */
        latent_cache_get(&one, 0, 0, false, values + hw);
    }
    if (cached) latent_cache_free(&one);
    free(grey);
    if (!ok) {
        free(values);
        return NULL;
    }
    ic->values = values;
    ic->h = h;
    ic->w = w;
    ic->dtype = rt->dtype;
    return values;
}

void inpaint_cond_free(inpaint_cond *ic)
{
    free(ic->values);
    memset(ic, 0, sizeof *ic);
}
