/* sd_pass.h - one micro-batch of training: the text conditioning (train/sd_cond.h: one encoder,
 * or SDXL's two and its vector conditioning, or SD3's three, with an embedding's rows spliced in, if one trains),
 * the UNet on noised latents (with a hypernetwork on its K/V inputs, if one trains), the loss
 * against the target (MSE, or L1/Huber: sdt_pass_options), and the way back: the UNet's backward (the hook accumulates
 * its weight gradients) and, only when an embedding trains, the text encoder's backward to its
 * rows. A hypernetwork-only run never runs the text encoder backward. SD3/SD3.5: the MMDiT is the denoiser
 * (mmdit.h: the latents x_t, timesteps 1000 t, the context and the pooled vector), its output the velocity
 * compared with the target (noise - x0, flow_match.h), its backward to the context and the pooled vector and on
 * to the trained tables' rows. Flux.1: its transformer (flux.h: the sigma t, dev's guidance, T5's context and
 * CLIP-L's pooled output) the same way. Everything lives in one
 * arena sized by running the same sequence on a measuring arena first (sdt_pass_measure). */
#ifndef SDT_TRAIN_SD_PASS_H
#define SDT_TRAIN_SD_PASS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clip_text.h"
#include "sdtrain.h"
#include "sdxl_cond.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

typedef struct sdt_pass_shape {
    int batch, c, h, w; /* latent shape of the batch */
    int chunks;         /* 77-token chunks per prompt (train/prompt.h) */
    int in_c;           /* UNet input channels: c, or more for an inpainting model */
    bool weighted;      /* a per-element loss weight comes with the batch */
    int t5_len;         /* SD3: T5's sequence (256 or 512); 0 otherwise */
} sdt_pass_shape;

/* Field by field: the struct has padding after `weighted`, which memcmp would read (and a
 * compound literal leaves unset), so two equal shapes could compare unequal. */
bool sdt_pass_shape_equal(const sdt_pass_shape *a, const sdt_pass_shape *b);

typedef struct sdt_pass_inputs {
    sdt_pass_shape shape;
    const int32_t *tokens;          /* host [batch * chunks, 77] (sdt_prompt_batch) */
    const clip_override *overrides; /* where the embedding rows go, per chunk sequence */
    int n_overrides;
    const float *noisy;          /* host [batch, in_c, h, w]: x_t, then any extra input channels */
    const float *target;         /* host: noise (eps) or v */
    const float *weight;         /* host, same shape; used when shape.weighted */
    const float *timesteps;      /* host [batch] */
    int32_t end_id;              /* the tokenizer's end token (train/sd_cond.h) */
    const sdt_sdxl_sizes *sizes; /* SDXL: host [batch], each image's size conditioning; else NULL */
    /* SD3: T5's ids host [batch, shape.t5_len] and the embedding's slots in them (t5_prompt.h) */
    const int32_t *t5_tokens;
    const t5_override *t5_overrides;
    int n_t5_overrides;
    float guidance; /* Flux.1 dev: the distilled guidance every sample embeds (schnell's transformer ignores it) */
} sdt_pass_inputs;

/* What trains in the pass. */
typedef struct sdt_pass_trainables {
    const sdt_tensor *rows;       /* [n_vectors, width] embedding rows on the device, or NULL; SDXL: both
                                      * encoders' side by side, [n_vectors, 768 + 1280] (clip_l, clip_g) */
    sdt_tensor *drows;            /* their gradient (+=); NULL: no text encoder backward */
    const sdt_unet_kv_hook *hook; /* the UNet's K/V hook (a hypernetwork), or NULL */
    uint32_t tables;              /* SD3: the tables of the table-major rows that train (SDT_ENCODER_* bits; 0: all);
                                   * the others' gradients stay as they are and their encoders run no backward */
} sdt_pass_trainables;

typedef struct sdt_pass_options {
    int clip_skip;           /* 0: the model's default */
    bool checkpointing;      /* recompute UNet units / MMDiT blocks in backward */
    bool anomaly_check;      /* name the first layer with a non-finite value */
    sdt_loss_type loss_type; /* zeroed: L2, A1111's MSE (the mse_loss op); L1 and Huber: robust_loss */
    float huber_delta;       /* HUBER's delta */
} sdt_pass_options;

/* Arena bytes a pass of this shape needs (forward and backward). */
bool sdt_pass_measure(sd_runtime *rt, const sdt_pass_options *opt, const sdt_pass_shape *shape,
                      const sdt_pass_trainables *tr, size_t *bytes, sdt_error *error);
/* Forward, loss (mean over elements, unscaled) and, when backward, every trainable's gradient +=
 * dloss * d(loss)/d(it). The arena must hold sdt_pass_measure's bytes. */
bool sdt_pass_run(sd_runtime *rt, work_arena *wa, const sdt_pass_options *opt, const sdt_pass_inputs *in,
                  const sdt_pass_trainables *tr, float dloss, bool backward, double *loss, sdt_error *error);

#endif
