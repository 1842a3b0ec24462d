/* unet.c - UNet forward and backward over units, gradient checkpointing,
 * arena helpers and errors. The layer maths lives in unet_resblock.c and
 * unet_transformer.c; the architecture walk in unet_build.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "unet_internal.h"

/* ---- context helpers ---- */

bool unet_fail(unet_ctx *c, sdt_error_code code, const char *fmt, ...)
{
    if (!c->error) return false;
    c->error->code = code;
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(c->error->message, sizeof c->error->message, fmt, ap);
    va_end(ap);
    return false;
}

bool unet_arena_ok(unet_ctx *c, const char *where)
{
    if (sdt_arena_fits(c->arena)) return true;
    return unet_fail(c, c->arena->error.code,
                     "unet %s: %s; measure forward and backward with a measuring arena for this batch "
                     "and size and allocate arena.peak bytes",
                     where, c->arena->error.message);
}

bool unet_op_failed(unet_ctx *c, const char *where, const char *op)
{
    return unet_fail(c, c->be->error.code, "unet %s: %s failed on backend %s: %s", where, op, c->be->name,
                     c->be->error.message);
}

sdt_tensor unet_act(unet_ctx *c, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t shape[4] = {d0, d1, d2, d3};
    sdt_tensor t = sdt_arena_tensor(c->arena, c->dt, ndim, shape);
    t.channels_last = ndim == 4 && c->channels_last;
    return t;
}

sdt_tensor unet_shape(unet_ctx *c, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t shape[4] = {d0, d1, d2, d3};
    sdt_tensor t = sdt_tensor_make(NULL, c->dt, c->be ? c->be->device : SDT_DEVICE_CPU, ndim, shape);
    t.channels_last = ndim == 4 && c->channels_last;
    return t;
}

sdt_tensor unet_stat(unet_ctx *c, int64_t d0, int64_t d1)
{
    int64_t shape[2] = {d0, d1};
    return sdt_arena_tensor(c->arena, SDT_F32, 2, shape);
}

bool unet_zeroed_stat(unet_ctx *c, int64_t d0, int64_t d1, sdt_tensor *out, const char *where)
{
    *out = unet_stat(c, d0, d1);
    UNET_OP(c, where, c->be->zero(c->be, out));
    return true;
}

sdt_tensor unet_act_like(unet_ctx *c, const sdt_tensor *t)
{
    sdt_tensor a = sdt_arena_tensor(c->arena, c->dt, t->ndim, t->shape);
    a.channels_last = t->channels_last;
    return a;
}

sdt_tensor unet_grad_buffer(unet_ctx *c, const sdt_tensor *t)
{
    sdt_tensor g = sdt_arena_tensor(c->arena, t->dtype, t->ndim, t->shape);
    g.channels_last = t->channels_last;
    return g;
}

bool unet_grad_like(unet_ctx *c, const sdt_tensor *t, sdt_tensor *out, const char *where)
{
    *out = unet_grad_buffer(c, t);
    UNET_OP(c, where, c->be->zero(c->be, out));
    return true;
}

void unet_forget(sdt_tensor *t)
{
    t->data = NULL;
}

sdt_tensor unet_view(const sdt_tensor *t, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t shape[4] = {d0, d1, d2, d3};
    return sdt_tensor_reshape(t, ndim, shape);
}

sdt_unet_options sdt_unet_options_default(void)
{
    sdt_unet_options o = {.act_dtype = SDT_F32, .for_backward = true, .checkpointing = false, .hook = NULL};
    return o;
}

/* ---- layers and units ---- */

static const char *layer_name(const unet_layer *l)
{
    switch (l->kind) {
        case UNET_LAYER_CONV_IN:
            return "input_blocks.0.0";
        case UNET_LAYER_RES:
            return l->res->name;
        case UNET_LAYER_ST:
            return l->st->name;
        case UNET_LAYER_SAMPLER:
            return l->sampler->name;
        case UNET_LAYER_HEAD:
            return "out";
    }
    return "?";
}

