/* unet_transformer.c - SpatialTransformer (LDM attention.py): GroupNorm,
 * proj_in (1x1 conv, or Linear for SD2), transformer blocks (self-attention,
 * cross-attention to the context, GEGLU feed-forward, each pre-LayerNorm and
 * residual), proj_out, residual. The blocks' tokens [B, H*W, C] are a
 * channels-last image's memory: in a channels-last run (tensor.h) the image
 * and the tokens are views of each other and the NCHW run's transposes vanish. Backward gives the input gradient and
 * accumulates d(context) through every cross-attention K/V projection and
 * every hypernetwork hook.
 *
 * No attention probabilities are saved: the fused attention keeps one log-sum-exp
 * per query row and backward recomputes the rest. What feeds only a frozen linear
 * or conv (the norms' outputs, the GEGLU output, the hooked K/V inputs, the
 * projections' inputs) is a temporary, kept as a shape: the input gradient of a
 * frozen layer reads no input values. Saved tensors are allocated before the
 * temporaries that feed them, so the temporaries' arena memory is rewound. */
#include "unet_internal.h"

static sdt_tensor stats(unet_ctx *c, int64_t rows)
{
    int64_t shape[1] = {rows};
    return sdt_arena_tensor(c->arena, SDT_F32, 1, shape);
}

static sdt_tensor rows2d(const sdt_tensor *t)
{
    int64_t last = t->shape[t->ndim - 1];
    return unet_view(t, 2, sdt_tensor_numel(t) / last, last, 0, 0);
}

/* A channels-last image [B, C, H, W] as its tokens [B, H*W, C], and back. */
static sdt_tensor tokens_of(const sdt_tensor *img)
{
    return unet_view(img, 3, img->shape[0], img->shape[2] * img->shape[3], img->shape[1], 0);
}

static sdt_tensor image_of(const sdt_tensor *tok, int64_t h, int64_t w)
{
    return sdt_tensor_channels_last_view(tok, tok->shape[0], tok->shape[2], h, w);
}

static sdt_tensor linear_alloc(unet_ctx *c, const unet_linear *l, const sdt_tensor *x)
{
    return unet_act(c, 3, x->shape[0], x->shape[1], l->out, 0);
}

static bool linear_into(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *x, sdt_tensor *out)
{
    UNET_OP(c, where, c->be->linear_forward(c->be, out, x, l->w, l->b));
    return true;
}

static bool linear(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *x, sdt_tensor *out)
{
    *out = linear_alloc(c, l, x);
    return linear_into(c, l, where, x, out);
}

static bool linear_backward(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *x,
                            const sdt_tensor *d_out, sdt_tensor *d_x)
{
    UNET_OP(c, where, c->be->linear_backward(c->be, d_x, NULL, NULL, d_out, x, l->w));
    return true;
}

/* d_x (allocated) = the frozen layer's input gradient: written, not accumulated, so it needs no
 * zeroing pass first. */
static bool linear_input_grad_into(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *d_out,
                                   sdt_tensor *d_x)
{
    UNET_OP(c, where, c->be->linear_input_grad(c->be, d_x, d_out, l->w));
    return true;
}

/* linear_input_grad_into a fresh tensor shaped like x. */
static bool linear_input_grad(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *x,
                              const sdt_tensor *d_out, sdt_tensor *d_x)
{
    *d_x = unet_grad_buffer(c, x);
    return linear_input_grad_into(c, l, where, d_out, d_x);
}

/* The statistics LayerNorm saves for x's rows. */
static void layernorm_stats(unet_ctx *c, const sdt_tensor *x, sdt_tensor *mean, sdt_tensor *rstd)
{
    int64_t rows = sdt_tensor_numel(x) / x->shape[x->ndim - 1];
    *mean = stats(c, rows);
    *rstd = stats(c, rows);
}

