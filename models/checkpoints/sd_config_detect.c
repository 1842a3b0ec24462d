/* sd_config_detect.c - see sd_config_detect.h. */
#include "sd_config_detect.h"

#include <glib.h>
#include <string.h>

#include "checkpoint_yaml.h"
#include "diffusers_config.h"
#include "sdxl_cond.h"
#include "transformer_detect.h"

static bool same_clip(const clip_config *a, const clip_config *b)
{
    return a->vocab == b->vocab && a->width == b->width && a->layers == b->layers && a->positions == b->positions &&
           a->mlp_width == b->mlp_width && a->layout == b->layout;
}

static bool same_vae(const vae_config *a, const vae_config *b)
{
    if (a->ch != b->ch || a->levels != b->levels || a->res_blocks != b->res_blocks || a->z_channels != b->z_channels ||
        a->in_channels != b->in_channels)
        return false;
    for (int i = 0; i < a->levels; i++)
        if (a->ch_mult[i] != b->ch_mult[i]) return false;
    return true;
}

/* SDXL's families by their two encoders and the VAE (the layouts may differ from the presets': a diffusers
 * folder keeps bigG in transformers' names). */
static sd_family sdxl_family_of(const sd_config *c)
{
    const sd_family presets[2] = {SD_FAMILY_TINY_SDXL, SD_FAMILY_SDXL};
    for (int i = 0; i < 2; i++) {
        sd_config p = sd_config_preset(presets[i]);
        p.clip2.layout = c->clip2.layout;
        if (same_clip(&c->clip, &p.clip) && same_clip(&c->clip2, &p.clip2) && same_vae(&c->vae, &p.vae) &&
            c->clip2.projection_dim == p.clip2.projection_dim)
            return presets[i];
    }
    return c->clip.width == 768 && c->clip2.width == 1280 && c->clip.vocab == 49408 ? SD_FAMILY_SDXL : SD_FAMILY_CUSTOM;
}

/* Names the family by the text encoder, the part that differs between SD 1 and 2
 * (diffusers stores SD 2's encoder in the HF layout, 23 layers, width 1024). */
static sd_family family_of(const sd_config *c)
{
    if (c->clip2.width > 0) return sdxl_family_of(c);
    const sd_family presets[3] = {SD_FAMILY_TINY, SD_FAMILY_SD1, SD_FAMILY_SD2};
    for (int i = 0; i < 3; i++) {
        sd_config p = sd_config_preset(presets[i]);
        if (same_clip(&c->clip, &p.clip) && same_vae(&c->vae, &p.vae)) return presets[i];
    }
    if (c->clip.width == 1024 && c->clip.vocab == 49408) return SD_FAMILY_SD2;
    if (c->clip.width == 768 && c->clip.vocab == 49408) return SD_FAMILY_SD1;
    return SD_FAMILY_CUSTOM;
}

bool sd_config_detect(const sdt_weights *w, sd_config *cfg, sdt_error *error)
{
    sd_config c;
    if (!sd_config_detect_weights(w, &c, error) || !sd_config_apply_yaml_beside(w, &c, error)) return false;
    *cfg = c;
    return true;
}

/* SDXL's text side: conditioner.embedders.0 (CLIP-L) and .1 (bigG), whose widths make the UNet's
 * context and whose projection is y's pooled part. The refiner (bigG alone, as embedders.0) is refused. */
static bool detect_sdxl_text(const sdt_weights *w, sd_config *c, sdt_error *error)
{
    if (!clip_config_detect_at(w, CLIP_SLOT_SDXL_L, &c->clip, error) ||
        !clip_config_detect_at(w, CLIP_SLOT_SDXL_G, &c->clip2, error))
        return false;
    int pooled = sdt_sdxl_pooled_width(&c->unet);
    if (c->unet.context_dim != c->clip.width + c->clip2.width || pooled != c->clip2.projection_dim)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: SDXL's text encoders give a context of %d + %d and a pooled output of "
                        "%d, but the UNet expects a context of %d and a pooled part of %d in y; the parts come from "
                        "different models",
                        sdt_weights_path(w), c->clip.width, c->clip2.width, c->clip2.projection_dim,
                        c->unet.context_dim, pooled);
    c->vae.scaling = SD_SDXL_VAE_SCALING; /* sgm's scale_factor; weights cannot say it */
    return true;
}

