/* dit_blocks.c - the diffusion transformers' shared block code; see dit_blocks.h. */
#include "dit_blocks.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "c_numeric.h"
#include "model_util.h"

#define MODULE "dit"
#define LN_EPS DIT_LN_EPS
#define TRY(call) MU_TRY(be, error, MODULE, call)

bool dit_emit_linear(sdt_param_visitor v, void *u, int64_t out, int64_t in, const char *prefix, const char *fmt, ...)
{
    char name[200];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int64_t ws[2] = {out, in}, bs[1] = {out};
    return mu_emit(v, u, SDT_INIT_NORMAL, 1.0f / sqrtf((float)in), 2, ws, "%s%s.weight", prefix, name) &&
           mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, bs, "%s%s.bias", prefix, name);
}

/* Row r of a [rows, n] tensor as a 1-D [n] vector. */
sdt_tensor dit_vec_row(const sdt_tensor *t2, int64_t r)
{
    sdt_tensor v = mu_rows(t2, r, 1);
    int64_t n[1] = {v.shape[1]};
    return mu_reshape(&v, 1, n);
}

/* Chunk j of batch b of a modulation [B, k*H] (k chunks): a [H] vector. */
sdt_tensor dit_chunk(const sdt_tensor *mod, int64_t H, int b, int j)
{
    const int64_t k = mod->shape[1] / H;
    sdt_tensor m2 = mu_reshape2(mod, mod->shape[0] * k, H);
    return dit_vec_row(&m2, (int64_t)b * k + j);
}

/* Tokens of batch b of a [B, n, C] tensor: [n, C]. */
sdt_tensor dit_batch_rows(const sdt_tensor *t, int b)
{
    sdt_tensor t2 = mu_reshape2(t, t->shape[0] * t->shape[1], t->shape[2]);
    return mu_rows(&t2, (int64_t)b * t->shape[1], t->shape[1]);
}

/* Tokens [off, off + n) of batch b of a joint [B, S, C] tensor: [n, C]. */
sdt_tensor dit_joint_rows(const sdt_tensor *t, int b, int64_t off, int64_t n)
{
    sdt_tensor t2 = mu_reshape2(t, t->shape[0] * t->shape[1], t->shape[2]);
    return mu_rows(&t2, (int64_t)b * t->shape[1] + off, n);
}

/* gamma[b] = 1 + dit_chunk(mod, scale_j)[b] for every b. */
bool dit_make_gamma(sdt_backend *be, sdt_tensor *gamma, const sdt_tensor *mod, int64_t H, int j,
                    const sdt_tensor *ones_h, sdt_error *error)
{
    for (int b = 0; b < gamma->shape[0]; b++) {
        sdt_tensor g = dit_vec_row(gamma, b), s = dit_chunk(mod, H, b, j);
        TRY(be->add_forward(be, &g, &s, ones_h));
    }
    return true;
}

/* out = LN(x) * gamma[b] + shift[b] per batch element (LayerNorm without affine, then the modulation). */
bool dit_modulated_ln(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                      const sdt_tensor *gamma, const sdt_tensor *mod, int shift_j, sdt_error *error)
{
    const int64_t n = x->shape[1], H = x->shape[2];
    for (int b = 0; b < x->shape[0]; b++) {
        sdt_tensor xb = dit_batch_rows(x, b), ob = dit_batch_rows(out, b), mb = mu_rows(mean, (int64_t)b * n, n),
                   rb = mu_rows(rstd, (int64_t)b * n, n), g = dit_vec_row(gamma, b), s = dit_chunk(mod, H, b, shift_j);
        TRY(be->layernorm_forward(be, &ob, &mb, &rb, &xb, &g, &s, LN_EPS));
    }
    return true;
}

