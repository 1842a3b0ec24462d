/* flux_text.h - Flux.1's text conditioning from CLIP-L and T5-XXL.
 *
 * As diffusers' FluxPipeline.encode_prompt builds it (src/diffusers/pipelines/flux/pipeline_flux.py,
 * _get_clip_prompt_embeds, _get_t5_prompt_embeds):
 *  - CLIP-L is a CLIPTextModel (no projection) on one 77-token sequence padded with the end token, run
 *    with output_hidden_states=False, and only its pooler_output is used: the final layer norm at the
 *    end token (clip_config.pooled_without_projection), pooled [B, 768], the transformer's pooled
 *    projection input. Its hidden states are not used: every layer runs for the pooled vector;
 *  - the context is T5's last hidden state, text_encoder_2(input_ids)[0] [B, L5, 4096], L5 =
 *    max_sequence_length: 512 for Flux.1 dev, 256 for schnell (t5_prompt.h gives the ids, t5_context.h
 *    the run or the cache). Flux has no T5-less form: T5 (or its cached output) is required.
 *
 * Backward takes d(context) and d(pooled) to the trained rows: a Flux embedding has clip_l [n, 768] and
 * t5xxl [n, 4096]; either may train alone, a NULL drows being a frozen table whose encoder's backward
 * does not run.
 */
#ifndef SDT_MODELS_FLUX_TEXT_H
#define SDT_MODELS_FLUX_TEXT_H

#include "clip_text.h"
#include "t5_context.h"

#define FLUX_CLIP_TOKENS 77

typedef struct sdt_flux_text_inputs {
    const sdt_tensor *tokens_l;     /* I32 [B, 77] on the backend's device, padded with the end token */
    const sdt_tensor *rows_l;       /* [R, CLIP-L width] the embedding's clip_l; NULL without overrides */
    const clip_override *overrides; /* CLIP-L's (prompt b, position, row) */
    int n_overrides;
    t5_context_inputs t5; /* T5's ids (or cached output), t5xxl rows and overrides */
    sdt_dtype act_dtype;
    bool anomaly_check;
} sdt_flux_text_inputs;

typedef struct sdt_flux_text_acts {
    int batch, t5_len;
    clip_text_acts l;
    t5_context_acts t5;
    sdt_tensor context; /* [B, t5_len, d_model]: T5's output itself (or the cached tensor) */
    sdt_tensor pooled;  /* [B, CLIP-L width]: CLIP-L's pooler_output */
} sdt_flux_text_acts;

/* l is Flux's CLIP-L (pooled_without_projection), t5 T5-XXL (NULL only with a cached in->t5.hidden).
 * With a measuring arena nothing is computed and the arena's peak is the memory forward needs. */
bool sdt_flux_text_forward(const clip_text_model *l, const t5_encoder *t5, sdt_backend *be, sdt_arena *arena,
                           const sdt_flux_text_inputs *in, sdt_flux_text_acts *acts, sdt_error *error);

/* From d(context) [B, t5_len, d_model] and d(pooled) [B, width_l] (either may be NULL) to drows_l
 * [R, width_l] and drows_t5 [R, d_model] (accumulated; NULL: frozen, that encoder's backward does not
 * run). */
bool sdt_flux_text_backward(const clip_text_model *l, const t5_encoder *t5, sdt_backend *be, sdt_arena *arena,
                            const sdt_flux_text_acts *acts, const sdt_tensor *dcontext, const sdt_tensor *dpooled,
                            sdt_tensor *drows_l, sdt_tensor *drows_t5, sdt_error *error);

#endif
