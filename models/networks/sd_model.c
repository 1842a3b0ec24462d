/* sd_model.c - a whole checkpoint's families, presets, parameters and binding; see sd_model.h. */
#include "sd_model.h"

#include <glib.h>

#include "host_convert.h"
#include "sdxl_cond.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sd_family_name(sd_family f)
{
    switch (f) {
        case SD_FAMILY_TINY:
            return "tiny";
        case SD_FAMILY_SD1:
            return "sd1";
        case SD_FAMILY_SD2:
            return "sd2";
        case SD_FAMILY_SDXL:
            return "sdxl";
        case SD_FAMILY_TINY_SDXL:
            return "tiny-sdxl";
        case SD_FAMILY_SD3:
            return "sd3";
        case SD_FAMILY_TINY_SD3:
            return "tiny-sd3";
        case SD_FAMILY_FLUX:
            return "flux";
        case SD_FAMILY_TINY_FLUX:
            return "tiny-flux";
        default:
            return "custom";
    }
}

const char *sd_family_title(sd_family f)
{
    switch (f) {
        case SD_FAMILY_TINY:
            return "tiny test model (SD 1.x architecture)";
        case SD_FAMILY_SD1:
            return "SD 1.x";
        case SD_FAMILY_SD2:
            return "SD 2.x";
        case SD_FAMILY_SDXL:
            return "SDXL";
        case SD_FAMILY_TINY_SDXL:
            return "tiny test model (SDXL architecture)";
        case SD_FAMILY_SD3:
            return "SD3/SD3.5";
        case SD_FAMILY_TINY_SD3:
            return "tiny test model (SD3.5 architecture)";
        case SD_FAMILY_FLUX:
            return "Flux.1";
        case SD_FAMILY_TINY_FLUX:
            return "tiny test model (Flux.1 architecture)";
        default:
            return "custom";
    }
}

bool sd_family_parse(const char *name, sd_family *out)
{
    if (!strcmp(name, "tiny"))
        *out = SD_FAMILY_TINY;
    else if (!strcmp(name, "sd15") || !strcmp(name, "sd1") || !strcmp(name, "sd1.5"))
        *out = SD_FAMILY_SD1;
    else if (!strcmp(name, "sd2") || !strcmp(name, "sd21") || !strcmp(name, "sd2.1"))
        *out = SD_FAMILY_SD2;
    else if (!strcmp(name, "sdxl"))
        *out = SD_FAMILY_SDXL;
    else if (!strcmp(name, "tiny-sdxl"))
        *out = SD_FAMILY_TINY_SDXL;
    else if (!strcmp(name, "sd3") || !strcmp(name, "sd35") || !strcmp(name, "sd3.5"))
        *out = SD_FAMILY_SD3;
    else if (!strcmp(name, "tiny-sd3"))
        *out = SD_FAMILY_TINY_SD3;
    else if (!strcmp(name, "flux") || !strcmp(name, "flux1"))
        *out = SD_FAMILY_FLUX;
    else if (!strcmp(name, "tiny-flux"))
        *out = SD_FAMILY_TINY_FLUX;
    else
        return false;
    return true;
}

bool sd_config_is_transformer(const sd_config *cfg)
{
    return cfg->mmdit.layers > 0 || sd_config_is_flux(cfg);
}

bool sd_config_is_flux(const sd_config *cfg)
{
    return cfg->flux.double_layers + cfg->flux.single_layers > 0;
}

/* SD3's text encoders in the slots its all-in-one files use (transformers' names, both projected). */
static void sd3_text_slots(sd_config *c)
{
    c->clip.slot = CLIP_SLOT_SD3_L;
    c->clip.layout = CLIP_LAYOUT_HF;
    c->clip.projection_dim = c->clip.width;
    c->clip2.slot = CLIP_SLOT_SD3_G;
    c->clip2.layout = CLIP_LAYOUT_HF;
    snprintf(c->mmdit.prefix, sizeof c->mmdit.prefix, "%s", SD_SD3_TRANSFORMER_PREFIX);
    snprintf(c->t5.prefix, sizeof c->t5.prefix, "%s", SD_SD3_T5_PREFIX);
}