/* Backward of modulated_ln: dx += ..., d(scale chunk) and d(shift chunk) of dmod +=. dgam [1, H] scratch. */
bool dit_modulated_ln_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dmod, sdt_tensor *dgam,
                               const sdt_tensor *dn, const sdt_tensor *x, const sdt_tensor *gamma,
                               const sdt_tensor *mean, const sdt_tensor *rstd, int scale_j, int shift_j,
                               sdt_error *error)
{
    const int64_t n = x->shape[1], H = x->shape[2];
    sdt_tensor dg = dit_vec_row(dgam, 0);
    for (int b = 0; b < x->shape[0]; b++) {
        sdt_tensor xb = dit_batch_rows(x, b), dxb = dit_batch_rows(dx, b), dnb = dit_batch_rows(dn, b),
                   mb = mu_rows(mean, (int64_t)b * n, n), rb = mu_rows(rstd, (int64_t)b * n, n),
                   g = dit_vec_row(gamma, b), dscale = dit_chunk(dmod, H, b, scale_j),
                   dshift = dit_chunk(dmod, H, b, shift_j);
        TRY(be->zero(be, &dg));
        TRY(be->layernorm_backward(be, &dxb, &dg, &dshift, &dnb, &xb, &g, &mb, &rb));
        TRY(be->axpy(be, &dscale, 1.0f, &dg));
    }
    return true;
}

/* The gate of batch b broadcast over n tokens: bc [n, H] = ones [n, 1] gate^T. */
bool dit_broadcast_gate(sdt_backend *be, sdt_tensor *bc, const sdt_tensor *ones, const sdt_tensor *gate,
                        sdt_error *error)
{
    const int64_t n = bc->shape[0], H = bc->shape[1];
    sdt_tensor o = mu_rows(ones, 0, n), g = mu_reshape2(gate, H, 1);
    TRY(be->linear_forward(be, bc, &o, &g, NULL));
    return true;
}

/* out = x + gate[b] * y per batch element; tmp [>= n, H] scratch. */
bool dit_gated_residual(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *y,
                        const sdt_tensor *mod, int gate_j, const sdt_tensor *ones, sdt_tensor *tmp, sdt_error *error)
{
    const int64_t n = x->shape[1], H = x->shape[2];
    sdt_tensor bc = mu_rows(tmp, 0, n);
    for (int b = 0; b < x->shape[0]; b++) {
        sdt_tensor xb = dit_batch_rows(x, b), yb = dit_batch_rows(y, b), ob = dit_batch_rows(out, b),
                   g = dit_chunk(mod, H, b, gate_j);
        if (!dit_broadcast_gate(be, &bc, ones, &g, error)) return false;
        TRY(be->gated_activation_forward(be, &ob, &bc, &yb, SDT_ACT_IDENTITY));
        TRY(be->add_forward(be, &ob, &ob, &xb));
    }
    return true;
}

/* Backward of gated_residual for d(out) = dx (which passes to x unchanged): dy written, d gate into dmod. */
bool dit_gated_residual_backward(sdt_backend *be, sdt_tensor *dy, sdt_tensor *dmod, const sdt_tensor *dx,
                                 const sdt_tensor *y, const sdt_tensor *mod, int gate_j, const sdt_tensor *ones,
                                 sdt_tensor *tmp, sdt_tensor *tmp2, sdt_error *error)
{
    const int64_t n = y->shape[1], H = y->shape[2];
    sdt_tensor bc = mu_rows(tmp, 0, n), dbc = mu_rows(tmp2, 0, n), o = mu_rows(ones, 0, n);
    for (int b = 0; b < y->shape[0]; b++) {
        sdt_tensor yb = dit_batch_rows(y, b), dyb = dit_batch_rows(dy, b), dxb = dit_batch_rows(dx, b),
                   g = dit_chunk(mod, H, b, gate_j), dg = dit_chunk(dmod, H, b, gate_j);
        sdt_tensor g2 = mu_reshape2(&g, H, 1), dg2 = mu_reshape2(&dg, H, 1);
        if (!dit_broadcast_gate(be, &bc, ones, &g, error)) return false;
        TRY(be->gated_activation_backward(be, &dbc, &dyb, &dxb, &bc, &yb, SDT_ACT_IDENTITY));
        TRY(be->linear_backward(be, NULL, &dg2, NULL, &dbc, &o, &g2));
    }
    return true;
}

