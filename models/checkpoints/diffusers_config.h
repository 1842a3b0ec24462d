/* diffusers_config.h - the JSON files of a diffusers folder, read and written.
 *
 * diffusers itself opens a folder through model_index.json and each part's config:
 * unet/config.json (UNet2DConditionModel), text_encoder/config.json (CLIPTextModel),
 * vae/config.json (AutoencoderKL) and scheduler/scheduler_config.json. Where they are
 * present they are the truth for what weights cannot say (the UNet's and the text encoder's
 * head split, the text encoder's activation and layer-norm epsilon, upcast_attention, the
 * prediction type, the VAE's latent scaling factor) and are checked against what the weights
 * show (channels, widths, layer counts, linear projections, cross-attention width); shape
 * detection fills in only what is absent. model_index.json names the pipeline: one that is
 * not SD 1.x/2.x or SDXL base (the SDXL refiner, others) is refused before any shape is guessed.
 * SDXL's text_encoder_2/config.json (CLIPTextModelWithProjection) applies to its second encoder.
 * The project writes them for every folder it writes, with the keys diffusers and transformers
 * read, so diffusers opens those folders.
 */
#ifndef SDT_MODELS_DIFFUSERS_CONFIG_H
#define SDT_MODELS_DIFFUSERS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "sd_model.h"

/* model_index.json, when the folder has one, names an SD 1.x/2.x pipeline (one CLIP text
 * encoder, a UNet2DConditionModel) or SDXL base (and text_encoder_2 CLIPTextModelWithProjection);
 * other pipelines (SDXL's refiner) are UNSUPPORTED with a sentence, before the weights' shapes are
 * guessed at. */
bool sdt_diffusers_index_check(const char *folder, sdt_error *error);

/* Applies the folder's config files to cfg (detected from the weights). A file that is
 * absent changes nothing; a file that cannot be parsed, or that contradicts the weights,
 * is an error (BAD_FORMAT) naming the file and the key. A scheduler config's prediction_type sets
 * cfg->unet.v_prediction and cfg->prediction_source = SD_PREDICTION_FROM_CONFIG. */
bool sdt_diffusers_config_apply(const char *folder, sd_config *cfg, sdt_error *error);

/* Writes model_index.json and the four part configs of cfg into folder (atomically, each). */
bool sdt_diffusers_config_write(const char *folder, const sd_config *cfg, sdt_error *error);

#endif
