/* checkpoint_yaml.h - A1111's model config beside a single-file checkpoint.
 *
 * For models/Stable-diffusion/foo.safetensors (or .ckpt) A1111 first takes foo.yaml in the
 * same folder as the model's LDM config (find_checkpoint_config_near_filename); SD 2.x 768-v
 * models ship one with model.params.parameterization: "v". sdtrain takes the same file: its
 * parameterization decides what the model predicts (over the UNet probe; the user's choice
 * still wins), its head split is taken as A1111's model takes it, and the fields the weights also show are checked against them, so a yaml that
 * belongs to another model is an error naming the field, both values and the fix. The file is
 * read with the LDM YAML subset reader (ldm_yaml.h); one that cannot be read is an error too,
 * never ignored: the user put it there.
 */
#ifndef SDT_MODELS_CHECKPOINT_YAML_H
#define SDT_MODELS_CHECKPOINT_YAML_H

#include <stdbool.h>

#include "sd_model.h"

/* The path A1111 looks at for checkpoint_path: its extension replaced by ".yaml" (g_free). */
char *sdt_checkpoint_yaml_path(const char *checkpoint_path);
/* That path when a regular file is there, else NULL (g_free). */
char *sdt_checkpoint_yaml_beside(const char *checkpoint_path);

/* Applies the LDM config at yaml_path to cfg (as detected from the checkpoint's weights):
 * model.params.parameterization "v" sets cfg->unet.v_prediction, "eps" or none clears it, and
 * cfg->prediction_source = SD_PREDICTION_FROM_CHECKPOINT_YAML; the UNet's num_head_channels or
 * num_heads set its head split (it must divide every level's width). The UNet's in/out channels,
 * model_channels and context_dim, the VAE's z_channels and the latent scale_factor, where the
 * file gives them, must match cfg. BAD_FORMAT (UNSUPPORTED for parameterization "x0") with a
 * sentence naming the file, the line and the field otherwise. */
bool sdt_checkpoint_yaml_apply(const char *yaml_path, sd_config *cfg, sdt_error *error);

#endif
