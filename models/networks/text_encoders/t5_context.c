/* t5_context.c - T5's output, run or cached, and its backward to trained rows; see t5_context.h. */
#include "t5_context.h"

#include <string.h>

bool t5_context_forward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_context_inputs *in, int batch,
                        sdt_dtype act_dtype, const char *who, t5_context_acts *a, sdt_error *error)
{
    memset(a, 0, sizeof(*a));
    if (in->hidden) {
        const sdt_tensor *h = in->hidden;
        if (h->ndim != 3 || h->shape[0] != batch || h->dtype != act_dtype || (m && h->shape[2] != m->cfg.d_model))
            return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                            "%s: the cached T5 output must be [%d, sequence, %d] in the activation dtype %s, "
                            "as T5 wrote it for these prompts; encode the cache again",
                            who, batch, m ? m->cfg.d_model : (int)h->shape[2], sdt_dtype_name(act_dtype));
        a->out = *h;
        return true;
    }
    if (!m || !in->tokens || in->tokens->ndim != 2 || in->tokens->shape[0] != batch)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "%s: T5 needs its model and its ids [%d prompts, sequence length] (or a cached output)", who,
                        batch);
    if (in->n_overrides > 0 && (!in->rows || in->rows->ndim != 2 || in->rows->shape[1] != m->cfg.d_model))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "%s: the placeholder's T5 positions need the embedding's t5xxl rows [n, %d]", who,
                        m->cfg.d_model);
    t5_inputs ti = {.tokens = in->tokens,
                    .lengths = NULL, /* no mask: diffusers runs SD3's and Flux's T5 so */
                    .rows = in->n_overrides > 0 ? in->rows : NULL,
                    .overrides = in->overrides,
                    .n_overrides = in->n_overrides,
                    .act_dtype = act_dtype};
    if (!t5_encoder_forward(m, be, arena, &ti, &a->t5, error)) return false;
    a->ran = true;
    a->out = a->t5.out;
    return true;
}

bool t5_context_backward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_context_acts *a,
                         const sdt_tensor *dout, sdt_tensor *drows, const char *who, sdt_error *error)
{
    if (!drows) return true; /* frozen: T5's backward is the expensive half, skipped whole */
    if (!a->ran)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "%s: T5's rows cannot train from a cached T5 output; run T5 (no cache) when the "
                        "embedding's t5xxl rows train",
                        who);
    if (a->t5.n_overrides == 0 || !dout) return true; /* nothing reaches the rows */
    return t5_encoder_backward(m, be, arena, &a->t5, dout, drows, error);
}