/* out = LayerNorm(x) into an allocated out and the allocated statistics. */
static bool layernorm_into(unet_ctx *c, const unet_norm *n, const char *where, const sdt_tensor *x, sdt_tensor *out,
                           sdt_tensor *mean, sdt_tensor *rstd)
{
    sdt_tensor x2 = rows2d(x), o2 = rows2d(out);
    UNET_OP(c, where, c->be->layernorm_forward(c->be, &o2, mean, rstd, &x2, n->w, n->b, n->eps));
    return true;
}

static bool layernorm_backward(unet_ctx *c, const unet_norm *n, const char *where, const sdt_tensor *x,
                               const sdt_tensor *mean, const sdt_tensor *rstd, const sdt_tensor *d_out, sdt_tensor *d_x)
{
    sdt_tensor x2 = rows2d(x), do2 = rows2d(d_out), dx2 = rows2d(d_x);
    UNET_OP(c, where, c->be->layernorm_backward(c->be, &dx2, NULL, NULL, &do2, &x2, n->w, mean, rstd));
    return true;
}

/* ---- attention with the K/V hook ---- */

static sdt_unet_hook_site site_of(const unet_attention *a, sdt_unet_kv kind)
{
    sdt_unet_hook_site s = {.layer = a->index, .kind = kind, .width = a->kv_width, .cross = a->cross};
    return s;
}

/* The hook's own error with the layer in front: "unet <name>: the hypernetwork hook[ backward] on
 * the K input of attention layer N (width W): <its sentence>", keeping its status. */
static bool hook_failed(unet_ctx *c, const unet_attention *a, sdt_unet_kv kind, const char *pass,
                        const sdt_error *hook_error)
{
    sdt_error_code code = hook_error->code != SDT_ERR_OK ? hook_error->code : SDT_ERR_INTERNAL;
    const char *why = hook_error->message[0] ? hook_error->message : "it failed without a sentence";
    return unet_fail(c, code, "unet %s: the hypernetwork hook%s on the %s input of attention layer %d (width %d): %s",
                     a->name, pass, kind == SDT_UNET_K ? "K" : "V", a->index, a->kv_width, why);
}

/* Sets *in to the hook's transform of kv (arena memory) or to kv itself. */
static bool hook_forward(unet_ctx *c, const unet_attention *a, sdt_unet_kv kind, const sdt_tensor *kv, sdt_tensor *in,
                         bool *hooked)
{
    const sdt_unet_kv_hook *h = c->hook;
    sdt_unet_hook_site site = site_of(a, kind);
    *hooked = h && h->forward && (!h->wants || h->wants(h->user, &site));
    if (!*hooked) {
        *in = *kv;
        return true;
    }
    *in = unet_act_like(c, kv);
    if (c->measuring) return true;
    if (!unet_arena_ok(c, a->name)) return false;
    sdt_error hook_error = {0};
    if (!h->forward(h->user, &site, kv, in, c->recompute, &hook_error)) return hook_failed(c, a, kind, "", &hook_error);
    return true;
}

/* Does a hypernetwork hook this attention's K or V input? Its backward then reads that input. */
static bool attention_hooked(const unet_ctx *c, const unet_attention *a)
{
    const sdt_unet_kv_hook *h = c->hook;
    if (!h || !h->forward) return false;
    if (!h->wants) return true;
    sdt_unet_hook_site k = site_of(a, SDT_UNET_K), v = site_of(a, SDT_UNET_V);
    return h->wants(h->user, &k) || h->wants(h->user, &v);
}

/* The attention's saved tensors for a query input of qin's shape and K/V inputs of kv's: Q, K, V, the
 * output and the softmax statistics backward needs (one f32 per query row and head, never [Tq, Tk]). */
