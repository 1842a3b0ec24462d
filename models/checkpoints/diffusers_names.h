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
    SDT_DIFFUSERS_TEXT2,    /* text_encoder_2/model.safetensors (SDXL's bigG) */
    SDT_DIFFUSERS_PART_COUNT
} sdt_diffusers_part;

/* How a canonical tensor's data becomes the diffusers tensor(s). */
typedef enum sdt_diffusers_form {
    SDT_DIFFUSERS_SAME = 0,  /* the same bytes and shape */
    SDT_DIFFUSERS_LINEAR,    /* the VAE's attention 1x1 convs [C, C, 1, 1] as linear [C, C] (same bytes) */
    SDT_DIFFUSERS_SPLIT_QKV, /* OpenCLIP's packed in_proj [3C, ...]: three row blocks, named with q_proj,
                               * k_proj, v_proj (the name returned is q_proj's) */
    SDT_DIFFUSERS_TRANSPOSE, /* OpenCLIP's text_projection [in, out] as a Linear weight [out, in] */
    SDT_DIFFUSERS_DROP,      /* stored by the LDM file, absent from diffusers (OpenCLIP's logit_scale, SD 2.x's
                               * text_projection): a file made from a folder leaves it out */
    SDT_DIFFUSERS_CUT_LAYER, /* a resblock of SD 2.x's last layer, which SD 2.x never runs (it conditions on the
                               * penultimate) and diffusers cuts: absent from the folder; a file made from a folder
                               * gets zeros there, which make a pre-norm resblock the identity */
} sdt_diffusers_form;

/* "unet", "text_encoder", "vae", "text_encoder_2". */
const char *sdt_diffusers_folder(sdt_diffusers_part part);
/* "diffusion_pytorch_model" or "model". */
const char *sdt_diffusers_file_base(sdt_diffusers_part part);

/* The diffusers name of a canonical key (malloc'd; the caller frees), its part and its form.
 * OpenCLIP-layout encoders, SDXL's bigG (conditioner.embedders.1.model.*) and SD 2.x's OpenCLIP-H
 * (cond_stage_model.model.*), become text_encoder_2's or text_encoder's transformers names, as diffusers'
 * convert_open_clip_checkpoint maps them; cfg is the diffusers side's config: resblocks at or past its
 * clip.layers are SDT_DIFFUSERS_CUT_LAYER (SD 2.x's folder keeps 23 of 24). This one map serves both
 * directions: writing a folder (checkpoint_gen.c splits by the form) and making an LDM file from one
 * (sdt_ckpt_convert gathers each OpenCLIP key's transformers tensors back by the same form).
 * NULL for keys outside the models. */
char *sdt_diffusers_name(const char *key, const sd_config *cfg, sdt_diffusers_part *part, sdt_diffusers_form *form);

#endif
