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
    else
        return false;
    return true;
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

bool sd_params(const sd_config *cfg, sdt_param_visitor visit, void *user, sdt_error *error)
{
    if (!clip_config_check(&cfg->clip, error) || !vae_config_check(&cfg->vae, error)) return false;
    if (cfg->clip2.width > 0 && !clip_config_check(&cfg->clip2, error)) return false;
    if (!clip_params(&cfg->clip, visit, user) || (cfg->clip2.width > 0 && !clip_params(&cfg->clip2, visit, user))) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "sd_model: enumerating the text encoder's parameters stopped");
        return false;
    }
    if (!sdt_unet_enumerate_params(&cfg->unet, visit, user, error)) return false;
    if (!vae_params(&cfg->vae, visit, user)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "sd_model: enumerating the VAE's parameters stopped");
        return false;
    }
    return true;
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
    finite_ctx f = {w, error, false};
    sdt_error enumeration; /* the visitor's own sentence (the bad tensor) wins over "enumeration stopped" */
    bool ok = sd_params(cfg, check_one, &f, &enumeration);
    if (!ok && !f.bad && error) *error = enumeration;
    return ok;
}

bool sd_model_bind(sd_model *m, const sd_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error)
{
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    if (!clip_text_load(&m->clip, &m->cfg.clip, w, error)) return false;
    if (m->cfg.clip2.width > 0 && !clip_text_load(&m->clip2, &m->cfg.clip2, w, error)) return false;
    m->unet = sdt_unet_load(&m->cfg.unet, w, error);
    if (!m->unet) return false;
    if (!vae_load(&m->vae, &m->cfg.vae, w, be, error)) {
        sd_model_free(m);
        return false;
    }
    return true;
}

void sd_model_free(sd_model *m)
{
    if (m->unet) sdt_unet_free(m->unet);
    m->unet = NULL;
    if (m->vae.be) vae_free(&m->vae);
}
