/* sd_model.h - a whole Stable Diffusion checkpoint: text encoder, UNet, VAE; or (SD3/SD3.5) the MMDiT with
 * CLIP-L, CLIP-G, T5-XXL and the 16-channel VAE; or (Flux.1) the Flux transformer with CLIP-L (pooled output
 * only), T5-XXL and the 16-channel VAE; each part possibly from a file of its own.
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
#include "flux.h"
#include "mmdit.h"
#include "ops.h"
#include "param_list.h"
#include "t5_encoder.h"
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
    SD_FAMILY_SD3,        /* SD3/SD3.5: MMDiT, CLIP-L + CLIP-G + T5-XXL, the 16-channel VAE (rectified flow) */
    SD_FAMILY_TINY_SD3,   /* the test configuration of SD3's architecture */
    SD_FAMILY_FLUX,       /* Flux.1 dev/schnell: the Flux transformer, CLIP-L (pooled) + T5-XXL, the 16-channel VAE */
    SD_FAMILY_TINY_FLUX,  /* the test configuration of Flux.1's architecture (dev: with the guidance embedder) */
} sd_family;

/* The parts a model binds, each from the checkpoint or (transformer families) a file of its own; the order
 * is transformer_detect's sdt_tf_part. A UNet family's CLIP_L is its (first) text encoder, CLIP_G SDXL's
 * second. */
typedef enum sd_part {
    SD_PART_DENOISER = 0, /* the UNet or the transformer */
    SD_PART_CLIP_L,
    SD_PART_CLIP_G,
    SD_PART_T5XXL,
    SD_PART_VAE,
    SD_PART_COUNT
} sd_part;

/* Where the canonical key space keeps SD3's transformer and T5 (transformer_keys.h's prefixes). */
#define SD_SD3_TRANSFORMER_PREFIX "model.diffusion_model."
#define SD_SD3_T5_PREFIX "text_encoders.t5xxl.transformer."

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
    clip_config clip;  /* the text encoder (SDXL, SD3: the first, CLIP ViT-L) */
    clip_config clip2; /* SDXL's, SD3's second text encoder (OpenCLIP bigG, with the pooled output); width 0: none */
    vae_config vae;
    sdt_unet_config unet;                   /* the UNet families' denoiser (zero for SD3) */
    mmdit_config mmdit;                     /* SD3's denoiser (layers 0: another family) */
    flux_config flux;                       /* Flux.1's denoiser (no blocks: another family) */
    t5_config t5;                           /* SD3's and Flux's T5-XXL */
    sd_prediction_source prediction_source; /* who set unet.v_prediction */
    double prediction_probe;                /* the probe's mean(UNet(x) - x) when it ran */
} sd_config;

/* Whether the family is a rectified-flow transformer's (SD3/SD3.5, Flux.1): no UNet, no DDPM schedule. */
bool sd_config_is_transformer(const sd_config *cfg);
/* Whether it is Flux.1's (the Flux transformer; no CLIP-G). */
bool sd_config_is_flux(const sd_config *cfg);
/* "tiny", "sd1", "sd2", "sdxl", "tiny-sdxl", "sd3", "tiny-sd3", "flux", "tiny-flux", "custom". */
const char *sd_family_name(sd_family f);
/* What a person calls the family: "SD 1.x", "SD 2.x", "SDXL", ... */
const char *sd_family_title(sd_family f);
/* Parses "tiny", "sd15"/"sd1", "sd2", "sdxl", "tiny-sdxl", "sd3"/"sd35", "tiny-sd3", "flux", "tiny-flux"; false
 * for anything else. */
bool sd_family_parse(const char *name, sd_family *out);
/* The published (or tiny) configuration of a family. */
sd_config sd_config_preset(sd_family f);
/* Every parameter of the three parts under canonical keys (text encoder, UNet, VAE; SD3: the five parts). */
bool sd_params(const sd_config *cfg, sdt_param_visitor visit, void *user, sdt_error *error);
/* The parameters of one part (none for a part the family lacks). */
bool sd_part_params(const sd_config *cfg, sd_part part, sdt_param_visitor visit, void *user, sdt_error *error);
/* The canonical key prefixes of a part's tensors (at most 2, NULL-terminated): what parking lets go of. */
void sd_part_prefixes(const sd_config *cfg, sd_part part, const char *out[3]);

typedef struct sd_model {
    sd_config cfg;
    clip_text_model clip;
    clip_text_model clip2; /* SDXL's and SD3's bigG (cfg.clip2.width > 0) */
    vae_model vae;
    sdt_unet *unet;
    mmdit_model *mmdit; /* SD3's transformer (owned; the weights are views) */
    flux_model *flux;   /* Flux.1's transformer (owned, with its RoPE tables: sd_model_free before the backend goes) */
    t5_encoder t5;      /* SD3's and Flux's T5-XXL */
} sd_model;

/* Every parameter of the config is finite (host scan of the CPU weights); a NaN
 * or Inf is an error naming the file and the key. */
bool sd_weights_check_finite(const sd_config *cfg, const sdt_weights *w, sdt_error *error);
/* The same with each part read from its own weights (parts[p]; NULL for a part the family lacks). */
bool sd_weights_check_finite_parts(const sd_config *cfg, const sdt_weights *const parts[SD_PART_COUNT],
                                   sdt_error *error);

/* Binds a detected config (sd_config_detect.h, whose sd_model_load detects, checks and binds) to
 * weights without scanning them: for copies made by sdt_weights_materialize (GPU memory, other
 * dtypes) of weights checked before. */
bool sd_model_bind(sd_model *m, const sd_config *cfg, const sdt_weights *w, sdt_backend *be, sdt_error *error);
/* The same with each part bound from its own weights (parts[p]; NULL for a part the family lacks). */
bool sd_model_bind_parts(sd_model *m, const sd_config *cfg, const sdt_weights *const parts[SD_PART_COUNT],
                         sdt_backend *be, sdt_error *error);
/* Frees what the model owns (Flux's RoPE tables through the backend they were built on: call this before
 * destroying that backend). */
void sd_model_free(sd_model *m);

#endif
