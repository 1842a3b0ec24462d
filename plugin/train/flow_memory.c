/* flow_memory.c - a transformer-family embedding step's memory from the configs; see flow_memory.h. The pass's
 * sequence is sd_pass's pass_sequence / pass_mmdit and sd_cond's SD3 branch, on a measuring arena: the networks
 * carry only their configs (a measuring forward or backward reads no weight). */
#include "flow_memory.h"

#include <stdlib.h>
#include <string.h>

#include "flux_text.h"
#include "prompt.h"
#include "sd3_text.h"
#include "sd_model.h"

sdt_flow_memory_config sdt_flow_memory_sd35(bool large, int image_side)
{
    sd_config sd = sd_config_preset(SD_FAMILY_SD3); /* SD3.5 Large, CLIP-L and bigG projected, T5-XXL */
    sdt_flow_memory_config c;
    memset(&c, 0, sizeof c);
    c.family = SDT_FLOW_MEMORY_SD3;
    c.mmdit = large ? sd.mmdit : mmdit_config_sd35_medium();
    c.clip_l = sd.clip, c.clip_g = sd.clip2, c.t5 = sd.t5;
    c.dtype = SDT_BF16;
    c.batch = 1, c.latent_h = c.latent_w = image_side / 8, c.t5_len = 256, c.vectors = 1;
    c.t5_trained = true;
    return c;
}

sdt_flow_memory_config sdt_flow_memory_flux(bool dev, int image_side)
{
    sd_config sd = sd_config_preset(SD_FAMILY_SD3); /* the same CLIP-L and T5-XXL */
    sdt_flow_memory_config c;
    memset(&c, 0, sizeof c);
    c.family = SDT_FLOW_MEMORY_FLUX;
    c.flux = dev ? flux_config_dev() : flux_config_schnell();
    c.clip_l = sd.clip, c.t5 = sd.t5;
    c.clip_l.projection_dim = 0, c.clip_l.pooled_without_projection = true; /* CLIPTextModel's pooler_output */
    c.dtype = SDT_BF16;
    c.batch = 1, c.latent_h = c.latent_w = image_side / 8, c.t5_len = 512, c.vectors = 1;
    c.t5_trained = true;
    return c;
}

static bool count_param(void *user, const sdt_param_info *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    *(int64_t *)user += n;
    return true;
}

/* The networks (configs only) and what their forward hands their backward. */
struct flow_nets {
    mmdit_model mmdit;
    flux_model flux;
    mmdit_acts mmdit_acts;
    flux_acts flux_acts;
    sdt_sd3_text_acts sd3_text;
    sdt_flux_text_acts flux_text;
};

/* The tensors one pass holds, in the order sd_pass allocates them. */
typedef struct pass_state {
    const sdt_flow_memory_config *c;
    sdt_backend *be;
    sdt_arena *a;
    clip_text_model l, g;
    t5_encoder t5;
    struct flow_nets *nets; /* heap: the networks and their acts are large structs of views */
    int64_t D;              /* T5's width: the context's, the t5xxl table's */
    sdt_tensor rows[3];     /* the embedding's tables (outside the arena: the trained part's) */
    sdt_tensor cache;       /* T5's cached output for the batch */
    clip_override ov;       /* one slot of the embedding in each encoder, as sdt_pass_measure puts in */
    t5_override ov5;
} pass_state;

static sdt_tensor arena_t(sdt_arena *a, sdt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t s[4] = {d0, d1, d2, d3};
    return sdt_arena_tensor(a, dt, ndim, s);
}

/* The transformer's backward takes f32 gradients of its output, the context and the pooled vector (g[0..2]). */
static void transformer_grads(pass_state *s, const sdt_tensor *out, const sdt_tensor *context, const sdt_tensor *pooled,
                              sdt_tensor g[3])
{
    g[0] = sdt_arena_tensor(s->a, SDT_F32, 4, out->shape);
    g[1] = sdt_arena_tensor(s->a, SDT_F32, 3, context->shape);
    g[2] = sdt_arena_tensor(s->a, SDT_F32, 2, pooled->shape);
}