/* Flux's CLIP-L (a CLIPTextModel: every layer, the final norm, pooler_output only) and T5 where ComfyUI's all-in-one
 * files keep them, the transformer under the canonical prefix, its widths meeting the encoders' and the VAE's. */
static void flux_text_slots(sd_config *c)
{
    c->clip.slot = CLIP_SLOT_SD3_L;
    c->clip.layout = CLIP_LAYOUT_HF;
    clip_config_as_pooler(&c->clip);
    memset(&c->clip2, 0, sizeof c->clip2);
    c->flux.in_channels = c->vae.z_channels;
    c->flux.context_dim = c->t5.d_model;
    c->flux.pooled_dim = c->clip.width;
    snprintf(c->flux.prefix, sizeof c->flux.prefix, "%s", SD_SD3_TRANSFORMER_PREFIX);
    snprintf(c->t5.prefix, sizeof c->t5.prefix, "%s", SD_SD3_T5_PREFIX);
}

sd_config sd_config_preset(sd_family f)
{
    sd_config c;
    memset(&c, 0, sizeof(c));
    c.family = f;
    switch (f) {
        case SD_FAMILY_SD1:
            c.clip = clip_config_sd1();
            c.vae = vae_config_sd();
            c.unet = sdt_unet_config_sd1();
            break;
        case SD_FAMILY_SD2:
            c.clip = clip_config_sd2();
            c.vae = vae_config_sd();
            c.unet = sdt_unet_config_sd2(false);
            break;
        case SD_FAMILY_SDXL:
            c.clip = clip_config_sdxl_l();
            c.clip2 = clip_config_sdxl_g();
            c.vae = vae_config_sd();
            c.vae.scaling = SD_SDXL_VAE_SCALING;
            c.unet = sdt_unet_config_sdxl();
            break;
        case SD_FAMILY_TINY_SDXL:
            c.clip = clip_config_tiny_sdxl_l();
            c.clip2 = clip_config_tiny_sdxl_g();
            c.vae = vae_config_tiny();
            c.vae.scaling = SD_SDXL_VAE_SCALING;
            c.unet = sdt_unet_config_tiny_sdxl();
            break;
        case SD_FAMILY_SD3: /* SD3.5 Large */
            c.clip = clip_config_sdxl_l();
            c.clip2 = clip_config_sdxl_g();
            c.vae = vae_config_sd3();
            c.mmdit = mmdit_config_sd35_large();
            c.t5 = t5_config_xxl();
            sd3_text_slots(&c);
            break;
        case SD_FAMILY_TINY_SD3:
            /* tiny CLIP-L 32 + bigG 48 = 80 of T5's 96 (SD3 zero-pads CLIP to T5's width), pooled 32 + 48 */
            c.clip = clip_config_tiny_sdxl_l();
            c.clip2 = clip_config_tiny_sdxl_g();
            c.vae = vae_config_tiny16();
            c.mmdit = mmdit_config_tiny();
            c.t5 = t5_config_tiny();
            c.t5.d_model = 96;
            c.mmdit.in_channels = c.vae.z_channels;
            c.mmdit.context_dim = c.t5.d_model;
            c.mmdit.pooled_dim = c.clip.width + c.clip2.projection_dim;
            c.mmdit.pos_max = 16; /* latents up to 32 x 32 */
            sd3_text_slots(&c);
            break;
        case SD_FAMILY_FLUX: /* Flux.1 dev */
            c.clip = clip_config_sdxl_l();
            c.vae = vae_config_flux();
            c.flux = flux_config_dev();
            c.t5 = t5_config_xxl();
            flux_text_slots(&c);
            break;
        case SD_FAMILY_TINY_FLUX: /* dev's form (guidance embedder); T5 96 wide as tiny-sd3's */
            c.clip = clip_config_tiny_sdxl_l();
            c.vae = vae_config_tiny16();
            c.vae.scaling = vae_config_flux().scaling;
            c.vae.shift = vae_config_flux().shift;
            c.flux = flux_config_tiny();
            c.t5 = t5_config_tiny();
            c.t5.d_model = 96;
            flux_text_slots(&c);
            break;
        default:
            c.family = SD_FAMILY_TINY;
            c.clip = clip_config_tiny();
            c.vae = vae_config_tiny();
            c.unet = sdt_unet_config_tiny();
            c.unet.context_dim = c.clip.width; /* the UNet attends to this text encoder's output */
            break;
    }
    return c;
}

