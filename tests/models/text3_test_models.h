/* text3_test_models.h - tiny SD3 / Flux text encoders for tests: CLIP-L with its text_projection
 * (SD3's CLIPTextModelWithProjection) or without (Flux's CLIPTextModel, pooler_output), bigG in the HF
 * layout (diffusers' text_encoder_2) and a T5 v1.1 wide enough for SD3's zero padding (CLIP-L 32 +
 * bigG 48 = 80 of T5's 96). Each written as its own random f32 file (every parameter perturbed) and
 * loaded. Used by test_sd3_text.c, test_flux_text.c and tests/parity/sd3_text_cli.c. */
#ifndef SDT_TESTS_TEXT3_TEST_MODELS_H
#define SDT_TESTS_TEXT3_TEST_MODELS_H

#include <stdio.h>
#include <string.h>

#include "clip_text.h"
#include "param_file_gen.h"
#include "t5_encoder.h"
#include "t5_gen.h"
#include "weights.h"

typedef struct text3_models {
    clip_text_model l, g;
    t5_encoder t5;
    sdt_weights *wl, *wg, *wt5;
} text3_models;

static inline clip_config text3_tiny_clip_l(bool flux)
{
    clip_config c = clip_config_tiny_sdxl_l();
    if (flux) { /* CLIPTextModel: pooler_output only, every layer, no projection */
        c.default_skip = 1;
        c.pooled_without_projection = true;
    } else {
        c.projection_dim = 32;
    }
    return c;
}

static inline clip_config text3_tiny_clip_g(void)
{
    clip_config c = clip_config_tiny_sdxl_g();
    c.layout = CLIP_LAYOUT_HF;
    c.heads = 2;
    return c;
}

static inline t5_config text3_tiny_t5(void)
{
    t5_config c = t5_config_tiny();
    c.d_model = 96;
    return c;
}

static inline bool text3_clip_params(const void *cfg, sdt_param_visitor visit, void *user)
{
    return clip_params(cfg, visit, user);
}

/* Opens the files text3_make writes. */
static inline bool text3_open(const char *dir, bool flux, text3_models *m, sdt_error *error)
{
    char pl[600], pg[600], pt[600];
    snprintf(pl, sizeof pl, "%s/clip_l.safetensors", dir);
    snprintf(pg, sizeof pg, "%s/clip_g.safetensors", dir);
    snprintf(pt, sizeof pt, "%s/t5.safetensors", dir);
    memset(m, 0, sizeof(*m));
    clip_config lc = text3_tiny_clip_l(flux), gc = text3_tiny_clip_g();
    t5_config tc = text3_tiny_t5();
    if (!(m->wl = sdt_weights_open(pl, error)) || !clip_text_load(&m->l, &lc, m->wl, error)) return false;
    if (!flux && (!(m->wg = sdt_weights_open(pg, error)) || !clip_text_load(&m->g, &gc, m->wg, error))) return false;
    return (m->wt5 = sdt_weights_open(pt, error)) && t5_encoder_load(&m->t5, &tc, m->wt5, error);
}

/* Writes dir/clip_l.safetensors, dir/clip_g.safetensors (not for flux) and dir/t5.safetensors, then
 * opens them. */
static inline bool text3_make(const char *dir, bool flux, uint64_t seed, text3_models *m, sdt_error *error)
{
    char pl[600], pg[600], pt[600];
    snprintf(pl, sizeof pl, "%s/clip_l.safetensors", dir);
    snprintf(pg, sizeof pg, "%s/clip_g.safetensors", dir);
    snprintf(pt, sizeof pt, "%s/t5.safetensors", dir);
    clip_config lc = text3_tiny_clip_l(flux), gc = text3_tiny_clip_g();
    t5_config tc = text3_tiny_t5();
    return sdt_param_file_generate(pl, "CLIP-L", "text3_make", text3_clip_params, &lc, SDT_F32, seed, true, error) &&
           (flux || sdt_param_file_generate(pg, "bigG", "text3_make", text3_clip_params, &gc, SDT_F32, seed + 1, true,
                                            error)) &&
           t5_generate(pt, &tc, SDT_F32, seed + 2, true, error) && text3_open(dir, flux, m, error);
}

static inline void text3_close(text3_models *m)
{
    if (m->wl) sdt_weights_close(m->wl);
    if (m->wg) sdt_weights_close(m->wg);
    if (m->wt5) sdt_weights_close(m->wt5);
}

#endif