void dit_stream_alloc(dit_stream_acts *s, const dit_dims *c, sdt_arena *ar, int64_t B, int64_t n, bool pre_only,
                      bool dual, sdt_dtype dt)
{
    /* dt: what the stream carries (the modulation and 1 + scale too, as the UNet's time embedding); the norm
     * statistics and the attention's logsumexp are f32 (ops.h) */
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    s->mod = mu_alloc(ar, dt, 2, B, (pre_only ? 2 : dual ? 9 : 6) * H, 0, 0);
    s->gamma1 = mu_alloc(ar, dt, 2, B, H, 0, 0);
    s->mean1 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    s->rstd1 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    s->q = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->k = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->v = mu_alloc(ar, dt, 3, B, n, H, 0);
    if (c->qk_norm) {
        s->rstd_q = mu_alloc(ar, SDT_F32, 1, B * n * c->heads, 0, 0, 0);
        s->rstd_k = mu_alloc(ar, SDT_F32, 1, B * n * c->heads, 0, 0, 0);
    }
    if (pre_only) return;
    s->gamma2 = mu_alloc(ar, dt, 2, B, H, 0, 0);
    s->mean2 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    s->rstd2 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    s->y_attn = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->x_mid = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->h1 = mu_alloc(ar, dt, 3, B, n, F, 0);
    s->y_ff = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->x_out = mu_alloc(ar, dt, 3, B, n, H, 0);
    if (!dual) return;
    s->gamma3 = mu_alloc(ar, dt, 2, B, H, 0, 0);
    s->mean3 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    s->rstd3 = mu_alloc(ar, SDT_F32, 1, B * n, 0, 0, 0);
    sdt_tensor *bnh[] = {&s->q2, &s->k2, &s->v2, &s->Q2, &s->K2, &s->O2, &s->y_attn2, &s->x_mid1};
    for (size_t i = 0; i < sizeof bnh / sizeof bnh[0]; i++) *bnh[i] = mu_alloc(ar, dt, 3, B, n, H, 0);
    s->lse2 = mu_alloc(ar, SDT_F32, 3, B, c->heads, n, 0);
    if (c->qk_norm) {
        s->rstd_q2 = mu_alloc(ar, SDT_F32, 1, B * n * c->heads, 0, 0, 0);
        s->rstd_k2 = mu_alloc(ar, SDT_F32, 1, B * n * c->heads, 0, 0, 0);
    }
}

dit_stream_acts dit_stream_work(const dit_stream_acts *work, int chunks, int64_t H)
{
    dit_stream_acts s = *work;
    s.mod.shape[1] = chunks * H; /* the first B * chunks * H values: a contiguous [B, chunks * H] */
    return s;
}

/* The head-split view [tokens * heads, head_dim] of a [..., H] tensor. */
sdt_tensor dit_heads_view(const sdt_tensor *t, int head_dim)
{
    return mu_reshape2(t, sdt_tensor_numel(t) / head_dim, head_dim);
}

