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
    if (sdt_tf_detect(w, &tf)) {
        const sdt_weights *none[SD_PART_COUNT] = {NULL};
        return sd_config_detect_parts(w, none, cfg, error);
    }
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

/* ---------------------------------------------------------------- the transformer families */

_Static_assert((int)SD_PART_DENOISER == (int)SDT_TF_TRANSFORMER && (int)SD_PART_CLIP_L == (int)SDT_TF_CLIP_L &&
                   (int)SD_PART_CLIP_G == (int)SDT_TF_CLIP_G && (int)SD_PART_T5XXL == (int)SDT_TF_T5XXL &&
                   (int)SD_PART_VAE == (int)SDT_TF_VAE && (int)SD_PART_COUNT == (int)SDT_TF_PART_COUNT,
               "sd_part follows sdt_tf_part");

const char *sd_part_option_field(sd_part p)
{
    switch (p) {
        case SD_PART_CLIP_L:
            return "clip_l_path";
        case SD_PART_CLIP_G:
            return "clip_g_path";
        case SD_PART_T5XXL:
            return "t5xxl_path";
        case SD_PART_VAE:
            return "vae_path";
        default:
            return "model_path";
    }
}

void sd_config_part_sources(const sd_config *cfg, const sdt_weights *w, const sdt_weights *const given[SD_PART_COUNT],
                            const sdt_weights *out[SD_PART_COUNT])
{
    bool tf = sd_config_is_transformer(cfg);
    for (int p = 0; p < SD_PART_COUNT; p++) out[p] = given && given[p] ? given[p] : w;
    if (!tf) out[SD_PART_T5XXL] = NULL;
    if (cfg->clip2.width <= 0) out[SD_PART_CLIP_G] = NULL;
}

/* The parts of SD3 meet: CLIP-L narrower than CLIP-G, T5's width is the context's, CLIP-L + bigG fit in it (zero-padded) and their
 * projections make the pooled vector, the VAE's latents are the transformer's channels. */
static bool sd3_parts_meet(const sd_config *c, const sdt_weights *const src[SD_PART_COUNT], sdt_error *error)
{
    const char *tf = sdt_weights_path(src[SD_PART_DENOISER]);
    /* CLIP-L (768) is narrower than bigG (1280): the same width or the reverse is one file given for both or the
     * two swapped, which every check below passes (the widths add up either way) while the context is wrong */
    if (c->clip.width >= c->clip2.width)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the CLIP-L encoder (%s) is %d wide and the CLIP-G encoder (%s) %d, but CLIP-L (768) is "
                        "the narrower of SD3's two (CLIP-G 1280): the files are swapped or one encoder was given for "
                        "both; give clip_l.safetensors as clip_l_path and clip_g.safetensors as clip_g_path",
                        tf, sdt_weights_path(src[SD_PART_CLIP_L]), c->clip.width, sdt_weights_path(src[SD_PART_CLIP_G]),
                        c->clip2.width);
    if (c->mmdit.context_dim != c->t5.d_model || c->clip.width + c->clip2.width > c->mmdit.context_dim)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer attends to a context %d wide, but T5 (%s) is %d wide and CLIP-L + "
                        "CLIP-G (%s, %s) %d + %d; the parts come from different models",
                        tf, c->mmdit.context_dim, sdt_weights_path(src[SD_PART_T5XXL]), c->t5.d_model,
                        sdt_weights_path(src[SD_PART_CLIP_L]), sdt_weights_path(src[SD_PART_CLIP_G]), c->clip.width,
                        c->clip2.width);
    int pooled = clip_pooled_dim(&c->clip) + clip_pooled_dim(&c->clip2);
    if (c->mmdit.pooled_dim != pooled)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer's pooled projection takes %d values, but CLIP-L's and CLIP-G's "
                        "projections (%s, %s) give %d + %d; the parts come from different models",
                        tf, c->mmdit.pooled_dim, sdt_weights_path(src[SD_PART_CLIP_L]),
                        sdt_weights_path(src[SD_PART_CLIP_G]), clip_pooled_dim(&c->clip), clip_pooled_dim(&c->clip2));
    if (c->mmdit.in_channels != c->vae.z_channels)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer denoises %d latent channels, but the VAE (%s) makes %d; SD3.5 takes "
                        "its own 16-channel VAE",
                        tf, c->mmdit.in_channels, sdt_weights_path(src[SD_PART_VAE]), c->vae.z_channels);
    return true;
}

