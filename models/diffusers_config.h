/* diffusers_config.h - the JSON files of a diffusers folder, read and written.
 *
 * diffusers itself opens a folder through model_index.json and each part's config:
 * unet/config.json (UNet2DConditionModel), text_encoder/config.json (CLIPTextModel),
 * vae/config.json (AutoencoderKL) and scheduler/scheduler_config.json. Where they are
 * present they are the truth for what weights cannot say (the head split, the prediction
 * type, the VAE's latent scaling factor) and are checked against what the weights show
 * (input channels, linear projections, cross-attention width); shape detection fills in
 * only what is absent. The project writes them for every folder it writes, with the keys
 * diffusers and transformers read, so diffusers opens those folders.
 */
#ifndef SDT_MODELS_DIFFUSERS_CONFIG_H
#define SDT_MODELS_DIFFUSERS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "sd_model.h"

/* Applies the folder's config files to cfg (detected from the weights). A file that is
 * absent changes nothing; a file that cannot be parsed, or that contradicts the weights,
 * is an error (BAD_FORMAT) naming the file and the key. *prediction_from_config says whether the
 * scheduler config set cfg->unet.v_prediction. */
bool sdt_diffusers_config_apply(const char *folder, sd_config *cfg, bool *prediction_from_config, sdt_error *error);

/* Writes model_index.json and the four part configs of cfg into folder (atomically, each). */
bool sdt_diffusers_config_write(const char *folder, const sd_config *cfg, sdt_error *error);

#endif