static bool part_check(const sd_config *cfg, sd_part part, sdt_error *error)
{
    bool tf = sd_config_is_transformer(cfg);
    switch (part) {
        case SD_PART_DENOISER:
            if (sd_config_is_flux(cfg)) return flux_config_check(&cfg->flux, error);
            return !tf || mmdit_config_check(&cfg->mmdit, error);
        case SD_PART_CLIP_L:
            return clip_config_check(&cfg->clip, error);
        case SD_PART_CLIP_G:
            return cfg->clip2.width <= 0 || clip_config_check(&cfg->clip2, error);
        case SD_PART_T5XXL:
            return !tf || t5_config_check(&cfg->t5, error);
        default:
            return vae_config_check(&cfg->vae, error);
    }
}

bool sd_part_params(const sd_config *cfg, sd_part part, sdt_param_visitor visit, void *user, sdt_error *error)
{
    if (!part_check(cfg, part, error)) return false;
    bool tf = sd_config_is_transformer(cfg), ok = true;
    const char *what = "the text encoder's";
    switch (part) {
        case SD_PART_DENOISER:
            if (!tf) return sdt_unet_enumerate_params(&cfg->unet, visit, user, error);
            ok = sd_config_is_flux(cfg) ? flux_params(&cfg->flux, visit, user) : mmdit_params(&cfg->mmdit, visit, user);
            what = "the transformer's";
            break;
        case SD_PART_CLIP_L:
            ok = clip_params(&cfg->clip, visit, user);
            break;
        case SD_PART_CLIP_G:
            ok = cfg->clip2.width <= 0 || clip_params(&cfg->clip2, visit, user);
            break;
        case SD_PART_T5XXL:
            ok = !tf || t5_params(&cfg->t5, visit, user);
            what = "T5's";
            break;
        default:
            ok = vae_params(&cfg->vae, visit, user);
            what = "the VAE's";
            break;
    }
    if (!ok) sdt_fail(error, SDT_ERR_BAD_FORMAT, "sd_model: enumerating %s parameters stopped", what);
    return ok;
}

/* The order the generators have always drawn the parts in (a seeded checkpoint stays byte-identical). */
static const sd_part enumeration_order[SD_PART_COUNT] = {SD_PART_CLIP_L, SD_PART_CLIP_G, SD_PART_DENOISER,
                                                         SD_PART_T5XXL, SD_PART_VAE};

bool sd_params(const sd_config *cfg, sdt_param_visitor visit, void *user, sdt_error *error)
{
    for (int i = 0; i < SD_PART_COUNT; i++)
        if (!part_check(cfg, enumeration_order[i], error)) return false;
    for (int i = 0; i < SD_PART_COUNT; i++)
        if (!sd_part_params(cfg, enumeration_order[i], visit, user, error)) return false;
    return true;
}

void sd_part_prefixes(const sd_config *cfg, sd_part part, const char *out[3])
{
    bool tf = sd_config_is_transformer(cfg);
    out[0] = out[1] = out[2] = NULL;
    switch (part) {
        case SD_PART_DENOISER:
            out[0] = "model.diffusion_model.";
            break;
        case SD_PART_CLIP_L: /* the encoder's whole slot: its projection sits beside its layers' prefix */
            out[0] = tf                                   ? "text_encoders.clip_l."
                     : cfg->clip.slot == CLIP_SLOT_SDXL_L ? "conditioner.embedders.0."
                                                          : "cond_stage_model.";
            break;
        case SD_PART_CLIP_G:
            if (cfg->clip2.width > 0) out[0] = tf ? "text_encoders.clip_g." : "conditioner.embedders.1.";
            break;
        case SD_PART_T5XXL:
            if (tf) out[0] = "text_encoders.t5xxl.";
            break;
        default:
            out[0] = VAE_KEY_PREFIX;
            break;
    }
}

typedef struct finite_ctx {
    const sdt_weights *w;
    sdt_error *error;
    bool bad;
} finite_ctx;

