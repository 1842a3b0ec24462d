/* sd3_text.c - SD3's context and pooled vector from CLIP-L, bigG and T5; see sd3_text.h. */
#include "sd3_text.h"

#include "model_util.h"

#define MODULE "sd3_text"

static bool check_inputs(const clip_text_model *l, const clip_text_model *g, const t5_encoder *t5,
                         const sdt_sd3_text_inputs *in, int *width, sdt_error *error)
{
    if (l->cfg.projection_dim <= 0 || g->cfg.projection_dim <= 0)
        return sdt_fail(
            error, SDT_ERR_INVALID_ARGUMENT,
            "sd3_text: SD3's CLIP-L and bigG both need their text_projection (CLIPTextModelWithProjection); "
            "use a complete SD3 checkpoint");
    const sdt_tensor *tl = in->tokens_l, *tg = in->tokens_g;
    if (!tl || !tg || tl->ndim != 2 || !sdt_tensor_same_shape(tl, tg) || tl->shape[1] != SD3_CLIP_TOKENS)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_text: both CLIP encoders' tokens must be [prompts, %d] with the same shape (one "
                        "sequence each, padded for each encoder)",
                        SD3_CLIP_TOKENS);
    if (in->n_overrides > 0 && (!in->rows_l || !in->rows_g || in->rows_l->ndim != 2 || in->rows_g->ndim != 2 ||
                                in->rows_l->shape[0] != in->rows_g->shape[0]))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_text: an SD3 embedding needs the same number of rows for both CLIP encoders "
                        "(clip_l [n, %d] and clip_g [n, %d])",
                        l->cfg.width, g->cfg.width);
    int t5_width = t5 ? t5->cfg.d_model : in->t5.hidden ? (int)in->t5.hidden->shape[2] : 0;
    *width = in->joint_dim > 0 ? in->joint_dim : t5_width;
    int clip_width = l->cfg.width + g->cfg.width;
    if (*width < clip_width || (t5_width > 0 && t5_width != *width))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_text: the context is %d wide (the transformer's joint_attention_dim), T5 gives %d and "
                        "CLIP-L + bigG %d: T5's width must be the context's and CLIP's at most that (SD3: 4096, "
                        "4096, 2048); without T5 give joint_dim",
                        *width, t5_width, clip_width);
    return true;
}

static clip_text_inputs encoder_inputs(const sdt_sd3_text_inputs *in, const sdt_tensor *tokens, const sdt_tensor *rows)
{
    clip_text_inputs e = {.tokens = tokens,
                          .rows = in->n_overrides > 0 ? rows : NULL,
                          .overrides = in->overrides,
                          .n_overrides = in->n_overrides,
                          .clip_skip = in->clip_skip,
                          .act_dtype = in->act_dtype,
                          .anomaly_check = in->anomaly_check};
    return e;
}