/* Which text side the keys show: SDXL's two embedders, SDXL's refiner (refused), or SD 1.x/2.x's one. */
static bool is_sdxl(const sdt_weights *w, sdt_error *error, bool *refused)
{
    *refused = false;
    if (sdt_weights_get(w, "conditioner.embedders.0.model.token_embedding.weight")) {
        *refused = true;
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%s: this is SDXL's refiner (OpenCLIP bigG alone as conditioner.embedders.0, "
                        "its own UNet); sdtrain trains SDXL base, not the refiner: use the base model "
                        "(sd_xl_base_1.0 or a model fine-tuned from it)",
                        sdt_weights_path(w));
    }
    return sd_weights_are_sdxl(w);
}

bool sd_weights_are_sdxl(const sdt_weights *w)
{
    for (size_t i = 0; i < sdt_weights_count(w); i++)
        if (g_str_has_prefix(sdt_weights_key(w, i), "conditioner.embedders.")) return true;
    return false;
}

bool sd_config_detect_weights(const sdt_weights *w, sd_config *cfg, sdt_error *error)
{
    sd_config c;
    memset(&c, 0, sizeof(c));
    const char *path = sdt_weights_path(w);
    bool folder = g_file_test(path, G_FILE_TEST_IS_DIR);
    sdt_tf_info tf;
    if (sdt_tf_detect(w, &tf))
        return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                        "%s: this is a %s checkpoint (%s); sdtrain reads it (inspect describes it) but does not "
                        "train the %s family yet: use an SD 1.x, SD 2.x or SDXL checkpoint",
                        path, tf.variant, tf.layout, sdt_tf_family_title(tf.family));
    if (folder && !sdt_diffusers_index_check(path, error)) return false;
    bool refused, sdxl = is_sdxl(w, error, &refused);
    if (refused) return false;
    if (sdxl) {
        if (!vae_config_detect(w, &c.vae, error) || !sdt_unet_config_detect(w, &c.unet, error) ||
            !detect_sdxl_text(w, &c, error))
            return false;
        c.family = family_of(&c);
        if (folder && !sdt_diffusers_config_apply(path, &c, error)) return false;
        *cfg = c;
        return true;
    }
    if (!clip_config_detect(w, &c.clip, error) || !vae_config_detect(w, &c.vae, error)) return false;
    if (!sdt_unet_config_detect(w, &c.unet, error)) return false;
    if (c.unet.context_dim != c.clip.width) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the text encoder is %d wide but the UNet's cross-attention expects %d; the parts come "
                 "from different models",
                 sdt_weights_path(w), c.clip.width, c.unet.context_dim);
        return false;
    }
    c.family = family_of(&c);
    if (folder && !sdt_diffusers_config_apply(path, &c, error)) return false;
    *cfg = c;
    return true;
}

bool sd_config_apply_yaml_beside(const sdt_weights *w, sd_config *cfg, sdt_error *error)
{
    const char *path = sdt_weights_path(w);
    char *yaml = g_file_test(path, G_FILE_TEST_IS_DIR) ? NULL : sdt_checkpoint_yaml_beside(path);
    bool yaml_ok = !yaml || sdt_checkpoint_yaml_apply(yaml, cfg, error);
    g_free(yaml);
    if (!yaml_ok)
        sdt_error_append(error,
                         " (sdtrain, like A1111, reads the .yaml named like the checkpoint as its model config)");
    return yaml_ok;
}

bool sd_model_load(sd_model *m, const sdt_weights *w, sdt_backend *be, sdt_error *error)
{
    sd_config cfg;
    memset(m, 0, sizeof(*m));
    if (!sd_config_detect(w, &cfg, error)) return false;
    if (!sd_weights_check_finite(&cfg, w, error)) return false;
    return sd_model_bind(m, &cfg, w, be, error);
}