/* Anomaly mode: the first non-finite value is an error naming where it appeared. */
static bool check_finite(unet_ctx *c, const sdt_tensor *t, const char *where, const char *what)
{
    if (!c->opt->anomaly_check || c->measuring) return true;
    int64_t bad = 0;
    UNET_OP(c, where, c->be->count_nonfinite(c->be, t, &bad));
    if (bad)
        return unet_fail(c, SDT_ERR_NUMERICAL,
                         "unet anomaly: %lld non-finite values in the %s of %s (the first layer to produce one)",
                         (long long)bad, what, where);
    return true;
}

static bool layer_forward(unet_ctx *c, unet_layer *l, const sdt_tensor *x)
{
    l->x = *x;
    bool ok = false;
    switch (l->kind) {
        case UNET_LAYER_CONV_IN:
            ok = unet_conv_forward(c, &l->conv_in, "input_blocks.0.0", x, &l->out);
            break;
        case UNET_LAYER_RES:
            ok = unet_res_forward(c, l->res, x, &l->out);
            break;
        case UNET_LAYER_ST:
            ok = unet_st_forward(c, l->st, x, c->context, &l->out);
            break;
        case UNET_LAYER_SAMPLER:
            ok = unet_sampler_forward(c, l->sampler, x, &l->out);
            break;
        case UNET_LAYER_HEAD:
            ok = unet_head_forward(c, l->head, x, &l->out);
            break;
    }
    return ok && check_finite(c, &l->out, layer_name(l), "output");
}

static bool layer_backward(unet_ctx *c, unet_layer *l, const sdt_tensor *d_out, sdt_tensor *d_x, sdt_tensor *d_context)
{
    switch (l->kind) {
        case UNET_LAYER_CONV_IN:
            return true; /* the latents need no gradient */
        case UNET_LAYER_RES:
            return unet_res_backward(c, l->res, &l->x, d_out, d_x);
        case UNET_LAYER_ST:
            return unet_st_backward(c, l->st, &l->x, c->context, d_out, d_x, d_context);
        case UNET_LAYER_SAMPLER:
            return unet_sampler_backward(c, l->sampler, &l->x, d_out, d_x);
        case UNET_LAYER_HEAD:
            return unet_head_backward(c, l->head, &l->x, d_out, d_x);
    }
    return unet_fail(c, SDT_ERR_INTERNAL, "unet: unknown layer kind %d", (int)l->kind);
}

/* The unit's output shape, known before running it (checkpointing allocates the output first). */
static void unit_out_shape(const sdt_unet *u, const unet_unit *un, const sdt_tensor *x, int64_t shape[4])
{
    for (int i = 0; i < 4; i++) shape[i] = x->shape[i];
    for (int i = 0; i < un->layer_count; i++) {
        const unet_layer *l = &u->layers[un->first_layer + i];
        switch (l->kind) {
            case UNET_LAYER_CONV_IN:
                shape[1] = l->conv_in.out;
                break;
            case UNET_LAYER_RES:
                shape[1] = l->res->out_ch;
                break;
            case UNET_LAYER_ST:
                break;
            case UNET_LAYER_SAMPLER:
                shape[2] = l->sampler->up ? shape[2] * 2 : (shape[2] - 1) / 2 + 1;
                shape[3] = l->sampler->up ? shape[3] * 2 : (shape[3] - 1) / 2 + 1;
                break;
            case UNET_LAYER_HEAD:
                shape[1] = l->head->conv.out;
                break;
        }
    }
}

