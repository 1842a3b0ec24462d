/* sd_model.h - a whole Stable Diffusion checkpoint: text encoder, UNet, VAE.
 *
 * The config of a checkpoint is detected in models/checkpoints/sd_config_detect.h, beside the
 * checkpoint layouts and config files it reads; this file names the families and their presets and
 * binds a config's three parts to weights. The UNet comes from models/networks/unet/unet.h
 * (sdt_unet_config_detect, sdt_unet_enumerate_params, sdt_unet_load); sd_model only ties the three
 * parts together.
 */
#ifndef SDT_MODELS_SD_MODEL_H
#define SDT_MODELS_SD_MODEL_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "clip_text.h"
#include "ops.h"
#include "param_list.h"
#include "unet.h"
#include "vae.h"
#include "weights.h"

/* SDXL's latent scaling factor (sgm's scale_factor, diffusers' vae scaling_factor); SD 1.x/2.x: 0.18215. */
#define SD_SDXL_VAE_SCALING 0.13025f

typedef enum sd_family {
    SD_FAMILY_CUSTOM = 0, /* a valid architecture of no published size */
    SD_FAMILY_TINY,       /* the test configuration */
    SD_FAMILY_SD1,        /* SD 1.x: CLIP ViT-L/14 */
    SD_FAMILY_SD2,        /* SD 2.x: OpenCLIP ViT-H/14 */
    SD_FAMILY_SDXL,       /* SDXL base: CLIP ViT-L/14 and OpenCLIP ViT-bigG/14, label_emb, VAE scale 0.13025 */
    SD_FAMILY_TINY_SDXL,  /* the test configuration of SDXL's architecture */
} sd_family;

/* Who decided unet.v_prediction. */
typedef enum sd_prediction_source {
    SD_PREDICTION_FROM_DEFAULT = 0,     /* SD's default, epsilon (nothing else said anything) */
    SD_PREDICTION_FROM_CONFIG,          /* a diffusers folder's scheduler/scheduler_config.json */
    SD_PREDICTION_FROM_PROBE,           /* the UNet's output (prediction_probe.h) */
    SD_PREDICTION_FROM_USER,            /* the user's choice, over all of the above and below */
    SD_PREDICTION_FROM_CHECKPOINT_YAML, /* A1111's <stem>.yaml beside a single-file checkpoint */
} sd_prediction_source;

/* What the user chose; the numbers are the ABI's sdt_prediction_type. */
typedef enum sd_prediction_choice {
    SD_PREDICTION_AUTO = 0, /* a config file, else the probe (SD 2.x), else epsilon */
    SD_PREDICTION_EPSILON = 1,
    SD_PREDICTION_V = 2,
} sd_prediction_choice;

typedef struct sd_config {
    sd_family family;
    clip_config clip;  /* the text encoder (SDXL: the first, CLIP ViT-L) */
    clip_config clip2; /* SDXL's second text encoder (OpenCLIP bigG, with the pooled output); width 0: none */
    vae_config vae;
    sdt_unet_config unet;
    sd_prediction_source prediction_source; /* who set unet.v_prediction */
    double prediction_probe;                /* the probe's mean(UNet(x) - x) when it ran */
} sd_config;

/* "tiny", "sd1", "sd2", "sdxl", "tiny-sdxl", "custom". */
const char *sd_family_name(sd_family f);
/* What a person calls the family: "SD 1.x", "SD 2.x", "SDXL", ... */
const char *sd_family_title(sd_family f);
/* Parses "tiny", "sd15"/"sd1", "sd2", "sdxl", "tiny-sdxl"; false for anything else. */
bool sd_family_parse(const char *name, sd_family *out);
/* The published (or tiny) configuration of a family. */
sd_config sd_config_preset(sd_family f);
/* Every parameter of the three parts under canonical keys (text encoder, UNet, VAE). */
bool sd_params(const sd_config *cfg, sdt_param_visitor visit, void *user, sdt_error *error);

typedef struct sd_model {
    sd_config cfg;
    clip_text_model clip;
    clip_text_model clip2; /* SDXL's bigG (cfg.clip2.width > 0) */
    vae_model vae;
    sdt_unet *unet;
} sd_model;

/* Every parameter of the config is finite (host scan of the CPU weights); a NaN
 * or Inf is an error naming the file and the key. */
bool sd_weights_check_finite(const sd_config *cfg, const sdt_weights *w, sdt_error *error);

/* Binds a detected config (sd_config_detect.h, whose sd_model_load detects, checks and binds) to
 * weights without scanning them: for copies made by sdt_weights_materialize (GPU memory, other
 * dtypes) of weights checked before. */
bool sd_model_bind(sd_model *m, const sd_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error);
void sd_model_free(sd_model *m);

#endif
