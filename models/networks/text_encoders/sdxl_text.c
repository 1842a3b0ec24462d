/* sdxl_text.c - SDXL's context and pooled embedding from its two encoders; see sdxl_text.h. */
#include "sdxl_text.h"

#include <stdlib.h>

#include "model_util.h"

#define MODULE "sdxl_text"

static bool check_inputs(const clip_text_model *l, const clip_text_model *g, const sdt_sdxl_text_inputs *in,
                         sdt_error *error)
{
    if (l->cfg.projection_dim != 0 || g->cfg.projection_dim <= 0)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sdxl_text: the encoders must be SDXL's CLIP-L (no projection) and "
                        "bigG (with its text_projection), in that order");
    const sdt_tensor *tl = in->tokens_l, *tg = in->tokens_g;
    if (!tl || !tg || in->chunks < 1 || tl->ndim != 2 || !sdt_tensor_same_shape(tl, tg) || tl->shape[0] % in->chunks)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sdxl_text: both encoders' tokens must be [prompts x %d chunks, 77] "
                        "with the same shape (the same chunks, padded for each encoder)",
                        in->chunks);
    if (in->n_overrides > 0 && (!in->rows_l || !in->rows_g || in->rows_l->ndim != 2 || in->rows_g->ndim != 2 ||
                                in->rows_l->shape[0] != in->rows_g->shape[0]))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sdxl_text: an SDXL embedding needs the same number of rows for both "
                        "encoders (clip_l [n, %d] and clip_g [n, %d])",
                        l->cfg.width, g->cfg.width);
    return true;
}

static clip_text_inputs encoder_inputs(const sdt_sdxl_text_inputs *in, const sdt_tensor *tokens, const sdt_tensor *rows)
{
    clip_text_inputs e = {.tokens = tokens,
                          .rows = in->n_overrides > 0 ? rows : NULL,
                          .overrides = in->overrides,
                          .n_overrides = in->n_overrides,
                          .clip_skip = 0,
                          .act_dtype = in->act_dtype,
                          .anomaly_check = in->anomaly_check};
    return e;
}

bool sdt_sdxl_text_forward(const clip_text_model *l, const clip_text_model *g, sdt_backend *be, sdt_arena *arena,
                           const sdt_sdxl_text_inputs *in, sdt_sdxl_text_acts *a, sdt_error *error)
{
    if (!check_inputs(l, g, in, error)) return false;
    int64_t K = in->chunks, N = in->tokens_l->shape[0], B = N / K, T = in->tokens_l->shape[1];
    int64_t Cl = l->cfg.width, Cg = g->cfg.width, P = g->cfg.projection_dim;
    a->batch = (int)B;
    a->chunks = (int)K;
    clip_text_inputs il = encoder_inputs(in, in->tokens_l, in->rows_l),
                     ig = encoder_inputs(in, in->tokens_g, in->rows_g);
    if (!clip_text_forward(l, be, arena, &il, &a->l, error) || !clip_text_forward(g, be, arena, &ig, &a->g, error))
        return false;
    a->first_chunk = mu_alloc(arena, SDT_I32, 2, B, 1, 0, 0);
    a->context = mu_alloc(arena, in->act_dtype, 3, B, K * T, Cl + Cg, 0);
    a->pooled = mu_alloc(arena, in->act_dtype, 2, B, P, 0, 0);
    if (arena->measuring) return true;
    if (!sdt_arena_fits(arena))
        return sdt_fail(error, arena->error.code, "sdxl_text, the conditioning: %s", arena->error.message);

    int32_t *first = malloc((size_t)B * sizeof(int32_t));
    if (!first) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "sdxl_text: out of memory");
    for (int64_t b = 0; b < B; b++) first[b] = (int32_t)(b * K);
    int rc = be->upload(be, a->first_chunk.data, first, (size_t)B * sizeof(int32_t));
    free(first);
    MU_TRY(be, error, MODULE, rc);
    sdt_tensor ctx2 = mu_reshape2(&a->context, N * T, Cl + Cg);
    sdt_tensor l2 = mu_reshape2(&a->l.out, N * T, Cl), g2 = mu_reshape2(&a->g.out, N * T, Cg);
    MU_TRY(be, error, MODULE, be->concat_channels_forward(be, &ctx2, &l2, &g2));
    sdt_tensor pooled3 = mu_reshape3(&a->pooled, B, 1, P);
    MU_TRY(be, error, MODULE, be->embedding_forward(be, &pooled3, &a->first_chunk, &a->g.pooled, NULL));
    return true;
}