static sd_family sd3_family_of(const sd_config *c)
{
    sd_config p = sd_config_preset(SD_FAMILY_TINY_SD3);
    bool tiny = same_clip(&c->clip, &p.clip) && same_clip(&c->clip2, &p.clip2) && same_vae(&c->vae, &p.vae) &&
                c->mmdit.layers == p.mmdit.layers &&
                c->mmdit.heads * c->mmdit.head_dim == p.mmdit.heads * p.mmdit.head_dim &&
                c->t5.d_model == p.t5.d_model && c->t5.layers == p.t5.layers;
    return tiny ? SD_FAMILY_TINY_SD3 : SD_FAMILY_SD3;
}

/* The parts of Flux meet: T5's width is the context's, CLIP-L's pooled output the transformer's pooled input, the
 * VAE's latents its channels. */
static bool flux_parts_meet(const sd_config *c, const sdt_weights *const src[SD_PART_COUNT], sdt_error *error)
{
    const char *tf = sdt_weights_path(src[SD_PART_DENOISER]);
    if (c->flux.context_dim != c->t5.d_model)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer's context_embedder takes %d values, but T5 (%s) is %d wide; the parts "
                        "come from different models",
                        tf, c->flux.context_dim, sdt_weights_path(src[SD_PART_T5XXL]), c->t5.d_model);
    if (c->flux.pooled_dim != c->clip.width)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer's pooled projection takes %d values, but CLIP-L (%s) is %d wide; the "
                        "parts come from different models",
                        tf, c->flux.pooled_dim, sdt_weights_path(src[SD_PART_CLIP_L]), c->clip.width);
    if (c->flux.in_channels != c->vae.z_channels)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the transformer denoises %d latent channels, but the VAE (%s) makes %d; Flux.1 takes "
                        "its own 16-channel VAE (ae.safetensors)",
                        tf, c->flux.in_channels, sdt_weights_path(src[SD_PART_VAE]), c->vae.z_channels);
    return true;
}

/* Flux.1: the transformer (under transformer_prefix: the canonical one, or "" for diffusers' transformer file
 * alone), CLIP-L (its pooled output), T5 and the VAE with Flux's latent scaling and shift. */
static bool flux_detect_parts(const sdt_weights *const src[SD_PART_COUNT], const char *transformer_prefix,
                              sd_config *cfg, sdt_error *error)
{
    sd_config c;
    memset(&c, 0, sizeof(c));
    if (!flux_config_detect(src[SD_PART_DENOISER], transformer_prefix, &c.flux, error) ||
        !clip_config_detect_pooler(src[SD_PART_CLIP_L], CLIP_SLOT_SD3_L, &c.clip, error) ||
        !t5_config_detect(src[SD_PART_T5XXL], SD_SD3_T5_PREFIX, &c.t5, error) ||
        !vae_config_detect(src[SD_PART_VAE], &c.vae, error) || !flux_parts_meet(&c, src, error))
        return false;
    vae_config flux_vae = vae_config_flux(); /* the network is SD3's; its latents are scaled as Flux's */
    c.vae.scaling = flux_vae.scaling;
    c.vae.shift = flux_vae.shift;
    sd_config tiny = sd_config_preset(SD_FAMILY_TINY_FLUX);
    bool is_tiny = same_clip(&c.clip, &tiny.clip) && same_vae(&c.vae, &tiny.vae) &&
                   c.flux.double_layers == tiny.flux.double_layers && c.flux.single_layers == tiny.flux.single_layers &&
                   c.flux.heads * c.flux.head_dim == tiny.flux.heads * tiny.flux.head_dim &&
                   c.t5.d_model == tiny.t5.d_model && c.t5.layers == tiny.t5.layers;
    c.family = is_tiny ? SD_FAMILY_TINY_FLUX : SD_FAMILY_FLUX;
    *cfg = c;
    return true;
}