/* q, k, v of one stream into the joint tensors at token offset off (per-head RMS norm on q and k). */
bool dit_stream_qkv_forward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, dit_stream_acts *s,
                            sdt_tensor *joint, int64_t off, sdt_error *error)
{
    const int64_t n = s->q.shape[1];
    for (int b = 0; b < s->q.shape[0]; b++) {
        sdt_tensor qb = dit_batch_rows(&s->q, b), kb = dit_batch_rows(&s->k, b), vb = dit_batch_rows(&s->v, b);
        sdt_tensor Qb = dit_joint_rows(&joint[JQ], b, off, n), Kb = dit_joint_rows(&joint[JK], b, off, n),
                   Vb = dit_joint_rows(&joint[JV], b, off, n);
        if (c->qk_norm) {
            const int64_t rows = n * c->heads;
            sdt_tensor Qh = dit_heads_view(&Qb, c->head_dim), qh = dit_heads_view(&qb, c->head_dim),
                       Kh = dit_heads_view(&Kb, c->head_dim), kh = dit_heads_view(&kb, c->head_dim),
                       rq = mu_rows(&s->rstd_q, b * rows, rows), rk = mu_rows(&s->rstd_k, b * rows, rows);
            TRY(be->rmsnorm_forward(be, &Qh, &rq, &qh, &W->norm_q, LN_EPS));
            TRY(be->rmsnorm_forward(be, &Kh, &rk, &kh, &W->norm_k, LN_EPS));
        } else {
            TRY(be->convert(be, &Qb, &qb));
            TRY(be->convert(be, &Kb, &kb));
        }
        TRY(be->convert(be, &Vb, &vb));
    }
    return true;
}

/* The part before the joint attention: modulation, modulated LN, q/k/v. */
bool dit_stream_pre(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                    dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, const sdt_tensor *ones_h,
                    sdt_tensor *joint, int64_t off, bool pre_only, sdt_error *error)
{
    const int64_t H = (int64_t)c->heads * c->head_dim;
    TRY(be->linear_forward(be, &s->mod, &a->silu_temb, &W->mod.w, &W->mod.b));
    if (!dit_make_gamma(be, &s->gamma1, &s->mod, H, pre_only ? 0 : 1, ones_h, error) ||
        !dit_modulated_ln(be, nbuf, &s->mean1, &s->rstd1, x_in, &s->gamma1, &s->mod, pre_only ? 1 : 0, error))
        return false;
    TRY(be->linear_forward(be, &s->q, nbuf, &W->q.w, &W->q.b));
    TRY(be->linear_forward(be, &s->k, nbuf, &W->k.w, &W->k.b));
    TRY(be->linear_forward(be, &s->v, nbuf, &W->v.w, &W->v.b));
    return dit_stream_qkv_forward(W, c, be, s, joint, off, error);
}

/* MMDiT-X: x_mid = x_mid1 + gate2 * attn2(LN(x_in)(1 + scale2) + shift2), self-attention over the image. */
bool dit_attn2_forward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                       dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, dit_fwd_tmp *t, sdt_error *error)
{
    const int64_t H = (int64_t)c->heads * c->head_dim;
    if (!dit_make_gamma(be, &s->gamma3, &s->mod, H, 7, &t->ones_h, error) ||
        !dit_modulated_ln(be, nbuf, &s->mean3, &s->rstd3, x_in, &s->gamma3, &s->mod, 6, error))
        return false;
    TRY(be->linear_forward(be, &s->q2, nbuf, &W->q2.w, &W->q2.b));
    TRY(be->linear_forward(be, &s->k2, nbuf, &W->k2.w, &W->k2.b));
    TRY(be->linear_forward(be, &s->v2, nbuf, &W->v2.w, &W->v2.b));
    if (c->qk_norm) {
        sdt_tensor Qh = dit_heads_view(&s->Q2, c->head_dim), qh = dit_heads_view(&s->q2, c->head_dim),
                   Kh = dit_heads_view(&s->K2, c->head_dim), kh = dit_heads_view(&s->k2, c->head_dim);
        TRY(be->rmsnorm_forward(be, &Qh, &s->rstd_q2, &qh, &W->norm_q2, LN_EPS));
        TRY(be->rmsnorm_forward(be, &Kh, &s->rstd_k2, &kh, &W->norm_k2, LN_EPS));
    } else {
        TRY(be->convert(be, &s->Q2, &s->q2));
        TRY(be->convert(be, &s->K2, &s->k2));
    }
    TRY(be->attention_forward(be, &s->O2, &s->lse2, &s->Q2, &s->K2, &s->v2, c->heads, false));
    TRY(be->linear_forward(be, &s->y_attn2, &s->O2, &W->out2.w, &W->out2.b));
    return dit_gated_residual(be, &s->x_mid, &s->x_mid1, &s->y_attn2, &s->mod, 8, &a->ones, &t->tmp, error);
}

