/* flux_text.c - Flux.1's context (T5) and pooled vector (CLIP-L's pooler_output); see flux_text.h. */
#include "flux_text.h"

#define MODULE "flux_text"

bool sdt_flux_text_forward(const clip_text_model *l, const t5_encoder *t5, sdt_backend *be, sdt_arena *arena,
                           const sdt_flux_text_inputs *in, sdt_flux_text_acts *a, sdt_error *error)
{
    if (l->cfg.projection_dim != 0 || !l->cfg.pooled_without_projection)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flux_text: Flux's CLIP-L is a CLIPTextModel whose pooler_output (no projection) conditions "
                        "the transformer; configure it with pooled_without_projection");
    const sdt_tensor *tl = in->tokens_l;
    if (!tl || tl->ndim != 2 || tl->shape[1] != FLUX_CLIP_TOKENS)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "flux_text: CLIP-L's tokens must be [prompts, %d]",
                        FLUX_CLIP_TOKENS);
    if (in->n_overrides > 0 && (!in->rows_l || in->rows_l->ndim != 2 || in->rows_l->shape[1] != l->cfg.width))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flux_text: the placeholder's CLIP-L positions need the embedding's clip_l rows [n, %d]",
                        l->cfg.width);
    if (!t5 && !in->t5.hidden)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flux_text: Flux's context is T5's output; give the T5-XXL encoder (or its cached output)");
    int B = (int)tl->shape[0];
    a->batch = B;
    clip_text_inputs il = {.tokens = tl,
                           .rows = in->n_overrides > 0 ? in->rows_l : NULL,
                           .overrides = in->overrides,
                           .n_overrides = in->n_overrides,
                           .clip_skip = 0,
                           .act_dtype = in->act_dtype,
                           .anomaly_check = in->anomaly_check};
    if (!clip_text_forward(l, be, arena, &il, &a->l, error) ||
        !t5_context_forward(t5, be, arena, &in->t5, B, in->act_dtype, MODULE, &a->t5, error))
        return false;
    a->t5_len = (int)a->t5.out.shape[1];
    a->context = a->t5.out;
    a->pooled = a->l.pooled;
    return true;
}

bool sdt_flux_text_backward(const clip_text_model *l, const t5_encoder *t5, sdt_backend *be, sdt_arena *arena,
                            const sdt_flux_text_acts *a, const sdt_tensor *dcontext, const sdt_tensor *dpooled,
                            sdt_tensor *drows_l, sdt_tensor *drows_t5, sdt_error *error)
{
    int64_t B = a->batch, L5 = a->t5_len, D = a->context.shape[2], P = l->cfg.width;
    if ((dcontext &&
         (dcontext->ndim != 3 || dcontext->shape[0] != B || dcontext->shape[1] != L5 || dcontext->shape[2] != D)) ||
        (dpooled && (dpooled->ndim != 2 || dpooled->shape[0] != B || dpooled->shape[1] != P)))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flux_text: d(context) must be [%lld, %lld, %lld] and d(pooled) [%lld, %lld], the forward "
                        "outputs' shapes",
                        (long long)B, (long long)L5, (long long)D, (long long)B, (long long)P);
    /* CLIP-L reaches the transformer only through the pooled vector */
    bool ok = !drows_l || !dpooled || clip_text_backward_pooled(l, be, arena, &a->l, NULL, dpooled, drows_l, error);
    return ok && t5_context_backward(t5, be, arena, &a->t5, dcontext, drows_t5, MODULE, error);
}