bool sdt_sd3_text_forward(const clip_text_model *l, const clip_text_model *g, const t5_encoder *t5, sdt_backend *be,
                          sdt_arena *arena, const sdt_sd3_text_inputs *in, sdt_sd3_text_acts *a, sdt_error *error)
{
    int D = 0;
    if (!check_inputs(l, g, t5, in, &D, error)) return false;
    int64_t B = in->tokens_l->shape[0], T = SD3_CLIP_TOKENS;
    int64_t Cl = l->cfg.width, Cg = g->cfg.width, Pl = l->cfg.projection_dim, Pg = g->cfg.projection_dim;
    a->batch = (int)B;
    a->width = D;
    a->has_t5 = t5 || in->t5.hidden;
    clip_text_inputs il = encoder_inputs(in, in->tokens_l, in->rows_l),
                     ig = encoder_inputs(in, in->tokens_g, in->rows_g);
    if (!clip_text_forward(l, be, arena, &il, &a->l, error) || !clip_text_forward(g, be, arena, &ig, &a->g, error))
        return false;
    if (a->has_t5 && !t5_context_forward(t5, be, arena, &in->t5, (int)B, in->act_dtype, MODULE, &a->t5, error))
        return false;
    int64_t L5 = a->has_t5 ? a->t5.out.shape[1] : SD3_CLIP_TOKENS; /* the pipeline's zeros: 77 rows */
    a->t5_len = (int)L5;
    a->context = mu_alloc(arena, in->act_dtype, 3, B, T + L5, D, 0);
    a->pooled = mu_alloc(arena, in->act_dtype, 2, B, Pl + Pg, 0, 0);
    size_t mark = sdt_arena_mark(arena);
    int64_t pad = D - Cl - Cg;
    sdt_tensor clip_cat = mu_alloc(arena, in->act_dtype, 2, B * T, Cl + Cg, 0, 0);
    sdt_tensor zeros = pad > 0 ? mu_alloc(arena, in->act_dtype, 2, B * T, pad, 0, 0) : (sdt_tensor){0};
    sdt_tensor clip_pad = pad > 0 ? mu_alloc(arena, in->act_dtype, 2, B * T, D, 0, 0) : clip_cat;
    sdt_tensor t5_zeros = a->has_t5 ? (sdt_tensor){0} : mu_alloc(arena, in->act_dtype, 2, B, L5 * D, 0, 0);
    bool ok = true;
    if (!arena->measuring) {
        if (!sdt_arena_fits(arena)) {
            ok = sdt_fail(error, arena->error.code, "sd3_text, the conditioning: %s", arena->error.message);
            goto done;
        }
        sdt_tensor l2 = mu_reshape2(&a->l.out, B * T, Cl), g2 = mu_reshape2(&a->g.out, B * T, Cg);
        ok = be->concat_channels_forward(be, &clip_cat, &l2, &g2) == 0;
        if (ok && pad > 0) /* F.pad on the feature axis: exact zeros */
            ok = be->zero(be, &zeros) == 0 && be->concat_channels_forward(be, &clip_pad, &clip_cat, &zeros) == 0;
        /* cat on the sequence: per prompt, CLIP's 77 x D values then T5's L5 x D */
        sdt_tensor ctx2 = mu_reshape2(&a->context, B, (T + L5) * D), clip2 = mu_reshape2(&clip_pad, B, T * D);
        sdt_tensor t52 = a->has_t5 ? mu_reshape2(&a->t5.out, B, L5 * D) : t5_zeros;
        if (ok && !a->has_t5) ok = be->zero(be, &t5_zeros) == 0;
        ok = ok && be->concat_channels_forward(be, &ctx2, &clip2, &t52) == 0;
        ok = ok && be->concat_channels_forward(be, &a->pooled, &a->l.pooled, &a->g.pooled) == 0;
        if (!ok) sdt_fail(error, be->error.code, "sd3_text: the %s backend failed: %s", be->name, be->error.message);
    }
done:
    sdt_arena_rewind(arena, mark);
    return ok;
}