static void attention_alloc(unet_ctx *c, unet_attention *a, const sdt_tensor *qin, const sdt_tensor *kv)
{
    a->qt = linear_alloc(c, &a->q, qin);
    a->kt = linear_alloc(c, &a->k, kv);
    a->vt = linear_alloc(c, &a->v, kv);
    int64_t shape[3] = {qin->shape[0], a->heads, qin->shape[1]};
    a->lse = sdt_arena_tensor(c->arena, SDT_F32, 3, shape);
    a->o = unet_act_like(c, &a->qt);
}

/* Q, K and V from their inputs; the hooked K/V inputs are temporaries (the caller rewinds them, and
 * forgets them with attention_forget_inputs). */
static bool attention_project(unet_ctx *c, unet_attention *a, const sdt_tensor *qin, const sdt_tensor *kv)
{
    return hook_forward(c, a, SDT_UNET_K, kv, &a->kin, &a->k_hooked) &&
           hook_forward(c, a, SDT_UNET_V, kv, &a->vin, &a->v_hooked) && linear_into(c, &a->q, a->name, qin, &a->qt) &&
           linear_into(c, &a->k, a->name, &a->kin, &a->kt) && linear_into(c, &a->v, a->name, &a->vin, &a->vt);
}

static void attention_forget_inputs(unet_attention *a)
{
    unet_forget(&a->kin);
    unet_forget(&a->vin);
}

static bool attention_run(unet_ctx *c, unet_attention *a)
{
    UNET_OP(c, a->name, c->be->attention_forward(c->be, &a->o, &a->lse, &a->qt, &a->kt, &a->vt, a->heads, false));
    return true;
}