/* Runs the unit's layers (concat first when it has a skip input); the result is the last layer's out. */
static bool unit_run_layers(unet_ctx *c, unet_unit *un)
{
    const sdt_tensor *in = &un->x;
    if (un->skip_from >= 0) {
        un->cat = unet_act(c, 4, un->x.shape[0], un->x.shape[1] + un->skip.shape[1], un->x.shape[2], un->x.shape[3]);
        UNET_OP(c, un->name, c->be->concat_channels_forward(c->be, &un->cat, &un->x, &un->skip));
        in = &un->cat;
    }
    for (int i = 0; i < un->layer_count; i++) {
        unet_layer *l = &c->u->layers[un->first_layer + i];
        if (!layer_forward(c, l, in)) return false;
        in = &l->out;
    }
    return true;
}

static bool unit_forward(unet_ctx *c, unet_unit *un, const sdt_tensor *x, const sdt_tensor *skip, bool keep)
{
    sdt_unet *u = c->u;
    un->x = *x;
    if (skip) un->skip = *skip;
    un->kept = keep;
    unet_layer *last = &u->layers[un->first_layer + un->layer_count - 1];
    if (keep) {
        if (!unit_run_layers(c, un)) return false;
        un->out = last->out;
        return true;
    }
    /* Output first, then the internals above a mark that is rewound once the output is copied out. */
    int64_t shape[4];
    unit_out_shape(u, un, x, shape);
    un->out = unet_act(c, 4, shape[0], shape[1], shape[2], shape[3]);
    /* the run's layout, but the head's conv_out writes NCHW */
    un->out.channels_last = c->channels_last && !(last->kind == UNET_LAYER_HEAD && last->head->conv.row_major_out);
    size_t mark = sdt_arena_mark(c->arena);
    if (!unit_run_layers(c, un)) return false;
    UNET_OP(c, un->name, c->be->convert(c->be, &un->out, &last->out));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* Does the layer read the context (or, when d(y) is asked for, the time embedding)? */
static bool layer_is_source(const unet_ctx *c, const unet_layer *l)
{
    return l->kind == UNET_LAYER_ST || (c->d_emb_act && l->kind == UNET_LAYER_RES);
}

/* Does layer i of the unit (0-based) see an input that depends on the context (or y)? */
static bool layer_input_depends(const unet_ctx *c, const unet_unit *un, int i)
{
    if (un->input_needs_grad || un->skip_needs_grad) return true;
    for (int j = 0; j < i; j++)
        if (layer_is_source(c, &c->u->layers[un->first_layer + j])) return true;
    return false;
}

static bool unit_backward(unet_ctx *c, unet_unit *un, const sdt_tensor *d_out, sdt_tensor *d_x, sdt_tensor *d_skip,
                          sdt_tensor *d_context)
{
    sdt_unet *u = c->u;
    size_t mark = sdt_arena_mark(c->arena);
    if (!un->kept) {
        c->recompute = true;
        bool ok = unit_run_layers(c, un);
        c->recompute = false;
        if (!ok) return false;
    }
    sdt_tensor d_cur = *d_out, d_in;
    for (int i = un->layer_count - 1; i >= 0; i--) {
        unet_layer *l = &u->layers[un->first_layer + i];
        bool needs_dx = layer_input_depends(c, un, i);
        if (!needs_dx && !layer_is_source(c, l)) break; /* nothing below reaches the context (or y) */
        sdt_tensor *dx = NULL;
        if (needs_dx) {
            if (i > 0 || un->skip_from >= 0) {
                if (!unet_grad_like(c, &l->x, &d_in, un->name)) return false;
                dx = &d_in;
            } else {
                dx = d_x;
            }
        }
        if (!layer_backward(c, l, &d_cur, dx, d_context)) return false;
        if (!dx) break;
        if (!check_finite(c, dx, layer_name(l), "input gradient")) return false;
        d_cur = *dx;
        if (i == 0 && un->skip_from >= 0)
            UNET_OP(c, un->name, c->be->concat_channels_backward(c->be, d_x, d_skip, &d_cur));
    }
    sdt_arena_rewind(c->arena, mark);
    return true;
}

/* ---- entry points ---- */

static bool check_inputs(unet_ctx *c, const sdt_tensor *latents, const sdt_tensor *timesteps, const sdt_tensor *context,
                         const sdt_tensor *y)
{
    const sdt_unet_config *cfg = &c->u->cfg;
    if (latents->ndim != 4 || latents->shape[1] != cfg->in_channels)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: latents must be [B, %d, H, W], got %d dims with %lld channels",
                         cfg->in_channels, latents->ndim, (long long)(latents->ndim > 1 ? latents->shape[1] : 0));
    int64_t B = latents->shape[0], H = latents->shape[2], W = latents->shape[3];
    int64_t div = (int64_t)1 << (cfg->num_levels - 1);
    if (B < 1 || H < 1 || W < 1 || H % div || W % div)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: latent size %lldx%lld must be a positive multiple of %lld (%d levels)",
                         (long long)H, (long long)W, (long long)div, cfg->num_levels);
    if (sdt_tensor_numel(timesteps) != B || timesteps->dtype != SDT_F32)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT, "unet forward: timesteps must be %lld f32 values, one per latent",
                         (long long)B);
    if (context->ndim != 3 || context->shape[0] != B || context->shape[2] != cfg->context_dim || context->shape[1] < 1)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: context must be [%lld, T, %d] (batch, tokens, context width)", (long long)B,
                         cfg->context_dim);
    if (context->dtype == SDT_I32 || latents->dtype == SDT_I32)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: latents and context must be float tensors (f32, f16 or bf16)");
    if (cfg->adm_in_channels > 0 && !y)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: this UNet has a label_emb (SDXL) and needs y [%lld, %d]: the "
                         "pooled text embedding and the size conditioning (sdt_sdxl_vector_cond); pass it",
                         (long long)B, cfg->adm_in_channels);
    if (cfg->adm_in_channels == 0 && y)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: y was given but this UNet has no label_emb (not SDXL); "
                         "pass y = NULL");
    if (y && (y->ndim != 2 || y->shape[0] != B || y->shape[1] != cfg->adm_in_channels || y->dtype == SDT_I32))
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT,
                         "unet forward: y must be a float tensor [%lld, %d] (batch, label_emb "
                         "input width)",
                         (long long)B, cfg->adm_in_channels);
    if (c->dt != SDT_F32 && c->dt != SDT_F16 && c->dt != SDT_BF16)
        return unet_fail(c, SDT_ERR_INVALID_ARGUMENT, "unet forward: act_dtype must be f32, f16 or bf16");
    return true;
}