/* The part after it: output projection, gated residual, modulated LN, MLP, gated residual. */
bool dit_stream_post(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                     dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, sdt_tensor *abuf, dit_fwd_tmp *t,
                     const sdt_tensor *joint, int64_t off, sdt_error *error)
{
    const int64_t H = (int64_t)c->heads * c->head_dim, n = x_in->shape[1];
    for (int b = 0; b < x_in->shape[0]; b++) {
        sdt_tensor Ob = dit_joint_rows(&joint[JO], b, off, n), yb = dit_batch_rows(&s->y_attn, b);
        TRY(be->linear_forward(be, &yb, &Ob, &W->out.w, &W->out.b));
    }
    if (!dit_gated_residual(be, W->dual ? &s->x_mid1 : &s->x_mid, x_in, &s->y_attn, &s->mod, 2, &a->ones, &t->tmp,
                            error))
        return false;
    if (W->dual && !dit_attn2_forward(W, c, be, a, s, x_in, nbuf, t, error)) return false;
    if (!dit_make_gamma(be, &s->gamma2, &s->mod, H, 4, &t->ones_h, error) ||
        !dit_modulated_ln(be, nbuf, &s->mean2, &s->rstd2, &s->x_mid, &s->gamma2, &s->mod, 3, error))
        return false;
    TRY(be->linear_forward(be, &s->h1, nbuf, &W->ff1.w, &W->ff1.b));
    TRY(be->activation_forward(be, abuf, &s->h1, SDT_ACT_GELU_TANH));
    TRY(be->linear_forward(be, &s->y_ff, abuf, &W->ff2.w, &W->ff2.b));
    return dit_gated_residual(be, &s->x_out, &s->x_mid, &s->y_ff, &s->mod, 5, &a->ones, &t->tmp, error);
}

bool dit_upload_f32(sdt_backend *be, sdt_tensor *t, const float *host, sdt_error *error)
{
    if (t->dtype == SDT_F32) {
        TRY(be->upload(be, t->data, host, sdt_tensor_nbytes(t)));
        return true;
    }
    void *tmp = malloc(sdt_tensor_nbytes(t));
    if (!tmp) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory", MODULE);
    sdt_store_f32(host, tmp, t->dtype, sdt_tensor_numel(t));
    const int rc = be->upload(be, t->data, tmp, sdt_tensor_nbytes(t));
    free(tmp);
    TRY(rc);
    return true;
}

void dit_bwd_scratch_streams(dit_bwd_scratch *s, sdt_arena *arena, sdt_dtype dt, int64_t B, int64_t N, int64_t T,
                             int64_t H, int64_t F)
{
    const int64_t n[2] = {N, T};
    for (int st = 0; st < 2; st++) {
        s->dX[st] = mu_alloc(arena, SDT_F32, 3, B, n[st], H, 0);
        s->dy[st] = mu_alloc(arena, dt, 3, B, n[st], H, 0);
        s->da[st] = mu_alloc(arena, dt, 3, B, n[st], F, 0);
        s->dh[st] = mu_alloc(arena, dt, 3, B, n[st], F, 0);
        s->dn[st] = mu_alloc(arena, dt, 3, B, n[st], H, 0);
        s->dq[st] = mu_alloc(arena, dt, 3, B, n[st], H, 0);
        s->dk[st] = mu_alloc(arena, dt, 3, B, n[st], H, 0);
        s->dv[st] = mu_alloc(arena, dt, 3, B, n[st], H, 0);
    }
    for (int j = 0; j < 4; j++) s->dJ[j] = mu_alloc(arena, dt, 3, B, N + T, H, 0);
}

