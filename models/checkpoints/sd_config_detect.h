/* sd_config_detect.h - a whole checkpoint's config from its weights and its config files.
 *
 * The configuration is read from tensor names and shapes only (never data), so a checkpoint of any
 * size - SD 1.x, SD 2.x, SDXL, the tiny test models - loads without being told what it is. What
 * weights cannot say (v-prediction, the latent scaling factor) comes from a diffusers folder's config
 * files or the A1111 .yaml beside a single file, else SD's published values; the caller may override.
 * It lives with the checkpoint layouts it reads, so models/networks/ never includes models/checkpoints/. */
#ifndef SDT_MODELS_SD_CONFIG_DETECT_H
#define SDT_MODELS_SD_CONFIG_DETECT_H

#include "sd_model.h"

/* Detects all three parts' configs and names the family. A checkpoint without a
 * UNet, text encoder or VAE is an error naming the missing part. A diffusers folder's
 * config files (diffusers_config.h), or for a single file the <stem>.yaml beside it that A1111
 * reads (checkpoint_yaml.h), then set what the weights cannot say. */
bool sd_config_detect(const sdt_weights *w, sd_config *cfg, sdt_error *error);
/* sd_config_detect in its two steps: what the weights (and a diffusers folder's config files)
 * say, then the .yaml beside a single file. Describing a file tells "not a checkpoint" (the
 * first fails) from "a checkpoint whose yaml is wrong" (the second fails) by the step. */
bool sd_config_detect_weights(const sdt_weights *w, sd_config *cfg, sdt_error *error);
bool sd_config_apply_yaml_beside(const sdt_weights *w, sd_config *cfg, sdt_error *error);
/* The config of a transformer-family checkpoint (SD3/SD3.5, Flux.1) whose parts may come from files of their own:
 * given[p] (opened with sdt_weights_open_part) supplies part p, NULL takes it from w. A part neither w nor
 * given supplies is transformer_detect's sentence naming the option (and the sdt_train_options field); a
 * CLIP-G given for Flux.1 (which has none) is refused naming clip_g_path; parts from different models (widths
 * that do not meet) are a sentence naming the files. A w without a transformer is an error saying so. */
bool sd_config_detect_parts(const sdt_weights *w, const sdt_weights *const given[SD_PART_COUNT], sd_config *cfg,
                            sdt_error *error);
/* Each part's weights for binding: given[p], else w (NULL for a part the family lacks). */
void sd_config_part_sources(const sd_config *cfg, const sdt_weights *w, const sdt_weights *const given[SD_PART_COUNT],
                            const sdt_weights *out[SD_PART_COUNT]);
/* The sdt_train_options field that supplies part p ("clip_l_path", "clip_g_path", "t5xxl_path", "vae_path"). */
const char *sd_part_option_field(sd_part p);

/* Whether the keys are an SDXL checkpoint's (conditioner.embedders.*: the base or the refiner), from the
 * names alone (nothing is read). */
bool sd_weights_are_sdxl(const sdt_weights *w);

/* Detects the config, checks the weights are finite and binds every part's
 * weights (w must outlive the model). be owns the VAE's derived downsample kernels. */
bool sd_model_load(sd_model *m, const sdt_weights *w, sdt_backend *be, sdt_error *error);

#endif