bool sdt_sdxl_text_backward(const clip_text_model *l, const clip_text_model *g, sdt_backend *be, sdt_arena *arena,
                            const sdt_sdxl_text_acts *a, const sdt_tensor *dcontext, const sdt_tensor *dpooled,
                            sdt_tensor *drows_l, sdt_tensor *drows_g, sdt_error *error)
{
    int64_t B = a->batch, K = a->chunks, N = B * K, T = a->l.seq;
    int64_t Cl = l->cfg.width, Cg = g->cfg.width, P = g->cfg.projection_dim;
    if ((dcontext && (dcontext->ndim != 3 || dcontext->shape[0] != B || dcontext->shape[1] != K * T ||
                      dcontext->shape[2] != Cl + Cg)) ||
        (dpooled && (dpooled->ndim != 2 || dpooled->shape[0] != B || dpooled->shape[1] != P)))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sdxl_text: d(context) must be [%lld, %lld, %lld] and d(pooled) "
                        "[%lld, %lld], the forward outputs' shapes",
                        (long long)B, (long long)(K * T), (long long)(Cl + Cg), (long long)B, (long long)P);
    if (a->l.n_overrides == 0) return true; /* nothing trainable upstream */
    size_t mark = sdt_arena_mark(arena);
    sdt_dtype dt = a->l.act_dtype;
    sdt_tensor dl = mu_alloc(arena, dt, 3, N, T, Cl, 0), dg = mu_alloc(arena, dt, 3, N, T, Cg, 0);
    sdt_tensor dpooled_all = mu_alloc(arena, SDT_F32, 2, N, P, 0, 0); /* f32: embedding_backward's table gradient */
    bool ok = true;
    if (!arena->measuring) {
        if (!sdt_arena_fits(arena)) {
            ok = sdt_fail(error, arena->error.code, "sdxl_text, the conditioning's backward: %s", arena->error.message);
            goto done;
        }
        sdt_tensor dl2 = mu_reshape2(&dl, N * T, Cl), dg2 = mu_reshape2(&dg, N * T, Cg);
        ok = be->zero(be, &dl) == 0 && be->zero(be, &dg) == 0 && be->zero(be, &dpooled_all) == 0;
        if (ok && dcontext) {
            sdt_tensor dc2 = mu_reshape2(dcontext, N * T, Cl + Cg);
            ok = be->concat_channels_backward(be, &dl2, &dg2, &dc2) == 0;
        }
        if (ok && dpooled) { /* only each prompt's first chunk reaches y */
            sdt_tensor dp3 = mu_reshape3(dpooled, B, 1, P);
            ok = be->embedding_backward(be, &dpooled_all, NULL, &dp3, &a->first_chunk) == 0;
        }
        if (!ok) {
            sdt_fail(error, be->error.code, "sdxl_text: the %s backend failed: %s", be->name, be->error.message);
            goto done;
        }
    }
    ok = clip_text_backward_pooled(l, be, arena, &a->l, dcontext ? &dl : NULL, NULL, drows_l, error) &&
         clip_text_backward_pooled(g, be, arena, &a->g, dcontext ? &dg : NULL, dpooled ? &dpooled_all : NULL, drows_g,
                                   error);
done:
    sdt_arena_rewind(arena, mark);
    return ok;
}
