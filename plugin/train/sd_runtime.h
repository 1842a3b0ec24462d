/* sd_runtime.h - a Stable Diffusion checkpoint ready to compute on one backend.
 *
 * The checkpoint file is opened once (memory-mapped), its config detected and every
 * weight checked finite; then its tensors are materialized for the backend in the
 * storage dtype of the precision mode (f16/bf16 frozen weights for mixed precision,
 * f32 otherwise) and the three networks are bound to that copy. The NaN fallback
 * calls sd_runtime_set_dtype(F32): a fresh f32 copy, the networks rebound, the old
 * copy released.
 */
#ifndef SDT_TRAIN_SD_RUNTIME_H
#define SDT_TRAIN_SD_RUNTIME_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "sd_model.h"
#include "weights.h"

typedef struct sd_runtime {
    sdt_weights *file; /* as opened: the CPU mapping */
    sdt_weights *dev;  /* materialized for be in dtype */
    /* SD3's parts given as files of their own (sdt_weights_open_part; NULL: the checkpoint's), and their
     * copies for be in dtype; index sd_part (SD_PART_DENOISER unused) */
    sdt_weights *part_file[SD_PART_COUNT];
    sdt_weights *part_dev[SD_PART_COUNT];
    sd_config cfg;
    sd_model model;
    sdt_backend *be;
    sdt_dtype dtype;     /* frozen weights and activations */
    sdt_dtype vae_dtype; /* the VAE's weights and activations: dtype, or f32 for SDXL's VAE in an fp16 run */
    /* SD3.5's MMDiT and Flux's transformer: their activations' dtype (their weights stay in dtype): dtype, or f32
     * in an fp16 run without bf16, as those transformers overflow fp16 at full size */
    sdt_dtype transformer_act_dtype;
    bool bound;
    bool vae_parked;                 /* the VAE's weights are off the backend (sd_runtime_vae_park) */
    bool text_parked;                /* the text encoders' weights are off the backend (sd_runtime_text_park) */
    bool part_parked[SD_PART_COUNT]; /* each text part's weights are off the backend (sd_runtime_part_park) */
    /* every prompt's conditioning, encoded once (train/text_cache.h): sd_cond copies it instead of
     * running the encoders; NULL: the encoders run */
    const struct sdt_text_cache *text_cache;
    /* T5's output for every prompt, computed once (train/t5_cache.h: SD3.5/Flux.1 runs whose t5xxl table does
     * not train): sd_cond gives it to the conditioning instead of running T5; NULL: T5 runs */
    const struct sdt_t5_cache *t5_cache;
    sd_prediction_source overruled; /* a config file whose prediction the user's choice overruled, else DEFAULT */
    /* seconds the last open spent opening and detecting, on the finite check, and placing the
     * weights on the backend in dtype (for the log line that says where loading went) */
    double open_s, check_s, place_s;
    /* the short hash, taken on a thread of its own while the weights are checked and placed */
    struct sd_runtime_hash *hash;
} sd_runtime;

/* prediction EPSILON or V is the user's word over everything; AUTO takes a diffusers scheduler
 * config's prediction_type or the parameterization of A1111's <stem>.yaml beside a single-file
 * checkpoint (checkpoint_yaml.h), else for an SD 2.x model the UNet probe's answer (prediction_probe.h,
 * run once on the bound model), else SD's default, epsilon. cfg.prediction_source says which. */
bool sd_runtime_open(sd_runtime *rt, const char *path, sdt_backend *be, sdt_dtype dtype,
                     sd_prediction_choice prediction, bool hash_alongside, sdt_error *error);
/* sd_runtime_open in its two steps, for a caller that chooses the dtype from the config: read (open,
 * detect the config, check every weight finite) and place (the prediction, the weights in dtype on the
 * backend, the probe). Either closes the runtime when it fails. */
bool sd_runtime_read(sd_runtime *rt, const char *path, sdt_backend *be, bool hash_alongside, sdt_error *error);
/* sd_runtime_read with a transformer family's part files (part_paths[p], index sd_part; NULL or "": the
 * checkpoint's own): each opened under its canonical prefix; a part neither supplies is one sentence naming the
 * option and the sdt_train_options field. A part file beside a UNet checkpoint is refused by name. */
bool sd_runtime_read_parts(sd_runtime *rt, const char *path, const char *const part_paths[SD_PART_COUNT],
                           sdt_backend *be, bool hash_alongside, sdt_error *error);
bool sd_runtime_place(sd_runtime *rt, sdt_dtype dtype, sd_prediction_choice prediction, sdt_error *error);
/* The checkpoint's short hash (sdt_weights_short_hash): what the thread hash_alongside started
 * found, waited for here (*seconds: how long it hashed), or taken now. */
bool sd_runtime_short_hash(sd_runtime *rt, char out[11], double *seconds, sdt_error *error);
/* One sentence for the log: what the model predicts and who said so ("the model predicts v (the
 * UNet probe: ...)"). */
void sd_runtime_prediction_sentence(const sd_runtime *rt, char *buf, size_t size);
bool sd_runtime_set_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error);
/* Once the images are encoded, the VAE's weights leave the GPU: training never reads them, and
 * sd_runtime_vae_ready brings them back for a preview or a re-encode. Nothing to gain on the CPU
 * (returns 0 there); returns the bytes freed. */
size_t sd_runtime_vae_park(sd_runtime *rt);
/* The VAE on the backend (again), before any encode or decode. */
bool sd_runtime_vae_ready(sd_runtime *rt, sdt_error *error);
/* Once every prompt of the run is in rt->text_cache, the text encoders' weights leave the backend
 * (on every backend: a converted CPU copy is freed too, the file's mapping only let go of); nothing
 * runs them again until sd_runtime_set_dtype binds a fresh copy. Returns the bytes of weights let go
 * of (what the memory plan no longer counts). */
size_t sd_runtime_text_park(sd_runtime *rt);
/* One text encoder's weights off the backend (SD3's T5 once its output is cached while CLIP still runs);
 * returns the bytes let go of. sd_runtime_text_park is every text part's. */
size_t sd_runtime_part_park(sd_runtime *rt, sd_part part);
/* The VAE's weights and activations in dtype from here on (the rest of the model keeps rt->dtype):
 * SDXL's VAE overflows fp16, so an fp16 run without bf16 encodes and decodes it in f32. */
bool sd_runtime_set_vae_dtype(sd_runtime *rt, sdt_dtype dtype, sdt_error *error);
void sd_runtime_close(sd_runtime *rt);

/* What an image's sides must be multiples of: the VAE's factor, doubled per UNet level below the first; for SD3's
 * transformer the VAE's factor times its patch size, for Flux's times 2 (its packed 2 x 2 latents). */
int sd_runtime_image_divisor(const sd_runtime *rt);

#endif