sdt_tensor dit_dmod_view(const dit_bwd_scratch *s, int64_t B, int k, int64_t H)
{
    sdt_tensor r = mu_rows(&s->dmod_flat, 0, B * k * H);
    return mu_reshape2(&r, B, k * H);
}

/* MMDiT-X, backward: d(y_attn2) in d2[0] to d(x_in) (dX +=) and the attn2 modulation chunks. */
bool dit_attn2_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_stream_acts *s,
                        const sdt_tensor *x_in, dit_bwd_scratch *S, sdt_tensor *dmod, sdt_error *error)
{
    sdt_tensor *dy2 = &S->d2[0], *dQ2 = &S->d2[1], *dK2 = &S->d2[2], *dV2 = &S->d2[3], *dO2 = &S->d2[4];
    TRY(be->linear_input_grad(be, dO2, dy2, &W->out2.w));
    TRY(be->attention_backward(be, dQ2, dK2, dV2, dO2, &s->Q2, &s->K2, &s->v2, &s->O2, &s->lse2, c->heads, false));
    sdt_tensor *dq = &S->dq[0], *dk = &S->dk[0], *dn = &S->dn[0];
    if (c->qk_norm) {
        sdt_tensor dqh = dit_heads_view(dq, c->head_dim), dQh = dit_heads_view(dQ2, c->head_dim),
                   qh = dit_heads_view(&s->q2, c->head_dim), dkh = dit_heads_view(dk, c->head_dim),
                   dKh = dit_heads_view(dK2, c->head_dim), kh = dit_heads_view(&s->k2, c->head_dim);
        TRY(be->zero(be, dq));
        TRY(be->zero(be, dk));
        TRY(be->rmsnorm_backward(be, &dqh, NULL, &dQh, &qh, &W->norm_q2, &s->rstd_q2));
        TRY(be->rmsnorm_backward(be, &dkh, NULL, &dKh, &kh, &W->norm_k2, &s->rstd_k2));
    } else {
        dq = dQ2, dk = dK2;
    }
    TRY(be->linear_input_grad(be, dn, dq, &W->q2.w));
    TRY(be->linear_backward(be, dn, NULL, NULL, dk, dn, &W->k2.w));
    TRY(be->linear_backward(be, dn, NULL, NULL, dV2, dn, &W->v2.w));
    return dit_modulated_ln_backward(be, &S->dX[0], dmod, &S->dgam, dn, x_in, &s->gamma3, &s->mean3, &s->rstd3, 7, 6,
                                     error);
}

/* Steps after the attention, backward: from d(x_out) in dX to d(x_mid) in dX, then d(attention output) into
 * the joint dO (and, in an MMDiT-X block, attn2's whole backward, whose input gradient joins dX). */
bool dit_stream_post_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                              const dit_stream_acts *s, const sdt_tensor *x_in, dit_bwd_scratch *S, int st,
                              sdt_tensor *dmod, int64_t off, sdt_error *error)
{
    const int64_t n = s->x_mid.shape[1];
    if (!dit_gated_residual_backward(be, &S->dy[st], dmod, &S->dX[st], &s->y_ff, &s->mod, 5, &a->ones, &S->tmp,
                                     &S->tmp2, error))
        return false;
    TRY(be->linear_input_grad(be, &S->da[st], &S->dy[st], &W->ff2.w));
    TRY(be->zero(be, &S->dh[st]));
    TRY(be->activation_backward(be, &S->dh[st], &S->da[st], &s->h1, SDT_ACT_GELU_TANH));
    TRY(be->linear_input_grad(be, &S->dn[st], &S->dh[st], &W->ff1.w));
    if (!dit_modulated_ln_backward(be, &S->dX[st], dmod, &S->dgam, &S->dn[st], &s->x_mid, &s->gamma2, &s->mean2,
                                   &s->rstd2, 4, 3, error))
        return false;
    /* dX is d(x_mid); through attn2's gated residual it is d(x_mid1) as well */
    if (W->dual && !dit_gated_residual_backward(be, &S->d2[0], dmod, &S->dX[st], &s->y_attn2, &s->mod, 8, &a->ones,
                                                &S->tmp, &S->tmp2, error))
        return false;
    if (!dit_gated_residual_backward(be, &S->dy[st], dmod, &S->dX[st], &s->y_attn, &s->mod, 2, &a->ones, &S->tmp,
                                     &S->tmp2, error))
        return false;
    for (int b = 0; b < a->batch; b++) {
        sdt_tensor dOb = dit_joint_rows(&S->dJ[JO], b, off, n), dyb = dit_batch_rows(&S->dy[st], b);
        TRY(be->linear_input_grad(be, &dOb, &dyb, &W->out.w));
    }
    return !W->dual || dit_attn2_backward(W, c, be, s, x_in, S, dmod, error);
}