/* One K or V path back: through the projection and, when hooked, through the hook. */
static bool kv_backward(unet_ctx *c, const unet_attention *a, sdt_unet_kv kind, const sdt_tensor *kv,
                        const sdt_tensor *d_proj, sdt_tensor *d_kv)
{
    const unet_linear *proj = kind == SDT_UNET_K ? &a->k : &a->v;
    const sdt_tensor *in = kind == SDT_UNET_K ? &a->kin : &a->vin;
    bool hooked = kind == SDT_UNET_K ? a->k_hooked : a->v_hooked;
    if (!hooked) return linear_backward(c, proj, a->name, in, d_proj, d_kv);
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_in;
    if (!linear_input_grad(c, proj, a->name, in, d_proj, &d_in)) return false;
    if (!c->measuring) {
        const sdt_unet_kv_hook *h = c->hook;
        sdt_unet_hook_site site = site_of(a, kind);
        sdt_error hook_error = {0};
        if (!h->backward)
            sdt_fail(&hook_error, SDT_ERR_INTERNAL, "the hook has no backward; set sdt_unet_kv_hook.backward");
        if (!h->backward || !h->backward(h->user, &site, kv, &d_in, d_kv, &hook_error))
            return hook_failed(c, a, kind, " backward", &hook_error);
    }
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* d_stream is the gradient of the residual sum x + to_out(o). d_q (allocated, shaped like the query input) is
 * WRITTEN by the Q projection's input gradient, which goes first; the K and V paths then accumulate
 * into d_kv, which may alias d_q (self-attention: both are the norm's gradient, so whether K or V
 * is hooked or not, the first contribution writes and the rest add) or be an accumulator the caller
 * zeroed (cross-attention: d(context), shared by every block). */
static bool attention_backward(unet_ctx *c, unet_attention *a, const sdt_tensor *kv, const sdt_tensor *d_stream,
                               sdt_tensor *d_q, sdt_tensor *d_kv)
{
    sdt_backend *be = c->be;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_o;
    if (!linear_input_grad(c, &a->out, a->name, &a->o, d_stream, &d_o)) return false;
    /* attention_backward writes dq, dk and dv (ops.h): no zeroing */
    sdt_tensor dq = unet_grad_buffer(c, &a->qt), dk = unet_grad_buffer(c, &a->kt), dv = unet_grad_buffer(c, &a->vt);
    UNET_OP(c, a->name,
            be->attention_backward(be, &dq, &dk, &dv, &d_o, &a->qt, &a->kt, &a->vt, &a->o, &a->lse, a->heads, false));
    if (!linear_input_grad_into(c, &a->q, a->name, &dq, d_q) || !kv_backward(c, a, SDT_UNET_K, kv, &dk, d_kv) ||
        !kv_backward(c, a, SDT_UNET_V, kv, &dv, d_kv))
        return false;
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* out = residual + l(x), into an allocated out (one op: CUDA adds both in the GEMM's epilogue) */
static bool linear_residual_into(unet_ctx *c, const unet_linear *l, const char *where, const sdt_tensor *x,
                                 const sdt_tensor *residual, sdt_tensor *out)
{
    UNET_OP(c, where, c->be->linear_residual_forward(c->be, out, x, l->w, l->b, residual));
    return true;
}

/* out = x + to_out(attention), into an allocated out */
static bool attention_residual(unet_ctx *c, unet_attention *a, const sdt_tensor *x, sdt_tensor *out)
{
    return linear_residual_into(c, &a->out, a->name, &a->o, x, out);
}

/* ---- transformer block ---- */

/* One attention sub-layer: out = x + attention(LayerNorm(x), kv or the norm's output). The norm's output
 * n is a temporary unless keep_n (a hooked self-attention reads it in backward). */
static bool attention_sublayer(unet_ctx *c, unet_tblock *b, const unet_norm *ln, unet_attention *a, const sdt_tensor *x,
                               const sdt_tensor *context, sdt_tensor *n, sdt_tensor *mean, sdt_tensor *rstd,
                               sdt_tensor *out)
{
    bool self = context == NULL, keep_n = self && attention_hooked(c, a);
    layernorm_stats(c, x, mean, rstd);
    if (keep_n) *n = unet_act_like(c, x);
    attention_alloc(c, a, x, self ? x : context);
    *out = unet_act_like(c, x);
    size_t mark = sdt_arena_mark(c->arena);
    if (!keep_n) *n = unet_act_like(c, x);
    if (!layernorm_into(c, ln, b->name, x, n, mean, rstd) || !attention_project(c, a, n, self ? n : context))
        return false;
    sdt_arena_rewind(c->arena, mark);
    attention_forget_inputs(a);
    if (!keep_n) unet_forget(n);
    return attention_run(c, a) && attention_residual(c, a, x, out);
}

static bool tblock_forward(unet_ctx *c, unet_tblock *b, const sdt_tensor *x0, const sdt_tensor *context)
{
    sdt_backend *be = c->be;
    b->x0 = *x0;
    if (!attention_sublayer(c, b, &b->ln1, &b->attn1, x0, NULL, &b->n1, &b->m1, &b->r1, &b->x1) ||
        !attention_sublayer(c, b, &b->ln2, &b->attn2, &b->x1, context, &b->n2, &b->m2, &b->r2, &b->x2))
        return false;
    /* feed-forward: x3 = x2 + ff2(GEGLU(ff1(LayerNorm(x2)))); the GEGLU input is saved, the norm's
     * output and the GEGLU output (inputs of frozen linears) are temporaries */
    layernorm_stats(c, &b->x2, &b->m3, &b->r3);
    b->f1 = linear_alloc(c, &b->ff1, &b->x2);
    b->x3 = unet_act_like(c, &b->x2);
    size_t mark = sdt_arena_mark(c->arena);
    b->n3 = unet_act_like(c, &b->x2);
    b->g = unet_act(c, 3, b->f1.shape[0], b->f1.shape[1], b->f1.shape[2] / 2, 0);
    if (!layernorm_into(c, &b->ln3, b->name, &b->x2, &b->n3, &b->m3, &b->r3) ||
        !linear_into(c, &b->ff1, b->name, &b->n3, &b->f1))
        return false;
    UNET_OP(c, b->name, be->geglu_forward(be, &b->g, &b->f1));
    if (!linear_residual_into(c, &b->ff2, b->name, &b->g, &b->x2, &b->x3)) return false;
    sdt_arena_rewind(c->arena, mark);
    unet_forget(&b->n3);
    unet_forget(&b->g);
    return true;
}

/* d_s holds d(x3) on entry and d(x0) on return (every sub-layer is residual, so it accumulates in place). */
static bool tblock_backward(unet_ctx *c, unet_tblock *b, const sdt_tensor *context, sdt_tensor *d_s,
                            sdt_tensor *d_context)
{
    sdt_backend *be = c->be;
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor d_g, d_n;
    if (!linear_input_grad(c, &b->ff2, b->name, &b->g, d_s, &d_g)) return false;
    sdt_tensor d_f1 = unet_grad_buffer(c, &b->f1); /* geglu_backward writes it (ops.h) */
    UNET_OP(c, b->name, be->geglu_backward(be, &d_f1, &d_g, &b->f1));
    if (!linear_input_grad(c, &b->ff1, b->name, &b->n3, &d_f1, &d_n) ||
        !layernorm_backward(c, &b->ln3, b->name, &b->x2, &b->m3, &b->r3, &d_n, d_s))
        return false;
    sdt_arena_rewind(c->arena, mark);

    /* d_n, the norm's gradient, is written by the attention's Q path (no zeroing pass) */
    d_n = unet_grad_buffer(c, &b->n2);
    if (!attention_backward(c, &b->attn2, context, d_s, &d_n, d_context) ||
        !layernorm_backward(c, &b->ln2, b->name, &b->x1, &b->m2, &b->r2, &d_n, d_s))
        return false;
    sdt_arena_rewind(c->arena, mark);

    d_n = unet_grad_buffer(c, &b->n1);
    if (!attention_backward(c, &b->attn1, &b->n1, d_s, &d_n, &d_n) ||
        !layernorm_backward(c, &b->ln1, b->name, &b->x0, &b->m1, &b->r1, &d_n, d_s))
        return false;
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- SpatialTransformer ---- */

bool unet_st_forward(unet_ctx *c, unet_transformer *t, const sdt_tensor *x, const sdt_tensor *context, sdt_tensor *out)
{
    sdt_backend *be = c->be;
    const int64_t B = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], N = H * W;
    const char *where = t->name;
    /* the norm's output and the projection's input are temporaries; s, the blocks' input, is saved */
    t->mean = unet_stat(c, B, t->norm.groups);
    t->rstd = unet_stat(c, B, t->norm.groups);
    sdt_tensor s = unet_act(c, 3, B, N, t->inner, 0);
    size_t mark = sdt_arena_mark(c->arena);
    t->n = unet_act_like(c, x);
    UNET_OP(c, where,
            be->groupnorm_forward(be, &t->n, &t->mean, &t->rstd, x, t->norm.w, t->norm.b, t->norm.groups, t->norm.eps,
                                  SDT_ACT_IDENTITY));
    if (c->channels_last) {
        /* the norm's output is the projection's tokens; the 1x1 conv writes s as the image it is */
        if (t->linear_proj) {
            t->p = tokens_of(&t->n);
            if (!linear_into(c, &t->proj_in_l, where, &t->p, &s)) return false;
        } else {
            sdt_tensor p = image_of(&s, H, W);
            if (!unet_conv_run(c, &t->proj_in_c, where, &t->n, &p)) return false;
        }
    } else if (t->linear_proj) {
        /* [B, C, HW] -> [B, HW, C] -> Linear */
        t->p = unet_act(c, 3, B, N, C, 0);
        sdt_tensor n3 = unet_view(&t->n, 3, B, C, N, 0);
        UNET_OP(c, where, be->transpose_forward(be, &t->p, &n3));
        if (!linear_into(c, &t->proj_in_l, where, &t->p, &s)) return false;
    } else {
        /* 1x1 conv -> [B, inner, HW] -> [B, HW, inner] */
        sdt_tensor p;
        if (!unet_conv_forward(c, &t->proj_in_c, where, &t->n, &p)) return false;
        sdt_tensor p3 = unet_view(&p, 3, B, t->inner, N, 0);
        UNET_OP(c, where, be->transpose_forward(be, &s, &p3));
    }
    sdt_arena_rewind(c->arena, mark);
    unet_forget(&t->n);
    unet_forget(&t->p);
    /* Checkpointing's recompute of a deep transformer (SDXL's ten blocks) keeps each block's output only, so
     * its backward holds one block's activations at a time, as diffusers' per-block checkpointing does; the
     * blocks run once more each in backward. */
    t->per_block = c->recompute && t->depth > 1;
    for (int d = 0; d < t->depth; d++) {
        if (!t->per_block) {
            if (!tblock_forward(c, &t->blocks[d], &s, context)) return false;
            s = t->blocks[d].x3;
            continue;
        }
        sdt_tensor next = unet_act(c, 3, B, N, t->inner, 0);
        size_t block_mark = sdt_arena_mark(c->arena);
        if (!tblock_forward(c, &t->blocks[d], &s, context)) return false;
        UNET_OP(c, t->blocks[d].name, be->convert(be, &next, &t->blocks[d].x3));
        sdt_arena_rewind(c->arena, block_mark);
        t->blocks[d].x3 = next;
        s = next;
    }
    if (c->channels_last) {
        /* proj_out reads the last block's tokens as the image they are and writes out's tokens */
        *out = unet_act_like(c, x);
        t->s_img = image_of(&s, H, W);
        sdt_tensor o_tokens = tokens_of(out), x_tokens = tokens_of(x);
        if (t->linear_proj) {
            bool ok = linear_residual_into(c, &t->proj_out_l, where, &s, &x_tokens, &o_tokens);
            unet_forget(&t->s_img);
            return ok;
        }
        if (!unet_conv_run(c, &t->proj_out_c, where, &t->s_img, out)) return false;
        unet_forget(&t->s_img);
    } else if (t->linear_proj) {
        *out = unet_act_like(c, x);
        mark = sdt_arena_mark(c->arena);
        sdt_tensor po, o3 = unet_view(out, 3, B, C, N, 0);
        if (!linear(c, &t->proj_out_l, where, &s, &po)) return false;
        UNET_OP(c, where, be->transpose_forward(be, &o3, &po));
        sdt_arena_rewind(c->arena, mark);
    } else {
        t->s_img = unet_shape(c, 4, B, t->inner, H, W);
        *out = unet_conv_alloc(c, &t->proj_out_c, &t->s_img);
        mark = sdt_arena_mark(c->arena);
        t->s_img = unet_act(c, 4, B, t->inner, H, W);
        sdt_tensor s3 = unet_view(&t->s_img, 3, B, t->inner, N, 0);
        UNET_OP(c, where, be->transpose_forward(be, &s3, &s));
        if (!unet_conv_run(c, &t->proj_out_c, where, &t->s_img, out)) return false;
        sdt_arena_rewind(c->arena, mark);
        unet_forget(&t->s_img);
    }
    UNET_OP(c, where, be->add_forward(be, out, out, x));
    return true;
}

bool unet_st_backward(unet_ctx *c, unet_transformer *t, const sdt_tensor *x, const sdt_tensor *context,
                      const sdt_tensor *d_out, sdt_tensor *d_x, sdt_tensor *d_context)
{
    sdt_backend *be = c->be;
    const int64_t B = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], N = H * W;
    const char *where = t->name;
    if (d_x) UNET_OP(c, where, be->axpy(be, d_x, 1.0f, d_out));
    size_t mark = sdt_arena_mark(c->arena);
    const sdt_tensor *s_last = &t->blocks[t->depth - 1].x3;
    sdt_tensor d_s;
    if (c->channels_last) {
        /* d_out's tokens go back through proj_out; its input gradient (a fresh buffer) is d_s's tokens */
        if (t->linear_proj) {
            sdt_tensor do_tokens = tokens_of(d_out);
            if (!linear_input_grad(c, &t->proj_out_l, where, s_last, &do_tokens, &d_s)) return false;
        } else {
            sdt_tensor d_img;
            if (!unet_conv_input_grad(c, &t->proj_out_c, where, &t->s_img, d_out, &d_img)) return false;
            d_s = tokens_of(&d_img);
        }
    } else if (t->linear_proj) {
        sdt_tensor d_po, do3 = unet_view(d_out, 3, B, C, N, 0);
        if (!unet_grad_like(c, s_last, &d_po, where)) return false;
        d_po = unet_view(&d_po, 3, B, N, C, 0); /* same numel: inner == C */
        UNET_OP(c, where, be->transpose_backward(be, &d_po, &do3));
        if (!linear_input_grad(c, &t->proj_out_l, where, s_last, &d_po, &d_s)) return false;
    } else {
        if (!unet_grad_like(c, s_last, &d_s, where)) return false;
        sdt_tensor d_nchw;
        if (!unet_conv_input_grad(c, &t->proj_out_c, where, &t->s_img, d_out, &d_nchw)) return false;
        sdt_tensor d3 = unet_view(&d_nchw, 3, B, t->inner, N, 0);
        UNET_OP(c, where, be->transpose_backward(be, &d_s, &d3));
    }
    for (int d = t->depth - 1; d >= 0; d--) {
        unet_tblock *blk = &t->blocks[d];
        size_t block_mark = sdt_arena_mark(c->arena);
        if (t->per_block) { /* this block's activations again, from its kept input */
            sdt_tensor x0 = blk->x0, x3 = blk->x3;
            c->recompute = true;
            bool ok = tblock_forward(c, blk, &x0, context);
            c->recompute = false;
            blk->x3 = x3;
            if (!ok) return false;
        }
        if (!tblock_backward(c, blk, context, &d_s, d_context)) return false;
        sdt_arena_rewind(c->arena, block_mark);
    }
    if (d_x) {
        sdt_tensor d_n;
        if (c->channels_last) {
            if (t->linear_proj) {
                sdt_tensor d_p;
                if (!linear_input_grad(c, &t->proj_in_l, where, &t->p, &d_s, &d_p)) return false;
                d_n = image_of(&d_p, H, W);
            } else {
                sdt_tensor d_p = image_of(&d_s, H, W);
                if (!unet_conv_input_grad(c, &t->proj_in_c, where, &t->n, &d_p, &d_n)) return false;
            }
        } else if (t->linear_proj) {
            if (!unet_grad_like(c, &t->n, &d_n, where)) return false;
            sdt_tensor d_p;
            if (!linear_input_grad(c, &t->proj_in_l, where, &t->p, &d_s, &d_p)) return false;
            sdt_tensor dn3 = unet_view(&d_n, 3, B, C, N, 0);
            UNET_OP(c, where, be->transpose_backward(be, &dn3, &d_p));
        } else {
            sdt_tensor d_p = unet_act(c, 4, B, t->inner, H, W);
            UNET_OP(c, where, be->zero(be, &d_p));
            sdt_tensor dp3 = unet_view(&d_p, 3, B, t->inner, N, 0);
            UNET_OP(c, where, be->transpose_backward(be, &dp3, &d_s));
            if (!unet_conv_input_grad(c, &t->proj_in_c, where, &t->n, &d_p, &d_n)) return false;
        }
        UNET_OP(c, where,
                be->groupnorm_backward(be, d_x, NULL, NULL, &d_n, x, t->norm.w, t->norm.b, &t->mean, &t->rstd,
                                       t->norm.groups, SDT_ACT_IDENTITY));
    }
    sdt_arena_rewind(c->arena, mark);
    return true;
}
