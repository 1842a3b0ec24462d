/* unet_resblock.c - the UNet's convolutional layers: ResBlock, Down/Upsample
 * and the output head, forward and input-gradient backward. Weight gradients
 * are never formed (the UNet is frozen), so every backward op gets NULL for dw/db. */
#include "unet_internal.h"

bool unet_conv_forward(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x, sdt_tensor *out)
{
    int64_t oh = (x->shape[2] + 2 * cv->pad - cv->k) / cv->stride + 1;
    int64_t ow = (x->shape[3] + 2 * cv->pad - cv->k) / cv->stride + 1;
    *out = unet_act(c, 4, x->shape[0], cv->out, oh, ow);
    UNET_OP(c, where, c->be->conv2d_forward(c->be, out, x, cv->w, cv->b, cv->stride, cv->pad));
    return true;
}

static bool conv_backward(unet_ctx *c, const unet_conv *cv, const char *where, const sdt_tensor *x,
                          const sdt_tensor *d_out, sdt_tensor *d_x)
{
    UNET_OP(c, where, c->be->conv2d_backward(c->be, d_x, NULL, NULL, d_out, x, cv->w, cv->stride, cv->pad));
    return true;
}

bool unet_norm_silu_forward(unet_ctx *c, const unet_norm *n, const char *where, const sdt_tensor *x, sdt_tensor *nout,
                            sdt_tensor *mean, sdt_tensor *rstd, sdt_tensor *act)
{
    sdt_backend *be = c->be;
    *nout = unet_act_like(c, x);
    *mean = unet_stat(c, x->shape[0], n->groups);
    *rstd = unet_stat(c, x->shape[0], n->groups);
    *act = unet_act_like(c, x);
    UNET_OP(c, where, be->groupnorm_forward(be, nout, mean, rstd, x, n->w, n->b, n->groups, n->eps));
    UNET_OP(c, where, be->activation_forward(be, act, nout, SDT_ACT_SILU));
    return true;
}

bool unet_norm_silu_backward(unet_ctx *c, const unet_norm *n, const char *where, const sdt_tensor *x,
                             const sdt_tensor *nout, const sdt_tensor *mean, const sdt_tensor *rstd,
                             const sdt_tensor *d_act, sdt_tensor *d_x)
{
    sdt_backend *be = c->be;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_n;
    if (!unet_grad_like(c, nout, &d_n, where)) return false;
    UNET_OP(c, where, be->activation_backward(be, &d_n, d_act, nout, SDT_ACT_SILU));
    UNET_OP(c, where, be->groupnorm_backward(be, d_x, NULL, NULL, &d_n, x, n->w, mean, rstd, n->groups));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- ResBlock: skip(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x))) + emb_layers(emb)))) ---- */

bool unet_res_forward(unet_ctx *c, unet_resblock *r, const sdt_tensor *x, sdt_tensor *out)
{
    sdt_backend *be = c->be;
    const char *where = r->name;
    if (!unet_norm_silu_forward(c, &r->norm1, where, x, &r->n1, &r->mean1, &r->rstd1, &r->a1)) return false;
    if (!unet_conv_forward(c, &r->conv1, where, &r->a1, &r->h)) return false;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor e = unet_act(c, 2, x->shape[0], r->out_ch, 0, 0);
    UNET_OP(c, where, be->linear_forward(be, &e, &c->emb_act, r->emb.w, r->emb.b));
    UNET_OP(c, where, be->add_channel_forward(be, &r->h, &e));
    sdt_arena_rewind(c->arena, mark);
    if (!unet_norm_silu_forward(c, &r->norm2, where, &r->h, &r->n2, &r->mean2, &r->rstd2, &r->a2)) return false;
    if (!unet_conv_forward(c, &r->conv2, where, &r->a2, out)) return false;
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
    if (!unet_grad_like(c, &r->a2, &d_a2, where) || !conv_backward(c, &r->conv2, where, &r->a2, d_out, &d_a2))
        return false;
    if (!unet_grad_like(c, &r->h, &d_h, where) ||
        !unet_norm_silu_backward(c, &r->norm2, where, &r->h, &r->n2, &r->mean2, &r->rstd2, &d_a2, &d_h))
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
    if (!unet_grad_like(c, &r->a1, &d_a1, where) || !conv_backward(c, &r->conv1, where, &r->a1, &d_h, &d_a1))
        return false;
    if (!unet_norm_silu_backward(c, &r->norm1, where, x, &r->n1, &r->mean1, &r->rstd1, &d_a1, d_x)) return false;
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
    s->upx = unet_act(c, 4, x->shape[0], x->shape[1], 2 * x->shape[2], 2 * x->shape[3]);
    UNET_OP(c, s->name, c->be->upsample_nearest2x_forward(c->be, &s->upx, x));
    return unet_conv_forward(c, &s->conv, s->name, &s->upx, out);
}

bool unet_sampler_backward(unet_ctx *c, unet_sampler *s, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    if (!d_x) return true;
    if (!s->up) return conv_backward(c, &s->conv, s->name, x, d_out, d_x);
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_up;
    if (!unet_grad_like(c, &s->upx, &d_up, s->name) || !conv_backward(c, &s->conv, s->name, &s->upx, d_out, &d_up))
        return false;
    UNET_OP(c, s->name, c->be->upsample_nearest2x_backward(c->be, d_x, &d_up));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- output head: conv_out(SiLU(GroupNorm(x))) ---- */

bool unet_head_forward(unet_ctx *c, unet_head *h, const sdt_tensor *x, sdt_tensor *out)
{
    return unet_norm_silu_forward(c, &h->norm, "out", x, &h->n, &h->mean, &h->rstd, &h->a) &&
           unet_conv_forward(c, &h->conv, "out.2", &h->a, out);
}

bool unet_head_backward(unet_ctx *c, unet_head *h, const sdt_tensor *x, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    if (!d_x) return true;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_a;
    if (!unet_grad_like(c, &h->a, &d_a, "out.2") || !conv_backward(c, &h->conv, "out.2", &h->a, d_out, &d_a) ||
        !unet_norm_silu_backward(c, &h->norm, "out", x, &h->n, &h->mean, &h->rstd, &d_a, d_x))
        return false;
    sdt_arena_rewind(c->arena, mark);
    return true;
}