bool sd_config_detect_parts(const sdt_weights *w, const sdt_weights *const given[SD_PART_COUNT], sd_config *cfg,
                            sdt_error *error)
{
    const char *path = sdt_weights_path(w);
    sdt_tf_info tf;
    if (!sdt_tf_detect(w, &tf))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: no SD3.5 or Flux.1 transformer in this file (model.diffusion_model.joint_blocks.* or "
                        "transformer_blocks.*); give the model's checkpoint as the model and the encoder files with "
                        "clip_l_path, clip_g_path, t5xxl_path and vae_path",
                        path);
    if (tf.family == SDT_TF_FLUX && given && given[SD_PART_CLIP_G])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "clip_g_path is set (%s), but %s is a Flux.1 checkpoint (%s) and Flux.1 has no CLIP-G (its "
                        "text encoders are CLIP-L and T5-XXL): leave clip_g_path (--clip-g) empty",
                        sdt_weights_path(given[SD_PART_CLIP_G]), path, tf.variant);
    sdt_tf_info have = tf;
    for (int p = SD_PART_CLIP_L; p < SD_PART_COUNT; p++) have.has[p] = tf.has[p] || (given && given[p]);
    char *missing = sdt_tf_missing_sentence(&have, path);
    if (missing) {
        GString *fields = g_string_new(NULL);
        for (int p = SD_PART_CLIP_L; p < SD_PART_COUNT; p++)
            if (sdt_tf_family_needs(tf.family, (sdt_tf_part)p) && !have.has[p])
                g_string_append_printf(fields, "%s%s", fields->len ? ", " : "", sd_part_option_field((sd_part)p));
        size_t len = strlen(missing);
        if (len && missing[len - 1] == '.') missing[len - 1] = '\0'; /* the fields join the sentence */
        sdt_fail(error, SDT_ERR_VALIDATION, "%s (sdt_train_options: %s).", missing, fields->str);
        g_string_free(fields, TRUE);
        g_free(missing);
        return false;
    }
    sd_config c;
    memset(&c, 0, sizeof(c));
    c.family = SD_FAMILY_SD3;
    const sdt_weights *src[SD_PART_COUNT];
    for (int p = 0; p < SD_PART_COUNT; p++) src[p] = given && given[p] ? given[p] : w;
    /* the canonical prefix, or "" for diffusers' transformer file alone (transformer/diffusion_pytorch_model) */
    const char *transformer_prefix =
        tf.prefix[SDT_TF_TRANSFORMER] ? tf.prefix[SDT_TF_TRANSFORMER] : SD_SD3_TRANSFORMER_PREFIX;
    if (tf.family == SDT_TF_FLUX) return flux_detect_parts(src, transformer_prefix, cfg, error);
    if (!mmdit_config_detect(src[SD_PART_DENOISER], transformer_prefix, &c.mmdit, error) ||
        !clip_config_detect_at(src[SD_PART_CLIP_L], CLIP_SLOT_SD3_L, &c.clip, error) ||
        !clip_config_detect_at(src[SD_PART_CLIP_G], CLIP_SLOT_SD3_G, &c.clip2, error) ||
        !t5_config_detect(src[SD_PART_T5XXL], SD_SD3_T5_PREFIX, &c.t5, error) ||
        !vae_config_detect(src[SD_PART_VAE], &c.vae, error) || !sd3_parts_meet(&c, src, error))
        return false;
    c.family = sd3_family_of(&c);
    *cfg = c;
    return true;
}
