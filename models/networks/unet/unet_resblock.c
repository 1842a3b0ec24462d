/* unet_resblock.c - the UNet's convolutional layers: ResBlock, Down/Upsample
 * and the output head, forward and input-gradient backward. Weight gradients
 * are never formed (the UNet is frozen), so every backward op gets NULL for dw/db. */
#include "unet_internal.h"

sdt_tensor unet_conv_alloc(unet_ctx *c, const unet_conv *cv, const sdt_tensor *x)
{
    int64_t oh = (x->shape[2] + 2 * cv->pad - cv->k) / cv->stride + 1;
    int64_t ow = (x->shape[3] + 2 * cv->pad - cv->k) / cv->stride + 1;
    sdt_tensor out = unet_act(c, 4, x->shape[0], cv->out, oh, ow);
    if (cv->row_major_out) out.channels_last = false;
    return out;
}

bool unet_conv_run(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x, sdt_tensor *out)
{
    UNET_OP(c, where, c->be->conv2d_forward(c->be, out, x, cv->w, cv->b, cv->stride, cv->pad));
    return true;
}

bool unet_conv_forward(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x, sdt_tensor *out)
{
    *out = unet_conv_alloc(c, cv, x);
    return unet_conv_run(c, cv, where, x, out);
}

/* Written, not accumulated: no zeroing pass before it. */
bool unet_conv_input_grad(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x,
                          const sdt_tensor *d_out, sdt_tensor *d_x)
{
    *d_x = unet_grad_buffer(c, x);
    UNET_OP(c, where, c->be->conv2d_input_grad(c->be, d_x, d_out, cv->w, cv->stride, cv->pad));
    return true;
}

static bool conv_backward(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x,
                          const sdt_tensor *d_out, sdt_tensor *d_x)
{
    UNET_OP(c, where, c->be->conv2d_backward(c->be, d_x, NULL, NULL, d_out, x, cv->w, cv->stride, cv->pad));
    return true;
}

/* out = conv(SiLU(GroupNorm(x))). The SiLU output is a temporary: backward needs x, the saved statistics
 * and the conv input's shape only (the frozen conv's input gradient reads no input values, and the fused
 * norm's backward recomputes the normalised values from x). out is allocated here, before it. */
static bool norm_silu_conv_forward(unet_ctx *c, const unet_norm *n, const unet_conv *cv, const char *where,
                                   const sdt_tensor *x, sdt_tensor *mean, sdt_tensor *rstd, sdt_tensor *act,
                                   sdt_tensor *out)
{
    sdt_backend *be = c->be;
    *mean = unet_stat(c, x->shape[0], n->groups);
    *rstd = unet_stat(c, x->shape[0], n->groups);
    *out = unet_conv_alloc(c, cv, x);
    size_t mark = sdt_arena_mark(c->arena);
    *act = unet_act_like(c, x);
    UNET_OP(c, where, be->groupnorm_forward(be, act, mean, rstd, x, n->w, n->b, n->groups, n->eps, SDT_ACT_SILU));
    if (!unet_conv_run(c, cv, where, act, out)) return false;
    sdt_arena_rewind(c->arena, mark);
    unet_forget(act);
    return true;
}

/* d_x += the gradient of SiLU(GroupNorm(x)) for d_act. */
static bool norm_silu_backward(unet_ctx *c, const unet_norm *n, const char *where, const sdt_tensor *x,
                               const sdt_tensor *mean, const sdt_tensor *rstd, const sdt_tensor *d_act, sdt_tensor *d_x)
{
    sdt_backend *be = c->be;
    UNET_OP(c, where,
            be->groupnorm_backward(be, d_x, NULL, NULL, d_act, x, n->w, n->b, mean, rstd, n->groups, SDT_ACT_SILU));
    return true;
}

/* ---- ResBlock: skip(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + emb_layers(emb)))) ---- */

