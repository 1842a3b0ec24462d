/* t5_context.h - T5's share of a transformer family's conditioning (sd3_text.h, flux_text.h).
 *
 * T5-XXL's last hidden state [B, L, d_model] comes from the encoder run on the prompt's T5 ids
 * (t5_prompt.h: the text, </s>, <pad>; the placeholder's slots overridden by the embedding's t5xxl
 * rows), or from a cache: a run that trains no T5 rows computes it once per prompt (t5_context_forward
 * with tokens, the placeholder's frozen rows included, then acts.out downloaded, [L, d_model] per prompt
 * in the activation dtype) and hands it back here as `hidden`, so the encoder's weights can be freed. Backward reaches T5's rows only when they train (drows given); a
 * frozen or cached T5 costs no backward at all.
 */
#ifndef SDT_MODELS_T5_CONTEXT_H
#define SDT_MODELS_T5_CONTEXT_H

#include "t5_encoder.h"

typedef struct t5_context_inputs {
    const sdt_tensor *tokens;     /* I32 [B, L] (L 256 or 512) on the backend's device; NULL with hidden */
    const sdt_tensor *hidden;     /* cached output [B, L, d_model] in the activation dtype; NULL: run T5 */
    const sdt_tensor *rows;       /* [R, d_model] the embedding's t5xxl rows; NULL without overrides */
    const t5_override *overrides; /* (prompt b, position, row); must stay valid until backward */
    int n_overrides;
} t5_context_inputs;

typedef struct t5_context_acts {
    bool ran;       /* T5 ran here (false: cached hidden state) */
    t5_acts t5;     /* ran: what backward needs */
    sdt_tensor out; /* [B, L, d_model]: T5's output or the cached one (a view, no copy) */
} t5_context_acts;

/* Checks the inputs against the batch B and model m (NULL only with hidden), then runs T5 or takes
 * hidden. A measuring arena computes nothing. */
bool t5_context_forward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_context_inputs *in, int batch,
                        sdt_dtype act_dtype, const char *who, t5_context_acts *acts, sdt_error *error);
/* dout [B, L, d_model] to drows [R, d_model] (accumulated). drows NULL: frozen rows, nothing runs. A
 * cached hidden state with drows is refused: its rows cannot train. */
bool t5_context_backward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_context_acts *acts,
                         const sdt_tensor *dout, sdt_tensor *drows, const char *who, sdt_error *error);

#endif