/* The encoders' backward takes the transformer's f32 gradients in the activation dtype. */
static void grads_in_act_dtype(pass_state *s, sdt_tensor *dctx, sdt_tensor *dpool)
{
    if (s->c->dtype == SDT_F32) return;
    *dctx = sdt_arena_tensor(s->a, s->c->dtype, 3, dctx->shape);
    *dpool = sdt_arena_tensor(s->a, s->c->dtype, 2, dpool->shape);
}

/* T5's part of either family's text inputs, allocated after the CLIP ids as sd_cond does: its ids while the t5xxl
 * table trains (T5 runs), else its cached output for the batch (T5 parked). */
static t5_context_inputs t5_part(pass_state *s, sdt_tensor *tok5)
{
    const sdt_flow_memory_config *c = s->c;
    if (!c->t5_trained) {
        s->cache = arena_t(s->a, c->dtype, 3, c->batch, c->t5_len, s->D, 0);
        return (t5_context_inputs){.hidden = &s->cache};
    }
    *tok5 = arena_t(s->a, SDT_I32, 2, c->batch, c->t5_len, 0, 0);
    return (t5_context_inputs){.tokens = tok5, .rows = &s->rows[2], .overrides = &s->ov5, .n_overrides = 1};
}

/* T5 and its table's gradient while the table trains; NULL (cached, frozen) otherwise. */
static const t5_encoder *t5_running(const pass_state *s)
{
    return s->c->t5_trained ? &s->t5 : NULL;
}

static sdt_tensor *t5_rows(pass_state *s)
{
    return s->c->t5_trained ? &s->rows[2] : NULL;
}

static bool pass_sd3(pass_state *s, const sdt_tensor *noisy, sdt_error *error)
{
    const sdt_flow_memory_config *c = s->c;
    const int64_t B = c->batch;
    sdt_arena *a = s->a;
    sdt_tensor tok_l = arena_t(a, SDT_I32, 2, B, SDT_PROMPT_TOKENS, 0, 0),
               tok_g = arena_t(a, SDT_I32, 2, B, SDT_PROMPT_TOKENS, 0, 0), tok5;
    sdt_sd3_text_inputs ti = {.tokens_l = &tok_l,
                              .tokens_g = &tok_g,
                              .rows_l = &s->rows[0],
                              .rows_g = &s->rows[1],
                              .overrides = &s->ov,
                              .n_overrides = 1,
                              .t5 = t5_part(s, &tok5),
                              .joint_dim = c->mmdit.context_dim,
                              .act_dtype = c->dtype};
    sdt_sd3_text_acts *text = &s->nets->sd3_text;
    if (!sdt_sd3_text_forward(&s->l, &s->g, t5_running(s), s->be, a, &ti, text, error)) return false;
    float ts[64] = {0};
    mmdit_inputs mi = {noisy, ts, &text->context, &text->pooled, c->checkpointing, c->dtype};
    mmdit_acts *acts = &s->nets->mmdit_acts;
    if (!mmdit_forward(&s->nets->mmdit, s->be, a, &mi, acts, error)) return false;
    sdt_tensor g[3];
    transformer_grads(s, &acts->out, &text->context, &text->pooled, g);
    if (!mmdit_backward(&s->nets->mmdit, s->be, a, acts, &g[0], &g[1], &g[2], error)) return false;
    grads_in_act_dtype(s, &g[1], &g[2]);
    return sdt_sd3_text_backward(&s->l, &s->g, t5_running(s), s->be, a, text, &g[1], &g[2], &s->rows[0], &s->rows[1],
                                 t5_rows(s), error);
}

static bool pass_flux(pass_state *s, const sdt_tensor *noisy, sdt_error *error)
{
    const sdt_flow_memory_config *c = s->c;
    const int64_t B = c->batch;
    sdt_arena *a = s->a;
    sdt_tensor tok_l = arena_t(a, SDT_I32, 2, B, SDT_PROMPT_TOKENS, 0, 0), tok5;
    sdt_flux_text_inputs ti = {.tokens_l = &tok_l,
                               .rows_l = &s->rows[0],
                               .overrides = &s->ov,
                               .n_overrides = 1,
                               .t5 = t5_part(s, &tok5),
                               .act_dtype = c->dtype};
    sdt_flux_text_acts *text = &s->nets->flux_text;
    if (!sdt_flux_text_forward(&s->l, t5_running(s), s->be, a, &ti, text, error)) return false;
    float ts[64] = {0};
    flux_inputs fi = {noisy, ts, ts, &text->context, &text->pooled, c->checkpointing, c->dtype};
    flux_acts *acts = &s->nets->flux_acts;
    if (!flux_forward(&s->nets->flux, s->be, a, &fi, acts, error)) return false;
    sdt_tensor g[3];
    transformer_grads(s, &acts->out, &text->context, &text->pooled, g);
    if (!flux_backward(&s->nets->flux, s->be, a, acts, &g[0], &g[1], &g[2], error)) return false;
    grads_in_act_dtype(s, &g[1], &g[2]);
    return sdt_flux_text_backward(&s->l, t5_running(s), s->be, a, text, &g[1], &g[2], &s->rows[0], t5_rows(s), error);
}

