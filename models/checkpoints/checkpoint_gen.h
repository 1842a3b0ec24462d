/* checkpoint_gen.h - seeded random-weight checkpoints of any configuration.
 *
 * For tests and benchmarks: every parameter the models enumerate (sd_params) is
 * drawn from its init (weights N(0, std), norm weights one, biases zero), each
 * tensor from its own stream keyed by (seed, canonical key), so a tensor's values
 * do not depend on which other tensors the file holds or their order.
 * "perturb_all" also randomises norm weights (1 + N(0, 0.1)) and biases
 * (N(0, 0.1)), so tests see every parameter's effect.
 */
#ifndef SDT_MODELS_CHECKPOINT_GEN_H
#define SDT_MODELS_CHECKPOINT_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sd_model.h"

typedef enum sdt_ckpt_layout {
    SDT_CKPT_LDM = 0,   /* one .safetensors file with LDM keys */
    SDT_CKPT_DIFFUSERS, /* a folder: unet/, text_encoder/, vae/ (safetensors, diffusers names) */
} sdt_ckpt_layout;

typedef struct sdt_ckpt_spec {
    sd_config config;
    sdt_ckpt_layout layout;
    sdt_dtype dtype; /* SDT_F32, SDT_F16 or SDT_BF16 */
    uint64_t seed;
    bool perturb_all;
    bool text_only;       /* write only the text encoder (small files for CLIP tests) */
    bool vae_only;        /* write only the VAE */
    bool unet_only;       /* write only the UNet (SDXL's, until its text encoders and VAE exist here) */
    bool unet_output_set; /* the UNet's last conv (out.2): bias unet_output, weights times
                                 * unet_output_weight_scale: 0 gives a model that returns unet_output
                                 * everywhere, a small scale one that returns about it and still
                                 * depends on the prompt (prediction-type tests) */
    float unet_output;
    float unet_output_weight_scale;
} sdt_ckpt_spec;

/* Writes the checkpoint (each file atomically; a diffusers folder is created if
 * missing). false + error sentence on failure. */
bool sdt_ckpt_generate(const char *path, const sdt_ckpt_spec *spec, sdt_error *error);

/* Copies the checkpoint src (either layout) into path in `layout`: the same model in the other
 * layout. dtype < 0 keeps the source's float dtype (values unchanged); SDT_F32 widens exactly.
 * A folder's SDXL bigG or SD 2.x encoder (transformers' names) becomes the single file's OpenCLIP
 * layout by diffusers_names.h's map read backwards: q/k/v packed into in_proj, text_projection
 * transposed, SD 2.x's cut last layer as zeros (an identity resblock); logit_scale, which no folder
 * holds, is left out (as diffusers' convert_diffusers_to_original_* scripts leave it out). */
bool sdt_ckpt_convert(const char *src, const char *path, sdt_ckpt_layout layout, int dtype, sdt_error *error);

/* The value stream of one parameter: fills n floats as the generator does. */
void sdt_ckpt_fill(float *dst, int64_t n, const sdt_param_info *p, uint64_t seed, bool perturb_all);

#endif
