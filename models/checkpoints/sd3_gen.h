/* sd3_gen.h - seeded random-weight SD3/SD3.5 and Flux.1 checkpoints and part files, for tests and benchmarks.
 *
 * Every parameter sd_params enumerates for an SD3 config (the MMDiT in diffusers' names under
 * model.diffusion_model., CLIP-L, CLIP-G and T5 under text_encoders.*.transformer., the 16-channel VAE under
 * first_stage_model.) is drawn as checkpoint_gen.h draws a model's (each tensor its own stream keyed by seed and
 * canonical key), then packed as people have the files (transformer_pack.h): SAI's all-in-one layout, with or
 * without T5, or one part alone as ComfyUI's clip_l/clip_g/t5xxl and Flux's ae files name it. A Flux config
 * (sd_config_is_flux: the Flux transformer, CLIP-L, T5, the VAE) is packed as ComfyUI's all-in-one Flux files are
 * (BFL's transformer under model.diffusion_model., the encoders under text_encoders.*, the VAE under vae.). The
 * same seed gives a part the same tensors in either file. */
#ifndef SDT_MODELS_SD3_GEN_H
#define SDT_MODELS_SD3_GEN_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "sd_model.h"

/* Writes path atomically in SAI's layout (Flux: ComfyUI's): the transformer and every part where in[p] (index
 * sd_part; the transformer always), in dtype (SDT_F32, SDT_F16 or SDT_BF16). */
bool sd3_generate(const char *path, const sd_config *cfg, const bool in[SD_PART_COUNT], sdt_dtype dtype, uint64_t seed,
                  bool perturb_all, sdt_error *error);
/* One part alone with its keys at the top, as a lone file has them (SD_PART_DENOISER: the transformer in diffusers'
 * names, as a diffusers folder's transformer/diffusion_pytorch_model.safetensors). */
bool sd3_generate_part(const char *path, const sd_config *cfg, sd_part part, sdt_dtype dtype, uint64_t seed,
                       bool perturb_all, sdt_error *error);

#endif