static bool check_one(void *user, const sdt_param_info *p)
{
    finite_ctx *f = user;
    const sdt_tensor *t = sdt_weights_get(f->w, p->key);
    if (!t || t->dtype == SDT_I32) return true; /* missing keys are the loaders' errors */
    int64_t at = sdt_host_first_nonfinite(t->data, t->dtype, sdt_tensor_numel(t));
    if (at < 0) return true;
    float value;
    sdt_load_f32((const uint8_t *)t->data + (size_t)at * sdt_dtype_size(t->dtype), t->dtype, &value, 1);
    sdt_fail(f->error, SDT_ERR_BAD_FORMAT,
             "%s: tensor '%s' holds %s at element %lld; the checkpoint is damaged - "
             "re-download or re-convert it",
             sdt_weights_path(f->w), p->key, isnan(value) ? "NaN" : "Inf", (long long)at);
    f->bad = true;
    return false;
}

bool sd_weights_check_finite(const sd_config *cfg, const sdt_weights *w, sdt_error *error)
{
    const sdt_weights *parts[SD_PART_COUNT] = {w, w, w, w, w};
    return sd_weights_check_finite_parts(cfg, parts, error);
}

bool sd_weights_check_finite_parts(const sd_config *cfg, const sdt_weights *const parts[SD_PART_COUNT],
                                   sdt_error *error)
{
    for (int i = 0; i < SD_PART_COUNT; i++) {
        sd_part part = enumeration_order[i];
        if (!parts[part]) continue;
        finite_ctx f = {parts[part], error, false};
        sdt_error enumeration; /* the visitor's own sentence (the bad tensor) wins over "enumeration stopped" */
        if (!sd_part_params(cfg, part, check_one, &f, &enumeration)) {
            if (!f.bad && error) *error = enumeration;
            return false;
        }
    }
    return true;
}

bool sd_model_bind(sd_model *m, const sd_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error)
{
    const sdt_weights *parts[SD_PART_COUNT] = {w, w, w, w, w};
    return sd_model_bind_parts(m, cfg, parts, be, error);
}

/* The denoiser: the UNet, or SD3's MMDiT or Flux's transformer and (their text side's last encoder) T5. */
static bool bind_denoiser(sd_model *m, const sdt_weights *const parts[SD_PART_COUNT], sdt_error *error)
{
    if (!sd_config_is_transformer(&m->cfg)) {
        m->unet = sdt_unet_load(&m->cfg.unet, parts[SD_PART_DENOISER], error);
        return m->unet != NULL;
    }
    bool ok;
    if (sd_config_is_flux(&m->cfg)) {
        m->flux = g_new0(flux_model, 1);
        ok = flux_load(m->flux, &m->cfg.flux, parts[SD_PART_DENOISER], error);
    } else {
        m->mmdit = g_new0(mmdit_model, 1);
        ok = mmdit_load(m->mmdit, &m->cfg.mmdit, parts[SD_PART_DENOISER], error);
    }
    return ok && t5_encoder_load(&m->t5, &m->cfg.t5, parts[SD_PART_T5XXL], error);
}

bool sd_model_bind_parts(sd_model *m, const sd_config *cfg, const sdt_weights *const parts[SD_PART_COUNT],
                         sdt_backend *be, sdt_error *error)
{
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    if (!clip_text_load(&m->clip, &m->cfg.clip, parts[SD_PART_CLIP_L], error)) return false;
    if (m->cfg.clip2.width > 0 && !clip_text_load(&m->clip2, &m->cfg.clip2, parts[SD_PART_CLIP_G], error)) return false;
    if (!bind_denoiser(m, parts, error) || !vae_load(&m->vae, &m->cfg.vae, parts[SD_PART_VAE], be, error)) {
        sd_model_free(m);
        return false;
    }
    return true;
}

void sd_model_free(sd_model *m)
{
    if (m->unet) sdt_unet_free(m->unet);
    m->unet = NULL;
    g_free(m->mmdit);
    m->mmdit = NULL;
    if (m->flux) flux_free(m->flux);
    g_free(m->flux);
    m->flux = NULL;
    if (m->vae.be) vae_free(&m->vae);
}