/* Steps before the attention, backward: joint dQ/dK/dV to the stream's input gradient (dX +=) and the
 * modulation's, on into d(silu(temb)). */
bool dit_stream_pre_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                             const dit_stream_acts *s, const sdt_tensor *x_in, dit_bwd_scratch *S, int st,
                             bool pre_only, int64_t off, sdt_error *error)
{
    const int64_t n = s->q.shape[1], H = (int64_t)c->heads * c->head_dim, B = a->batch;
    sdt_tensor dmod = dit_dmod_view(S, B, pre_only ? 2 : W->dual ? 9 : 6, H);
    if (c->qk_norm) {
        TRY(be->zero(be, &S->dq[st]));
        TRY(be->zero(be, &S->dk[st]));
    }
    for (int b = 0; b < B; b++) {
        sdt_tensor dQb = dit_joint_rows(&S->dJ[JQ], b, off, n), dKb = dit_joint_rows(&S->dJ[JK], b, off, n),
                   dVb = dit_joint_rows(&S->dJ[JV], b, off, n);
        sdt_tensor dqb = dit_batch_rows(&S->dq[st], b), dkb = dit_batch_rows(&S->dk[st], b),
                   dvb = dit_batch_rows(&S->dv[st], b);
        if (c->qk_norm) {
            const int64_t rows = n * c->heads;
            sdt_tensor qb = dit_batch_rows(&s->q, b), kb = dit_batch_rows(&s->k, b);
            sdt_tensor dqh = dit_heads_view(&dqb, c->head_dim), dQh = dit_heads_view(&dQb, c->head_dim),
                       qh = dit_heads_view(&qb, c->head_dim), dkh = dit_heads_view(&dkb, c->head_dim),
                       dKh = dit_heads_view(&dKb, c->head_dim), kh = dit_heads_view(&kb, c->head_dim),
                       rq = mu_rows(&s->rstd_q, b * rows, rows), rk = mu_rows(&s->rstd_k, b * rows, rows);
            TRY(be->rmsnorm_backward(be, &dqh, NULL, &dQh, &qh, &W->norm_q, &rq));
            TRY(be->rmsnorm_backward(be, &dkh, NULL, &dKh, &kh, &W->norm_k, &rk));
        } else {
            TRY(be->convert(be, &dqb, &dQb));
            TRY(be->convert(be, &dkb, &dKb));
        }
        TRY(be->convert(be, &dvb, &dVb));
    }
    TRY(be->linear_input_grad(be, &S->dn[st], &S->dq[st], &W->q.w));
    TRY(be->linear_backward(be, &S->dn[st], NULL, NULL, &S->dk[st], &S->dn[st], &W->k.w));
    TRY(be->linear_backward(be, &S->dn[st], NULL, NULL, &S->dv[st], &S->dn[st], &W->v.w));
    if (!dit_modulated_ln_backward(be, &S->dX[st], &dmod, &S->dgam, &S->dn[st], x_in, &s->gamma1, &s->mean1, &s->rstd1,
                                   pre_only ? 0 : 1, pre_only ? 1 : 0, error))
        return false;
    TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod, &a->silu_temb, &W->mod.w));
    return true;
}