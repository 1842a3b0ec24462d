/* flow_memory.h - what an embedding step on a transformer family (SD3/SD3.5's MMDiT, Flux.1) needs on the GPU,
 * from the configs alone: nothing is loaded, allocated or computed.
 *
 * prepare measures the pass it will run (sdt_pass_measure on the loaded model) and adds the weights on the device;
 * this is the same sum for a model nobody has on disk: the frozen weights (their parameter counts in the storage
 * dtype: the transformer and the CLIP encoders, T5 only when its rows train, the VAE parked as prepare parks it),
 * the activations (the pass's sequence on a measuring arena, in sd_pass's order: the pass's tensors, the prompts'
 * ids, the text encoders' forward kept for their backward, or T5's cached output in its place, the transformer's
 * forward and backward with or without gradient checkpointing, the gradients handed back, the encoders' backward)
 * and the trained rows (values, gradient and AdamW's two moments in f32). bench/flow_memory prints it for the
 * full-size models; train_test_flow_memory checks it against a real CPU step of the tiny models.
 */
#ifndef SDT_TRAIN_FLOW_MEMORY_H
#define SDT_TRAIN_FLOW_MEMORY_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "clip_text.h"
#include "flux.h"
#include "mmdit.h"
#include "ops.h"
#include "t5_encoder.h"

typedef enum { SDT_FLOW_MEMORY_SD3, SDT_FLOW_MEMORY_FLUX } sdt_flow_memory_family;

typedef struct sdt_flow_memory_config {
    sdt_flow_memory_family family;
    mmdit_config mmdit;         /* SD3 */
    flux_config flux;           /* Flux */
    clip_config clip_l, clip_g; /* clip_g: SD3 only; Flux's CLIP-L has no projection (pooled_without_projection) */
    t5_config t5;
    sdt_dtype dtype;        /* frozen weights and activations (bf16 on the GPU) */
    int batch;              /* per device */
    int latent_h, latent_w; /* the latent: the image / 8 */
    int t5_len;             /* T5's sequence: 256 (SD3) or 512 (Flux) */
    int vectors;            /* the embedding's vectors */
    bool checkpointing;     /* gradient checkpointing through every block */
    bool t5_trained;        /* false: T5's output is cached and its weights leave the GPU */
} sdt_flow_memory_config;

typedef struct sdt_flow_memory {
    size_t weights;     /* frozen weights on the device */
    size_t activations; /* the pass's arena: the measured peak */
    size_t trained;     /* the rows: values, gradient, two moments (f32) */
    size_t total;
} sdt_flow_memory;

/* The full-size configs (SD3.5 Large / Medium with CLIP-L, bigG and T5-XXL; Flux dev / schnell with CLIP-L and
 * T5-XXL), 1 vector, bf16, batch 1, T5 256 (SD3) or 512 (Flux) tokens; the caller sets the rest. */
sdt_flow_memory_config sdt_flow_memory_sd35(bool large, int image_side);
sdt_flow_memory_config sdt_flow_memory_flux(bool dev, int image_side);

/* be: the backend whose device the sizes are for (only its device and allocation rules are used). */
bool sdt_flow_memory_estimate(const sdt_flow_memory_config *cfg, sdt_backend *be, sdt_flow_memory *out,
                              sdt_error *error);

#endif
