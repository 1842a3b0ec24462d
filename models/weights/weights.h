/* weights.h - a checkpoint's tensors in one canonical key space.
 *
 * Whatever layout a checkpoint comes in (single-file LDM safetensors, a
 * diffusers folder), its tensors are reachable here under the LDM single-file
 * names: "model.diffusion_model.*", "cond_stage_model.transformer.text_model.*",
 * "first_stage_model.*". Models look their parameters up by those names and
 * check shapes; they never see file formats.
 *
 * Tensors stay in the file's dtype (F32, F16, BF16) unless the caller asks for
 * a conversion. On the CPU they point straight into the memory-mapped file.
 *
 * Error convention for models/ (and plugin internals): functions that can fail
 * return false (or NULL) and write one sentence naming the file, the key and
 * the fix into *error.
 */
#ifndef SDT_MODELS_WEIGHTS_H
#define SDT_MODELS_WEIGHTS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "ops.h"
#include "tensor.h"

typedef struct sdt_weights sdt_weights;

/* Opens a checkpoint: a single file in the LDM layout, .safetensors or a
 * PyTorch .ckpt (torch.save's zip or legacy layout, told apart by content, read
 * without running code; its tensors under "state_dict" or at the top; EMA copies
 * "model_ema.*" left out as A1111 does), or a diffusers folder (unet/,
 * text_encoder/, vae/; SDXL's text_encoder_2/, whose presence makes text_encoder/ SDXL's first
 * encoder). */
sdt_weights *sdt_weights_open(const char *path, sdt_error *error);
void sdt_weights_close(sdt_weights *w);

/* One part of a transformer-family model in a file of its own, as people download them: clip_l.safetensors,
 * clip_g.safetensors (transformers' names), t5xxl_fp16.safetensors / t5xxl_fp8_e4m3fn.safetensors (T5's names),
 * Flux's ae.safetensors (LDM names) or a diffusers vae/diffusion_pytorch_model.safetensors. Its tensors land
 * under the part's canonical prefix (transformer_keys.h: text_encoders.{clip_l,clip_g,t5xxl}.transformer.,
 * first_stage_model.), where they would sit in an all-in-one file, so the same loaders read either. A file
 * that is not that part is refused with a sentence naming the option and the file people give it. */
typedef enum sdt_weights_part { SDT_PART_CLIP_L = 0, SDT_PART_CLIP_G, SDT_PART_T5XXL, SDT_PART_VAE } sdt_weights_part;
sdt_weights *sdt_weights_open_part(const char *path, sdt_weights_part part, sdt_error *error);

/* A copy of src's tensors for one backend and storage dtype: every float tensor is
 * converted to float_dtype and placed in be's memory (the CPU backend keeps src's own
 * memory where nothing needs converting). This is how frozen weights reach the GPU,
 * and how the NaN fallback upcasts them to f32. src must outlive the copy; close the
 * copy (before be is destroyed) with sdt_weights_close. */
sdt_weights *sdt_weights_materialize(const sdt_weights *src, sdt_backend *be, sdt_dtype float_dtype, sdt_error *error);

/* Frees the backend memory of w's tensors whose key starts with prefix (w from sdt_weights_materialize):
 * their data becomes NULL while the tensors, which bound networks point to, stay. Weights a phase does
 * not need leave the device this way (the VAE once the images are encoded). Memory w does not own (the
 * CPU backend serves unconverted tensors from the mapping) is not freed, only let go of. Returns the
 * bytes freed. */
size_t sdt_weights_release_prefix(sdt_weights *w, const char *prefix);
/* Brings back, from src (which w was materialized from) in float_dtype, every tensor of w under prefix
 * that sdt_weights_release_prefix released, into the same tensors. */
bool sdt_weights_rematerialize_prefix(sdt_weights *w, const sdt_weights *src, const char *prefix, sdt_dtype float_dtype,
                                      sdt_error *error);

/* The tensor under a canonical key, or NULL when the checkpoint lacks it. */
const sdt_tensor *sdt_weights_get(const sdt_weights *w, const char *key);
/* Like sdt_weights_get, but a missing key or a shape other than shape[0..ndim)
 * is an error sentence naming the checkpoint file and the key. */
const sdt_tensor *sdt_weights_require(const sdt_weights *w, const char *key, int ndim, const int64_t *shape,
                                      sdt_error *error);
/* Number of tensors and the i-th canonical key (for config detection and listing). */
size_t sdt_weights_count(const sdt_weights *w);
const char *sdt_weights_key(const sdt_weights *w, size_t i);
/* The name key's tensor has in its file (before any mapping), or NULL when w lacks key. */
const char *sdt_weights_source(const sdt_weights *w, const char *key);
/* Whether w was opened from a diffusers folder. */
bool sdt_weights_is_folder(const sdt_weights *w);
/* The path the weights came from, and a short hash as hosts show it
 * (A1111's: first 10 hex digits of sha256 of the file; for a folder, of the UNet file). */
const char *sdt_weights_path(const sdt_weights *w);
bool sdt_weights_short_hash(sdt_weights *w, char out[11], sdt_error *error);
/* The file the short hash is taken of, and that hash of any file; touching no sdt_weights, it may
 * run on a thread of its own while the weights are read (plugin/train/sd_runtime.c). */
const char *sdt_weights_hash_file(const sdt_weights *w);
bool sdt_file_short_hash(const char *path, char out[11], sdt_error *error);
/* When w is a diffusers folder without the part (unet/, text_encoder/, vae/) that keys with
 * key_prefix come from: true and a sentence naming the missing folder (NOT_FOUND). Detectors say
 * this before falling back to the key names they could not find. */
bool sdt_weights_missing_part(const sdt_weights *w, const char *key_prefix, sdt_error *error);

#endif