bool unet_res_forward(unet_ctx *c, unet_resblock *r, const sdt_tensor *x, sdt_tensor *out)
{
    sdt_backend *be = c->be;
    const char *where = r->name;
    if (!norm_silu_conv_forward(c, &r->norm1, &r->conv1, where, x, &r->mean1, &r->rstd1, &r->a1, &r->h)) return false;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor e = unet_act(c, 2, x->shape[0], r->out_ch, 0, 0);
    UNET_OP(c, where, be->linear_forward(be, &e, &c->emb_act, r->emb.w, r->emb.b));
    UNET_OP(c, where, be->add_channel_forward(be, &r->h, &e));
    sdt_arena_rewind(c->arena, mark);
    if (!norm_silu_conv_forward(c, &r->norm2, &r->conv2, where, &r->h, &r->mean2, &r->rstd2, &r->a2, out)) return false;
    if (!r->skip.w) {
        UNET_OP(c, where, be->add_forward(be, out, out, x));
        return true;
    }
    mark = sdt_arena_mark(c->arena);
    sdt_tensor s;
    if (!unet_conv_forward(c, &r->skip, where, x, &s)) return false;
    UNET_OP(c, where, be->add_forward(be, out, out, &s));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

bool unet_res_backward(unet_ctx *c, unet_resblock *r, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    if (!d_x && !c->d_emb_act) return true; /* only the input (and time-embedding) gradients exist here */
    sdt_backend *be = c->be;
    const char *where = r->name;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_a2, d_h, d_a1;
    if (!unet_conv_input_grad(c, &r->conv2, where, &r->a2, d_out, &d_a2)) return false;
    if (!unet_grad_like(c, &r->h, &d_h, where) ||
        !norm_silu_backward(c, &r->norm2, where, &r->h, &r->mean2, &r->rstd2, &d_a2, &d_h))
        return false;
    /* The time-embedding add reaches the context only through y (SDXL's pooled text embedding). */
    if (c->d_emb_act) {
        sdt_tensor d_e;
        if (!unet_zeroed_stat(c, d_h.shape[0], r->out_ch, &d_e, where)) return false;
        UNET_OP(c, where, be->add_channel_backward(be, &d_e, &d_h));
        UNET_OP(c, where, be->linear_backward(be, c->d_emb_act, NULL, NULL, &d_e, &c->emb_act, r->emb.w));
    }
    if (!d_x) {
        sdt_arena_rewind(c->arena, mark);
        return true;
    }
    if (!unet_conv_input_grad(c, &r->conv1, where, &r->a1, &d_h, &d_a1)) return false;
    if (!norm_silu_backward(c, &r->norm1, where, x, &r->mean1, &r->rstd1, &d_a1, d_x)) return false;
    if (r->skip.w) {
        if (!conv_backward(c, &r->skip, where, x, d_out, d_x)) return false;
    } else {
        UNET_OP(c, where, be->axpy(be, d_x, 1.0f, d_out));
    }
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- Downsample (3x3 conv, stride 2) and Upsample (nearest 2x, 3x3 conv) ---- */

bool unet_sampler_forward(unet_ctx *c, unet_sampler *s, const sdt_tensor *x, sdt_tensor *out)
{
    if (!s->up) return unet_conv_forward(c, &s->conv, s->name, x, out);
    /* the upsampled input is the frozen conv's: a temporary, a shape for backward */
    s->upx = unet_shape(c, 4, x->shape[0], x->shape[1], 2 * x->shape[2], 2 * x->shape[3]);
    *out = unet_conv_alloc(c, &s->conv, &s->upx);
    size_t mark = sdt_arena_mark(c->arena);
    s->upx = unet_act(c, 4, x->shape[0], x->shape[1], 2 * x->shape[2], 2 * x->shape[3]);
    UNET_OP(c, s->name, c->be->upsample_nearest2x_forward(c->be, &s->upx, x));
    if (!unet_conv_run(c, &s->conv, s->name, &s->upx, out)) return false;
    sdt_arena_rewind(c->arena, mark);
    unet_forget(&s->upx);
    return true;
}

bool unet_sampler_backward(unet_ctx *c, unet_sampler *s, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    if (!d_x) return true;
    if (!s->up) return conv_backward(c, &s->conv, s->name, x, d_out, d_x);
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_up;
    if (!unet_conv_input_grad(c, &s->conv, s->name, &s->upx, d_out, &d_up)) return false;
    UNET_OP(c, s->name, c->be->upsample_nearest2x_backward(c->be, d_x, &d_up));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- output head: conv_out(SiLU(GroupNorm(x))) ---- */

bool unet_head_forward(unet_ctx *c, unet_head *h, const sdt_tensor *x, sdt_tensor *out)
{
    return norm_silu_conv_forward(c, &h->norm, &h->conv, "out", x, &h->mean, &h->rstd, &h->a, out);
}

bool unet_head_backward(unet_ctx *c, unet_head *h, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    if (!d_x) return true;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_a;
    if (!unet_conv_input_grad(c, &h->conv, "out.2", &h->a, d_out, &d_a) ||
        !norm_silu_backward(c, &h->norm, "out", x, &h->mean, &h->rstd, &d_a, d_x))
        return false;
    sdt_arena_rewind(c->arena, mark);
    return true;
}
