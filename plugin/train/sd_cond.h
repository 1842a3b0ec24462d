/* sd_cond.h - a batch of prompts as the UNet's conditioning, for every model family.
 *
 * SD 1.x/2.x: one text encoder, its (clip-skipped) hidden states as the context. SDXL: both
 * encoders (models/networks/text_encoders/sdxl_text.h) give the 2048-wide context and the pooled
 * embedding, and y = [pooled, the six size embeddings] (sdxl_cond.h) is the UNet's vector
 * conditioning. Training passes and previews both condition through here, so the two can never
 * disagree on padding, on what an embedding's rows replace, or on how y is made.
 *
 * Tokens come as sdt_prompt_batch lays them out, padded for the first encoder; SDXL's bigG
 * copy is made here (sdt_tokens_pad_after_end with clip_pad_id). An SDXL embedding's rows hold
 * both encoders' vectors side by side, [n, 768 + 1280] (clip_l then clip_g, as the embedding
 * file keeps them in memory); they are split for the encoders here and their gradients joined
 * again, so the optimizer, the guard and the state see one table.
 *
 * SD3/SD3.5 (models/networks/text_encoders/sd3_text.h): CLIP-L and bigG on one 77-token sequence each (one
 * chunk), T5 on its own ids (t5_prompt.h, the placeholder's slots there), the context [B, 77 + L5, 4096] and the
 * pooled vector [B, 2048] the MMDiT reads. An SD3 embedding's rows are table-major (plugin/ti/embedding.h:
 * clip_l [n, 768], then clip_g [n, 1280], then t5xxl [n, 4096], each contiguous): each encoder reads a view of
 * its table and its gradient goes into the same view of drows, only for the tables that train (a frozen table's
 * encoder runs no backward).
 *
 * Flux.1 (models/networks/text_encoders/flux_text.h): CLIP-L on one 77-token sequence for its pooled output only,
 * T5 on its own ids for the context [B, L5, 4096]; the table-major rows are clip_l then t5xxl (no clip_g), each
 * encoder reading its view and its gradient going into the same view of drows as SD3's.
 * With a T5 cache on the runtime (rt->t5_cache, train/t5_cache.h: the t5xxl table does not train) T5 does not run:
 * the batch's T5 output is copied from the cache (keyed on T5's ids and the slots' rows) and CLIP runs as before.
 *
 * With a text cache on the runtime (rt->text_cache, train/text_cache.h: a run whose text side trains
 * nothing) the encoders do not run: the context and SDXL's pooled embedding are copied from the
 * cache chunk by chunk, and y is made from them as before.
 */
#ifndef SDT_TRAIN_SD_COND_H
#define SDT_TRAIN_SD_COND_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "clip_text.h"
#include "flux_text.h"
#include "sd3_text.h"
#include "sdxl_cond.h"
#include "sdxl_text.h"
#include "train/sd_runtime.h"

typedef struct sdt_cond_inputs {
    const int32_t *tokens; /* host [batch * chunks, 77] (sdt_prompt_batch); NULL on a measuring arena */
    int batch, chunks;
    int32_t end_id;                 /* the tokenizer's end token (SDXL: bigG pads with 0 after it) */
    const clip_override *overrides; /* an embedding's slots, per chunk sequence */
    int n_overrides;
    const sdt_tensor *rows;      /* the embedding's rows [n, text width] (SDXL: [n, 768 + 1280]), or NULL */
    const sdt_sdxl_sizes *sizes; /* SDXL: host [batch], each prompt's size conditioning */
    const bool *zero_text;       /* SDXL, optional host [batch]: true zeroes that prompt's context and pooled
                                      * embedding (an empty negative prompt, as A1111 and diffusers do for SDXL) */
    int clip_skip;               /* SD 1.x (0: the model's default); SDXL uses its penultimate layers */
    sdt_dtype act_dtype;
    bool anomaly_check;
    /* SD3: T5's ids host [batch, t5_len] (t5_prompt.h) and the embedding's slots in them; the tables whose
     * gradient backward gives (SDT_ENCODER_* bits; 0: every table) */
    const int32_t *t5_tokens;
    int t5_len;
    const t5_override *t5_overrides;
    int n_t5_overrides;
    uint32_t trained_tables;
} sdt_cond_inputs;

typedef struct sdt_cond {
    bool sdxl;
    bool sd3;                    /* SD3/SD3.5: text3 holds the encoders' activations */
    sdt_tensor tokens_t5;        /* SD3: T5's ids on the device */
    sdt_tensor t5_hidden;        /* SD3/Flux with a T5 cache: the batch's cached T5 output on the device */
    sdt_tensor rows_t5;          /* SD3: views of the table-major rows (rows_l, rows_g too) */
    sdt_sd3_text_acts text3;     /* SD3 */
    bool flux;                   /* Flux.1: textf holds the encoders' activations (tokens_t5, rows_* as SD3's) */
    sdt_flux_text_acts textf;    /* Flux.1 */
    uint32_t trained_tables;     /* SD3: the tables backward reaches */
    sdt_tensor tokens, tokens_g; /* on the device */
    sdt_tensor rows_l, rows_g;   /* SDXL: the embedding's rows split per encoder */
    clip_text_acts clip;         /* SD 1.x/2.x */
    sdt_sdxl_text_acts text;     /* SDXL */
    sdt_tensor time_embeds;      /* SDXL: [batch, 6 x 256], y's size part */
    sdt_tensor context;          /* [batch, chunks x 77, context width] */
    sdt_tensor y;                /* SDXL: [batch, adm_in_channels]; no data otherwise */
} sdt_cond;

/* Forward (on a measuring arena only the sizes add up). Activations stay on the arena for backward. */
bool sdt_cond_forward(sd_runtime *rt, sdt_arena *a, const sdt_cond_inputs *in, sdt_cond *c, sdt_error *error);
/* Whether the model family's conditioning reads rt->t5_cache (train/t5_cache.h): SD3/SD3.5's and Flux.1's do
 * (through cond_t5_inputs/cond_t5_upload); a cache on another runtime is refused as a bug. */
bool sdt_cond_reads_t5_cache(const sd_runtime *rt);
/* SD3: the view [n, d_model] of a table-major embedding's t5xxl table (no copy; what T5's slots read); a tensor
 * without data when rows is NULL or not of that layout. */
sdt_tensor sdt_cond_t5_table(sd_runtime *rt, const sdt_tensor *rows);
/* The UNet's vector conditioning, or NULL for a model without one. */
const sdt_tensor *sdt_cond_y(const sdt_cond *c);
/* SD3: the pooled vector [batch, 2048] the transformer reads; Flux: CLIP-L's pooled output (NULL otherwise). */
const sdt_tensor *sdt_cond_pooled(const sdt_cond *c);
/* From d(context) (c->context's shape) and, for SDXL, d(y) (SD3: d(pooled); may be NULL) to the rows'
 * gradient drows (+=, the rows' shape). Nothing to do without overrides. */
bool sdt_cond_backward(sd_runtime *rt, sdt_arena *a, const sdt_cond *c, const sdt_tensor *dcontext,
                       const sdt_tensor *dy, sdt_tensor *drows, sdt_error *error);

#endif
