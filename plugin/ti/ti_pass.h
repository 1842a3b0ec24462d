/* ti_pass.h - one micro-batch of textual-inversion training: text encoder with the
 * embedding's rows spliced in, UNet on noised latents, MSE against the target, and
 * the way back to the embedding rows. Everything lives in one arena sized by running
 * the same sequence on a measuring arena first (ti_pass_measure). */
#ifndef SDT_TRAIN_TI_PASS_H
#define SDT_TRAIN_TI_PASS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clip_text.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

typedef struct ti_pass_shape {
    int batch, c, h, w;              /* latent shape of the batch */
    int chunks;                      /* 77-token chunks per prompt (ti_prompt.h) */
    int in_c;                        /* UNet input channels: c, or more for an inpainting model */
    bool weighted;                   /* a per-element loss weight comes with the batch */
} ti_pass_shape;

typedef struct ti_pass_inputs {
    ti_pass_shape shape;
    const int32_t *tokens;           /* host [batch * chunks, 77] (ti_prompt_batch) */
    const clip_override *overrides;  /* where the embedding rows go, per chunk sequence */
    int n_overrides;
    const float *noisy;              /* host [batch, in_c, h, w]: x_t, then any extra input channels */
    const float *target;             /* host: noise (eps) or v */
    const float *weight;             /* host, same shape; used when shape.weighted */
    const float *timesteps;          /* host [batch] */
} ti_pass_inputs;

typedef struct ti_pass_options {
    int clip_skip;                   /* 0: the model's default */
    bool checkpointing;              /* recompute UNet blocks in backward */
    bool anomaly_check;              /* name the first layer with a non-finite value */
} ti_pass_options;

/* Arena bytes a pass of this shape needs (forward and backward). */
bool ti_pass_measure(sd_runtime *rt, const ti_pass_options *opt, const ti_pass_shape *shape, const sdt_tensor *rows,
                     sdt_tensor *drows, size_t *bytes, sdt_error *error);
/* Forward, loss (mean over elements, unscaled) and, when backward, drows += dloss * d(loss)/d(rows).
 * The arena must hold ti_pass_measure's bytes. rows and drows are [n_vectors, width] on the device. */
bool ti_pass_run(sd_runtime *rt, work_arena *wa, const ti_pass_options *opt, const ti_pass_inputs *in, const sdt_tensor *rows,
                 sdt_tensor *drows, float dloss, bool backward, double *loss, sdt_error *error);


#endif
