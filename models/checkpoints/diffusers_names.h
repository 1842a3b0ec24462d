/* diffusers_names.h - canonical LDM key -> diffusers folder file and tensor name.
 *
 * The inverse of weights.c's diffusers -> LDM map (diffusers'
 * convert_diffusers_to_original_stable_diffusion.py run backwards), for writing
 * diffusers folders. Level and block numbering come from the config, so tiny
 * configurations map too. The round trip (write with this, read with
 * sdt_weights_open) is tested to give every canonical key back unchanged.
 */
#ifndef SDT_MODELS_DIFFUSERS_NAMES_H
#define SDT_MODELS_DIFFUSERS_NAMES_H

#include <stdbool.h>

#include "sd_model.h"

typedef enum sdt_diffusers_part {
    SDT_DIFFUSERS_UNET = 0, /* unet/diffusion_pytorch_model.safetensors */
    SDT_DIFFUSERS_TEXT,     /* text_encoder/model.safetensors */
    SDT_DIFFUSERS_VAE,      /* vae/diffusion_pytorch_model.safetensors */
    SDT_DIFFUSERS_PART_COUNT
} sdt_diffusers_part;

/* "unet", "text_encoder", "vae". */
const char *sdt_diffusers_folder(sdt_diffusers_part part);
/* "diffusion_pytorch_model" or "model". */
const char *sdt_diffusers_file_base(sdt_diffusers_part part);

/* The diffusers name of a canonical key (malloc'd; the caller frees) and its part.
 * *as_linear is set for the VAE attention projections, which diffusers stores as
 * linear [C, C] where LDM has 1x1 convs [C, C, 1, 1]. NULL for keys outside the
 * three models, or text-encoder keys of the OpenCLIP layout (diffusers has none). */
char *sdt_diffusers_name(const char *key, const sd_config *cfg, sdt_diffusers_part *part, bool *as_linear);

#endif