/* emb_act = SiLU(time_embed.2(SiLU(time_embed.0(timestep_embedding(t)))) [+ label_emb(y)]); the
 * intermediates are scratch, except label_emb's, which backward towards y reads. */
static bool time_embedding(unet_ctx *c, const sdt_tensor *timesteps, const sdt_tensor *y, int64_t B)
{
    const sdt_unet_config *cfg = &c->u->cfg;
    sdt_unet *u = c->u;
    sdt_backend *be = c->be;
    c->emb_act = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
    if (y) {
        u->emb_pre = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
        u->label_pre = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
        u->label_act = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
    }
    size_t mark = sdt_arena_mark(c->arena);
    sdt_tensor t0 = unet_act(c, 2, B, cfg->model_channels, 0, 0);
    sdt_tensor e1 = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
    sdt_tensor e2 = unet_act(c, 2, B, cfg->time_embed_dim, 0, 0);
    UNET_OP(c, "time_embed",
            be->timestep_embedding(be, &t0, timesteps, cfg->flip_sin_to_cos, cfg->freq_shift, 10000.0f));
    UNET_OP(c, "time_embed.0", be->linear_forward(be, &e1, &t0, c->u->time1.w, c->u->time1.b));
    UNET_OP(c, "time_embed.1", be->activation_forward(be, &e1, &e1, SDT_ACT_SILU));
    UNET_OP(c, "time_embed.2", be->linear_forward(be, &e2, &e1, c->u->time2.w, c->u->time2.b));
    if (y) {
        UNET_OP(c, "label_emb.0.0", be->linear_forward(be, &u->label_pre, y, u->label1.w, u->label1.b));
        UNET_OP(c, "label_emb.0.1", be->activation_forward(be, &u->label_act, &u->label_pre, SDT_ACT_SILU));
        UNET_OP(c, "label_emb.0.2", be->linear_forward(be, &u->emb_pre, &u->label_act, u->label2.w, u->label2.b));
        UNET_OP(c, "label_emb", be->add_forward(be, &u->emb_pre, &e2, &u->emb_pre));
        e2 = u->emb_pre;
    }
    UNET_OP(c, "time_embed", be->activation_forward(be, &c->emb_act, &e2, SDT_ACT_SILU));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

static void ctx_init(unet_ctx *c, sdt_unet *u, sdt_backend *be, sdt_arena *arena, const sdt_unet_options *opt,
                     sdt_error *error)
{
    memset(c, 0, sizeof *c);
    c->u = u;
    c->be = be;
    c->arena = arena;
    c->opt = opt;
    c->hook = opt->hook;
    c->measuring = arena->measuring;
    c->dt = opt->act_dtype;
    c->channels_last = be->prefers_channels_last;
    c->error = error;
}

/* Tells the hook where the pass stands (unet.h: sdt_unet_kv_hook.pass); nothing while measuring. */
static bool hook_pass(unet_ctx *c, sdt_unet_pass_event event, bool for_backward, const sdt_tensor *context,
                      sdt_tensor *d_context)
{
    const sdt_unet_kv_hook *h = c->hook;
    if (c->measuring || !h || !h->pass) return true;
    sdt_unet_hook_pass pass = {
        .event = event, .for_backward = for_backward, .act_dtype = c->dt, .context = context, .d_context = d_context};
    sdt_error hook_error = {0};
    if (h->pass(h->user, &pass, &hook_error)) return true;
    static const char *const names[] = {"forward begins", "forward ends", "backward begins", "backward ends"};
    return unet_fail(c, hook_error.code != SDT_ERR_OK ? hook_error.code : SDT_ERR_INTERNAL,
                     "unet: the hypernetwork hook, told the %s: %s", names[event],
                     hook_error.message[0] ? hook_error.message : "it failed without a sentence");
}

bool sdt_unet_forward(sdt_unet *u, sdt_backend *be, sdt_arena *arena, const sdt_unet_options *opt,
                      const sdt_tensor *latents, const sdt_tensor *timesteps, const sdt_tensor *context,
                      const sdt_tensor *y, sdt_tensor *out, sdt_error *error)
{
    sdt_unet_options defaults = sdt_unet_options_default();
    if (!opt) opt = &defaults;
    unet_ctx c;
    ctx_init(&c, u, be, arena, opt, error);
    u->have_forward = false;
    if (!u->bound && !c.measuring)
        return unet_fail(&c, SDT_ERR_BAD_STATE,
                         "unet forward: this UNet was created without weights (for measuring); load it with "
                         "sdt_unet_load to run it");
    if (!check_inputs(&c, latents, timesteps, context, y)) return false;
    c.context = context;
    if (!hook_pass(&c, SDT_UNET_PASS_FORWARD_BEGIN, opt->for_backward, context, NULL)) return false;
    if (!time_embedding(&c, timesteps, y, latents->shape[0])) return false;
    bool keep = opt->for_backward && !opt->checkpointing;
    const sdt_tensor *x = latents;
    for (int i = 0; i < u->unit_count; i++) {
        unet_unit *un = &u->units[i];
        const sdt_tensor *skip = un->skip_from >= 0 ? &u->units[un->skip_from].out : NULL;
        if (!unit_forward(&c, un, x, skip, keep)) return false;
        x = &un->out;
    }
    if (!c.measuring && !unet_arena_ok(&c, "forward")) return false;
    if (!hook_pass(&c, SDT_UNET_PASS_FORWARD_END, opt->for_backward, context, NULL)) return false;
    *out = *x;
    u->fwd_opt = *opt;
    if (opt->hook) {
        u->fwd_hook = *opt->hook;
        u->fwd_opt.hook = &u->fwd_hook;
    }
    u->context = context;
    u->y = y;
    u->emb_act = c.emb_act;
    u->fwd_channels_last = c.channels_last;
    u->fwd_arena = arena;
    u->fwd_mark = sdt_arena_mark(arena);
    u->have_forward = opt->for_backward;
    return true;
}

/* d_y += label_emb's input gradient from d_emb_act, the sum over every ResBlock's emb_layers. */
static bool label_emb_backward(unet_ctx *c, sdt_tensor *d_y)
{
    sdt_unet *u = c->u;
    sdt_backend *be = c->be;
    size_t mark = sdt_arena_mark(c->arena);
    const int64_t B = u->emb_pre.shape[0], width = u->emb_pre.shape[1];
    sdt_tensor d_emb, d_label_act, d_label_pre;
    if (!unet_zeroed_stat(c, B, width, &d_emb, "time_embed") ||
        !unet_zeroed_stat(c, B, width, &d_label_act, "label_emb.0.2") ||
        !unet_zeroed_stat(c, B, width, &d_label_pre, "label_emb.0.0"))
        return false;
    UNET_OP(c, "time_embed", be->activation_backward(be, &d_emb, c->d_emb_act, &u->emb_pre, SDT_ACT_SILU));
    UNET_OP(c, "label_emb.0.2", be->linear_backward(be, &d_label_act, NULL, NULL, &d_emb, &u->label_act, u->label2.w));
    UNET_OP(c, "label_emb.0.1", be->activation_backward(be, &d_label_pre, &d_label_act, &u->label_pre, SDT_ACT_SILU));
    UNET_OP(c, "label_emb.0.0", be->linear_backward(be, d_y, NULL, NULL, &d_label_pre, u->y, u->label1.w));
    sdt_arena_rewind(c->arena, mark);
    return true;
}

bool sdt_unet_backward(sdt_unet *u, sdt_backend *be, sdt_arena *arena, const sdt_tensor *d_out, sdt_tensor *d_context,
                       sdt_tensor *d_y, sdt_error *error)
{
    unet_ctx c;
    ctx_init(&c, u, be, arena, &u->fwd_opt, error);
    if (!u->have_forward)
        return unet_fail(&c, SDT_ERR_BAD_STATE,
                         "unet backward: no forward with for_backward set ran before it; run sdt_unet_forward "
                         "with options.for_backward = true first");
    if (arena != u->fwd_arena || sdt_arena_mark(arena) < u->fwd_mark)
        return unet_fail(&c, SDT_ERR_INTERNAL,
                         "unet backward: the arena is not the forward's or was rewound below the forward's "
                         "activations; pass the forward's arena unchanged");
    unet_unit *last = &u->units[u->unit_count - 1];
    if (!sdt_tensor_same_shape(d_out, &last->out))
        return unet_fail(&c, SDT_ERR_INVALID_ARGUMENT,
                         "unet backward: d_out must have the forward output's shape [B, %d, H, W]",
                         u->cfg.out_channels);
    if (!sdt_tensor_same_shape(d_context, u->context))
        return unet_fail(&c, SDT_ERR_INVALID_ARGUMENT,
                         "unet backward: d_context must have the context's shape [B, T, %d]", u->cfg.context_dim);
    if (d_y && !u->y)
        return unet_fail(&c, SDT_ERR_INVALID_ARGUMENT,
                         "unet backward: d_y asks for y's gradient but this UNet's forward had no y "
                         "(no label_emb); pass d_y = NULL");
    if (d_y && !sdt_tensor_same_shape(d_y, u->y))
        return unet_fail(&c, SDT_ERR_INVALID_ARGUMENT, "unet backward: d_y must have y's shape [B, %d]",
                         u->cfg.adm_in_channels);
    c.context = u->context;
    c.emb_act = u->emb_act;
    c.channels_last = u->fwd_channels_last; /* the saved activations' layout, whatever the backend says now */
    unet_mark_dependence(u, d_y != NULL);
    if (!hook_pass(&c, SDT_UNET_PASS_BACKWARD_BEGIN, true, u->context, d_context)) return false;
    size_t mark = sdt_arena_mark(arena);
    /* One gradient buffer per unit output that backward will visit (and one for the time embedding). */
    sdt_tensor *d = calloc((size_t)u->unit_count, sizeof *d);
    bool ok = d != NULL;
    if (!ok) unet_fail(&c, SDT_ERR_OUT_OF_MEMORY, "unet backward: out of host memory");
    sdt_tensor d_emb_act;
    if (ok && d_y) {
        ok = unet_zeroed_stat(&c, u->emb_act.shape[0], u->emb_act.shape[1], &d_emb_act, "time_embed");
        c.d_emb_act = &d_emb_act;
    }
    for (int i = 0; ok && i < u->unit_count - 1; i++)
        if (u->units[i].depends) ok = unet_grad_like(&c, &u->units[i].out, &d[i], u->units[i].name);
    if (ok) d[u->unit_count - 1] = *d_out;
    for (int i = u->unit_count - 1; ok && i >= 0; i--) {
        unet_unit *un = &u->units[i];
        if (!un->depends) continue;
        sdt_tensor *d_x = un->input_needs_grad ? &d[i - 1] : NULL;
        sdt_tensor *d_skip = un->skip_needs_grad ? &d[un->skip_from] : NULL;
        ok = unit_backward(&c, un, &d[i], d_x, d_skip, d_context);
    }
    if (ok && d_y) ok = label_emb_backward(&c, d_y);
    if (ok) ok = hook_pass(&c, SDT_UNET_PASS_BACKWARD_END, true, u->context, d_context);
    if (ok && !c.measuring) ok = unet_arena_ok(&c, "backward");
    free(d);
    sdt_arena_rewind(arena, mark);
    return ok;
}

bool sdt_unet_measure(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, int64_t batch, int64_t height,
                      int64_t width, int64_t tokens, bool with_backward, size_t *bytes, sdt_error *error)
{
    const sdt_unet_config *cfg = &u->cfg;
    sdt_unet_options o = opt ? *opt : sdt_unet_options_default();
    o.for_backward = o.for_backward || with_backward;
    int64_t lat_shape[4] = {batch, cfg->in_channels, height, width};
    int64_t ctx_shape[3] = {batch, tokens, cfg->context_dim};
    sdt_tensor lat = sdt_tensor_make(NULL, SDT_F32, be->device, 4, lat_shape);
    sdt_tensor ts = sdt_tensor_make(NULL, SDT_F32, be->device, 1, &batch);
    sdt_tensor ctx = sdt_tensor_make(NULL, o.act_dtype, be->device, 3, ctx_shape);
    int64_t y_shape[2] = {batch, cfg->adm_in_channels};
    sdt_tensor y = sdt_tensor_make(NULL, o.act_dtype, be->device, 2, y_shape);
    const sdt_tensor *y_in = cfg->adm_in_channels > 0 ? &y : NULL;
    sdt_arena a;
    sdt_arena_init_measure(&a, be);
    sdt_tensor out;
    bool ok = sdt_unet_forward(u, be, &a, &o, &lat, &ts, &ctx, y_in, &out, error) &&
              (!with_backward || sdt_unet_backward(u, be, &a, &out, &ctx, y_in ? &y : NULL, error));
    u->have_forward = false; /* nothing real was saved */
    if (ok) *bytes = a.peak;
    return ok;
}