bool sdt_flow_memory_estimate(const sdt_flow_memory_config *c, sdt_backend *be, sdt_flow_memory *out, sdt_error *error)
{
    const bool sd3 = c->family == SDT_FLOW_MEMORY_SD3;
    if (c->batch < 1 || c->batch > 64 || c->latent_h < 1 || c->latent_w < 1 || c->t5_len < 1 || c->vectors < 1)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flow_memory: batch %d (1..64), latent %d x %d, T5 length %d and %d vectors must be positive",
                        c->batch, c->latent_h, c->latent_w, c->t5_len, c->vectors);
    if ((sd3 && !mmdit_config_check(&c->mmdit, error)) || (!sd3 && !flux_config_check(&c->flux, error)) ||
        !t5_config_check(&c->t5, error))
        return false;
    pass_state s;
    memset(&s, 0, sizeof s);
    s.nets = calloc(1, sizeof *s.nets);
    if (!s.nets) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flow_memory: out of host memory");
    s.c = c, s.be = be;
    s.l.cfg = c->clip_l, s.g.cfg = c->clip_g, s.t5.cfg = c->t5;
    s.D = c->t5.d_model;
    s.nets->mmdit.cfg = c->mmdit, s.nets->flux.cfg = c->flux;
    for (int l = 0; sd3 && l < c->mmdit.layers; l++) s.nets->mmdit.img[l].dual = l < c->mmdit.dual_layers;
    const int64_t widths[3] = {c->clip_l.width, sd3 ? c->clip_g.width : 0, s.D};
    for (int t = 0; t < 3; t++) {
        int64_t shape[2] = {c->vectors, widths[t]};
        s.rows[t] = sdt_tensor_make(NULL, SDT_F32, be->device, 2, shape);
    }
    s.ov = (clip_override){0, 1, 0}, s.ov5 = (t5_override){0, 0, 0};
    /* weights: the transformer and CLIP always, T5 while it runs (a cached output frees it); the VAE is parked */
    int64_t params = 0, t5_count = 0;
    if (sd3) {
        mmdit_params(&c->mmdit, count_param, &params);
        clip_params(&c->clip_g, count_param, &params);
    } else {
        flux_params(&c->flux, count_param, &params);
    }
    clip_params(&c->clip_l, count_param, &params);
    t5_params(&c->t5, count_param, &t5_count);
    out->weights = (size_t)(params + (c->t5_trained ? t5_count : 0)) * sdt_dtype_size(c->dtype);
    /* the rows that train: f32 values, gradient and AdamW's two moments */
    const int64_t row_values = (int64_t)c->vectors * (widths[0] + widths[1] + (c->t5_trained ? widths[2] : 0));
    out->trained = (size_t)row_values * 4 * sizeof(float);
    /* activations: sd_pass's tensors, then the family's pass */
    sdt_arena a;
    sdt_arena_init_measure(&a, be);
    s.a = &a;
    const int64_t B = c->batch, C = sd3 ? c->mmdit.in_channels : c->flux.in_channels;
    sdt_tensor noisy = arena_t(&a, c->dtype, 4, B, C, c->latent_h, c->latent_w);
    arena_t(&a, SDT_F32, 4, B, C, c->latent_h, c->latent_w); /* the target */
    arena_t(&a, SDT_F32, 1, B, 0, 0, 0);                     /* the timesteps */
    bool ok = sd3 ? pass_sd3(&s, &noisy, error) : pass_flux(&s, &noisy, error);
    free(s.nets);
    if (!ok) return false;
    out->activations = a.peak;
    out->total = out->weights + out->activations + out->trained;
    return true;
}
