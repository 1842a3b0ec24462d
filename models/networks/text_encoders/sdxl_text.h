/* sdxl_text.h - SDXL's text conditioning from its two encoders.
 *
 * Each prompt is K chunks of 77 tokens (A1111's chunking); both encoders read every chunk,
 * CLIP ViT-L with its padding (the end token) and OpenCLIP bigG with its own (0 after the
 * first end token: sdt_tokens_pad_after_end with clip_pad_id). The UNet's context is, per
 * chunk and position, [CLIP-L's penultimate hidden state (768), bigG's (1280)] = 2048 wide,
 * [B, K x 77, 2048] (sgm's GeneralConditioner concatenates the embedders' outputs on the
 * last dimension; A1111 and kohya do the same per chunk). The pooled embedding that starts
 * y is bigG's pooled output of each prompt's first chunk (A1111 and kohya take the first
 * chunk's), [B, 1280].
 *
 * Backward takes d(context) and d(pooled) (what the UNet's backward gives: d(y)'s pooled
 * slice, sdxl_cond.h) to both encoders' override rows: an SDXL embedding trains clip_l
 * [n, 768] through CLIP-L and clip_g [n, 1280] through bigG, at the same placeholder
 * positions.
 */
#ifndef SDT_MODELS_SDXL_TEXT_H
#define SDT_MODELS_SDXL_TEXT_H

#include "clip_text.h"

typedef struct sdt_sdxl_text_inputs {
    const sdt_tensor *tokens_l;     /* I32 [B x K, 77] on the backend's device: chunk k of prompt b at row b * K + k */
    const sdt_tensor *tokens_g;     /* the same chunks padded for bigG */
    int chunks;                     /* K >= 1 */
    const sdt_tensor *rows_l;       /* [R, CLIP-L width] override rows (an embedding's clip_l); NULL when none */
    const sdt_tensor *rows_g;       /* [R, bigG width] (its clip_g) */
    const clip_override *overrides; /* the same (sequence b * K + k, position, row) for both encoders */
    int n_overrides;
    sdt_dtype act_dtype;
    bool anomaly_check;
} sdt_sdxl_text_inputs;

typedef struct sdt_sdxl_text_acts {
    int batch, chunks;
    clip_text_acts l, g;    /* each encoder's saved activations */
    sdt_tensor first_chunk; /* I32 [B, 1]: row b * K of bigG's pooled outputs */
    sdt_tensor context;     /* [B, K x 77, width_l + width_g]: the UNet's cross-attention input */
    sdt_tensor pooled;      /* [B, projection]: y's first part */
} sdt_sdxl_text_acts;

/* l and g are SDXL's two encoders (sd_model's clip and clip2). With a measuring arena nothing is
 * computed and the arena's peak is the memory forward needs. */
bool sdt_sdxl_text_forward(const clip_text_model *l, const clip_text_model *g, sdt_backend *be, sdt_arena *arena,
                           const sdt_sdxl_text_inputs *in, sdt_sdxl_text_acts *acts, sdt_error *error);

/* From d(context) [B, K x 77, width_l + width_g] and d(pooled) [B, projection] (either may be NULL) to
 * drows_l [R, width_l] and drows_g [R, width_g] (accumulated). Scratch comes from the arena and is
 * given back. */
bool sdt_sdxl_text_backward(const clip_text_model *l, const clip_text_model *g, sdt_backend *be, sdt_arena *arena,
                            const sdt_sdxl_text_acts *acts, const sdt_tensor *dcontext, const sdt_tensor *dpooled,
                            sdt_tensor *drows_l, sdt_tensor *drows_g, sdt_error *error);

#endif
