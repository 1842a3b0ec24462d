/* sd3_text.h - SD3's and SD3.5's text conditioning from CLIP-L, OpenCLIP bigG and T5-XXL.
 *
 * As diffusers' StableDiffusion3Pipeline.encode_prompt builds it
 * (src/diffusers/pipelines/stable_diffusion_3/pipeline_stable_diffusion_3.py, _get_clip_prompt_embeds,
 * _get_t5_prompt_embeds, encode_prompt):
 *  - CLIP-L and bigG are CLIPTextModelWithProjection, each on one 77-token sequence (tokenizer /
 *    tokenizer_2, padding="max_length", truncation: no chunks), run with output_hidden_states=True:
 *    the context part is hidden_states[-2], the penultimate layer's output without the final layer
 *    norm (hidden_states[-(clip_skip + 2)] with the pipeline's clip_skip: clip_text_inputs' clip_skip
 *    2 + that; 0 here is the default, 2), and the pooled part is output[0], text_embeds: ln_final at
 *    the end token times text_projection (both encoders have one: CLIP-L's [768, 768], bigG's
 *    [1280, 1280]). CLIP-L pads with the end token, bigG with 0 after it (tokenizer_2's pad "!", id 0:
 *    sdt_tokens_pad_after_end with clip_pad_id, as SDXL's);
 *  - clip_prompt_embeds = cat([L, G], dim=-1) [B, 77, 2048], zero-padded on the feature axis to T5's
 *    width (F.pad to t5_prompt_embed.shape[-1], 4096), then cat([clip, t5], dim=-2): the context is
 *    [B, 77 + L5, 4096], CLIP's 77 rows first;
 *  - T5 is text_encoder_3(input_ids)[0], the last hidden state [B, L5, 4096] (max_sequence_length, 256
 *    by default; t5_prompt.h gives the ids, t5_context.h the run or the cache); without T5
 *    (text_encoder_3 None) the pipeline puts zeros [B, tokenizer_max_length = 77, joint_attention_dim]
 *    in its place, so the context is [B, 154, 4096] then;
 *  - pooled = cat([L pooled, G pooled], dim=-1) [B, 768 + 1280 = 2048].
 *
 * Backward takes d(context) and d(pooled) (what the transformer's backward gives) to each encoder's
 * trained rows: an SD3 embedding has a table per encoder (clip_l [n, 768], clip_g [n, 1280], t5xxl
 * [n, 4096]); any subset trains, a NULL drows being a frozen table whose encoder's backward does
 * not run (T5's is the expensive one).
 */
#ifndef SDT_MODELS_SD3_TEXT_H
#define SDT_MODELS_SD3_TEXT_H

#include "clip_text.h"
#include "t5_context.h"

#define SD3_CLIP_TOKENS 77 /* tokenizer_max_length: CLIP's sequence, and the zero T5 block without T5 */

typedef struct sdt_sd3_text_inputs {
    const sdt_tensor *tokens_l;     /* I32 [B, 77] on the backend's device, padded with the end token */
    const sdt_tensor *tokens_g;     /* the same ids padded for bigG (0 after the first end token) */
    const sdt_tensor *rows_l;       /* [R, CLIP-L width] the embedding's clip_l; NULL without overrides */
    const sdt_tensor *rows_g;       /* [R, bigG width] its clip_g */
    const clip_override *overrides; /* (prompt b, position, row), the same for both CLIP encoders */
    int n_overrides;
    t5_context_inputs t5; /* T5's ids (or cached output), rows and overrides; unused without T5 */
    int joint_dim;        /* the transformer's joint_attention_dim (4096); 0: T5's width (needed without T5) */
    int clip_skip;        /* clip_text_inputs' convention: 0 the default (2, the penultimate layer) */
    sdt_dtype act_dtype;
    bool anomaly_check;
} sdt_sd3_text_inputs;

typedef struct sdt_sd3_text_acts {
    int batch, t5_len, width; /* width: the context's, joint_dim */
    clip_text_acts l, g;
    t5_context_acts t5;
    bool has_t5;
    sdt_tensor context; /* [B, 77 + t5_len, width] */
    sdt_tensor pooled;  /* [B, CLIP-L projection + bigG projection] */
} sdt_sd3_text_acts;

/* l and g are SD3's CLIP-L and bigG (both with a text projection), t5 T5-XXL or NULL (no T5: zeros, or
 * with in->t5.hidden a cached output). With a measuring arena nothing is computed and the arena's peak
 * is the memory forward needs. */
bool sdt_sd3_text_forward(const clip_text_model *l, const clip_text_model *g, const t5_encoder *t5, sdt_backend *be,
                          sdt_arena *arena, const sdt_sd3_text_inputs *in, sdt_sd3_text_acts *acts, sdt_error *error);

/* From d(context) [B, 77 + t5_len, width] and d(pooled) [B, Pl + Pg] (either may be NULL) to drows_l
 * [R, width_l], drows_g [R, width_g], drows_t5 [R, d_model] (accumulated; NULL: that table is frozen
 * and its encoder's backward does not run). Scratch comes from the arena and is given back. */
bool sdt_sd3_text_backward(const clip_text_model *l, const clip_text_model *g, const t5_encoder *t5, sdt_backend *be,
                           sdt_arena *arena, const sdt_sd3_text_acts *acts, const sdt_tensor *dcontext,
                           const sdt_tensor *dpooled, sdt_tensor *drows_l, sdt_tensor *drows_g, sdt_tensor *drows_t5,
                           sdt_error *error);

#endif