bool sdt_sd3_text_backward(const clip_text_model *l, const clip_text_model *g, const t5_encoder *t5, sdt_backend *be,
                           sdt_arena *arena, const sdt_sd3_text_acts *a, const sdt_tensor *dcontext,
                           const sdt_tensor *dpooled, sdt_tensor *drows_l, sdt_tensor *drows_g, sdt_tensor *drows_t5,
                           sdt_error *error)
{
    int64_t B = a->batch, T = SD3_CLIP_TOKENS, L5 = a->t5_len, D = a->width;
    int64_t Cl = l->cfg.width, Cg = g->cfg.width, Pl = l->cfg.projection_dim, Pg = g->cfg.projection_dim;
    if ((dcontext &&
         (dcontext->ndim != 3 || dcontext->shape[0] != B || dcontext->shape[1] != T + L5 || dcontext->shape[2] != D)) ||
        (dpooled && (dpooled->ndim != 2 || dpooled->shape[0] != B || dpooled->shape[1] != Pl + Pg)))
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_text: d(context) must be [%lld, %lld, %lld] and d(pooled) [%lld, %lld], the forward "
                        "outputs' shapes",
                        (long long)B, (long long)(T + L5), (long long)D, (long long)B, (long long)(Pl + Pg));
    bool clip_trains = a->l.n_overrides > 0 && (drows_l || drows_g);
    bool t5_trains = drows_t5 && a->has_t5;
    if (drows_t5 && !a->has_t5)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "sd3_text: the t5xxl rows cannot train without T5; give the T5 encoder or freeze them");
    if (!clip_trains && !t5_trains) return true; /* nothing trainable upstream */
    size_t mark = sdt_arena_mark(arena);
    sdt_dtype dt = a->l.act_dtype;
    int64_t pad = D - Cl - Cg;
    sdt_tensor d_clip_pad = mu_alloc(arena, dt, 2, B * T, D, 0, 0);
    sdt_tensor d_cat = pad > 0 ? mu_alloc(arena, dt, 2, B * T, Cl + Cg, 0, 0) : d_clip_pad;
    sdt_tensor dl = mu_alloc(arena, dt, 3, B, T, Cl, 0), dg = mu_alloc(arena, dt, 3, B, T, Cg, 0);
    sdt_tensor dpl = mu_alloc(arena, dt, 2, B, Pl, 0, 0), dpg = mu_alloc(arena, dt, 2, B, Pg, 0, 0);
    sdt_tensor d_t5 = t5_trains ? mu_alloc(arena, dt, 3, B, L5, D, 0) : (sdt_tensor){0};
    bool ok = true;
    if (!arena->measuring) {
        if (!sdt_arena_fits(arena)) {
            ok = sdt_fail(error, arena->error.code, "sd3_text, the conditioning's backward: %s", arena->error.message);
            goto done;
        }
        ok = be->zero(be, &d_clip_pad) == 0 && be->zero(be, &dl) == 0 && be->zero(be, &dg) == 0 &&
             be->zero(be, &dpl) == 0 && be->zero(be, &dpg) == 0 && (pad == 0 || be->zero(be, &d_cat) == 0) &&
             (!t5_trains || be->zero(be, &d_t5) == 0);
        if (ok && dcontext) {
            sdt_tensor dc2 = mu_reshape2(dcontext, B, (T + L5) * D), dclip2 = mu_reshape2(&d_clip_pad, B, T * D);
            sdt_tensor dt52 = mu_reshape2(&d_t5, B, L5 * D);
            ok = be->concat_channels_backward(be, clip_trains ? &dclip2 : NULL, t5_trains ? &dt52 : NULL, &dc2) == 0;
            if (ok && clip_trains && pad > 0) /* the padding's gradient goes nowhere */
                ok = be->concat_channels_backward(be, &d_cat, NULL, &d_clip_pad) == 0;
            sdt_tensor dl2 = mu_reshape2(&dl, B * T, Cl), dg2 = mu_reshape2(&dg, B * T, Cg);
            if (ok && clip_trains) ok = be->concat_channels_backward(be, &dl2, &dg2, &d_cat) == 0;
        }
        if (ok && dpooled && clip_trains) ok = be->concat_channels_backward(be, &dpl, &dpg, dpooled) == 0;
        if (!ok) {
            sdt_fail(error, be->error.code, "sd3_text: the %s backend failed: %s", be->name, be->error.message);
            goto done;
        }
    }
    const sdt_tensor *dlp = dcontext ? &dl : NULL, *dgp = dcontext ? &dg : NULL;
    const sdt_tensor *dplp = dpooled ? &dpl : NULL, *dpgp = dpooled ? &dpg : NULL;
    ok = (!clip_trains || !drows_l || clip_text_backward_pooled(l, be, arena, &a->l, dlp, dplp, drows_l, error)) &&
         (!clip_trains || !drows_g || clip_text_backward_pooled(g, be, arena, &a->g, dgp, dpgp, drows_g, error)) &&
         (!t5_trains || t5_context_backward(t5, be, arena, &a->t5, dcontext ? &d_t5 : NULL, drows_t5, MODULE, error));
done:
    sdt_arena_rewind(arena, mark);
    return ok;
}
