/* mmdit.c - the SD3 / SD3.5 MMDiT forward and backward to its conditioning; see mmdit.h. The streams' code is
 * dit_blocks' (shared with Flux); here the patch embedding, the conditioning and the block order.
 *
 * Per-batch vectors (the adaLN shift, scale and gate) reach every token through the existing ops: the
 * modulated LayerNorm is layernorm_forward per batch element with gamma = 1 + scale, beta = shift (its
 * backward gives d scale and d shift as dgamma and dbeta); a gate is broadcast over the tokens by a linear
 * layer of a ones column (x [N, 1] times gate as a [H, 1] weight) and multiplied by gated_activation
 * (identity). A fused modulation op is a later speed-up. */
#include "mmdit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "model_util.h"

#define MODULE "mmdit"
#define LN_EPS 1e-6f

/* ---------------------------------------------------------------- configs */

static mmdit_config preset(int layers, int heads, int pos_max, bool qk_norm, int dual)
{
    mmdit_config c = {.layers = layers,
                      .heads = heads,
                      .head_dim = 64,
                      .in_channels = 16,
                      .patch = 2,
                      .pos_max = pos_max,
                      .context_dim = 4096,
                      .pooled_dim = 2048,
                      .mlp_ratio = 4,
                      .qk_norm = qk_norm,
                      .dual_layers = dual};
    return c;
}

mmdit_config mmdit_config_sd35_large(void)
{
    return preset(38, 38, 192, true, 0);
}
mmdit_config mmdit_config_sd35_medium(void)
{
    return preset(24, 24, 384, true, 13);
}
mmdit_config mmdit_config_sd3_medium(void)
{
    return preset(24, 24, 192, false, 0);
}

mmdit_config mmdit_config_tiny(void)
{
    mmdit_config c = {.layers = 3,
                      .heads = 2,
                      .head_dim = 8,
                      .in_channels = 4,
                      .patch = 2,
                      .pos_max = 6,
                      .context_dim = 24,
                      .pooled_dim = 12,
                      .mlp_ratio = 4,
                      .qk_norm = true,
                      .dual_layers = 0};
    return c;
}

bool mmdit_config_check(const mmdit_config *c, sdt_error *error)
{
    if (c->layers < 1 || c->layers > MMDIT_MAX_LAYERS || c->heads < 1 || c->head_dim < 1 || c->in_channels < 1 ||
        c->patch < 1 || c->pos_max < 1 || c->context_dim < 1 || c->pooled_dim < 1 || c->mlp_ratio < 1 ||
        c->dual_layers < 0 || c->dual_layers > c->layers)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "mmdit: config layers %d heads %d head_dim %d channels %d patch %d pos_max %d context %d "
                        "pooled %d is not a valid MMDiT (sizes positive, 1..%d blocks)",
                        c->layers, c->heads, c->head_dim, c->in_channels, c->patch, c->pos_max, c->context_dim,
                        c->pooled_dim, MMDIT_MAX_LAYERS);
    return true;
}

static int count_layers(const sdt_weights *w, const char *P)
{
    int n = 0;
    while (n < MMDIT_MAX_LAYERS + 1 && mu_has(w, "%stransformer_blocks.%d.norm1.linear.weight", P, n)) n++;
    return n;
}

bool mmdit_config_detect(const sdt_weights *w, const char *prefix, mmdit_config *cfg, sdt_error *error)
{
    const char *P = prefix ? prefix : "";
    if (strlen(P) >= MMDIT_PREFIX_MAX)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "mmdit: key prefix \"%s\" is longer than %d characters", P,
                        MMDIT_PREFIX_MAX - 1);
    const sdt_tensor *ctx = mu_get(w, "%scontext_embedder.weight", P);
    const sdt_tensor *patch = mu_get(w, "%spos_embed.proj.weight", P);
    const sdt_tensor *pos = mu_get(w, "%spos_embed.pos_embed", P);
    const sdt_tensor *pooled = mu_get(w, "%stime_text_embed.text_embedder.linear_1.weight", P);
    const sdt_tensor *nq = mu_get(w, "%stransformer_blocks.0.attn.norm_q.weight", P);
    const sdt_tensor *ff = mu_get(w, "%stransformer_blocks.0.ff.net.0.proj.weight", P);
    if (!ctx || ctx->ndim != 2 || !patch || patch->ndim != 4 || !pooled || pooled->ndim != 2 || !ff || ff->ndim != 2)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: no SD3 MMDiT transformer found (expected %scontext_embedder.weight, "
                        "%spos_embed.proj.weight, %stime_text_embed.text_embedder.linear_1.weight and "
                        "%stransformer_blocks.0.ff.net.0.proj.weight in diffusers' names); give an SD3 / SD3.5 "
                        "diffusers transformer file",
                        sdt_weights_path(w), P, P, P, P);
    mmdit_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.prefix, sizeof c.prefix, "%s", P);
    const int64_t H = ctx->shape[0];
    c.context_dim = (int)ctx->shape[1];
    c.pooled_dim = (int)pooled->shape[1];
    c.in_channels = (int)patch->shape[1];
    c.patch = (int)patch->shape[2];
    c.qk_norm = nq != NULL;
    c.head_dim = nq && nq->ndim == 1 ? (int)nq->shape[0] : 64;
    c.heads = c.head_dim > 0 && H % c.head_dim == 0 ? (int)(H / c.head_dim) : 0;
    c.mlp_ratio = H > 0 && ff->shape[0] % H == 0 ? (int)(ff->shape[0] / H) : 0;
    c.layers = count_layers(w, P);
    if (pos && pos->ndim == 3 && pos->shape[2] == H) {
        int64_t side = (int64_t)llround(sqrt((double)pos->shape[1]));
        c.pos_max = side * side == pos->shape[1] ? (int)side : 0;
    }
    while (c.dual_layers < c.layers && mu_has(w, "%stransformer_blocks.%d.attn2.to_q.weight", P, c.dual_layers))
        c.dual_layers++;
    if (c.heads == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the hidden width %lld (rows of %scontext_embedder.weight) is not a multiple of the head "
                        "width %d (%s); the file is damaged or not an SD3 transformer",
                        sdt_weights_path(w), (long long)H, P, c.head_dim,
                        nq ? "from attn.norm_q.weight" : "SD3's 64: without attn.norm_q the file does not store it");
    if (c.mlp_ratio == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: %stransformer_blocks.0.ff.net.0.proj.weight has %lld rows, not a multiple of the hidden "
                        "width %lld; the file is damaged or not an SD3 transformer",
                        sdt_weights_path(w), P, (long long)ff->shape[0], (long long)H);
    if (c.pos_max == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: %spos_embed.pos_embed is %s; an SD3 transformer stores its position table as "
                        "[1, P*P, %lld]",
                        sdt_weights_path(w), P, pos ? "not a square table of the hidden width" : "missing",
                        (long long)H);
    if (!mmdit_config_check(&c, error)) return false;
    *cfg = c;
    return true;
}

/* ---------------------------------------------------------------- parameters */

bool mmdit_params(const mmdit_config *c, sdt_param_visitor v, void *u)
{
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, C = c->in_channels, p = c->patch, F = H * c->mlp_ratio;
    int64_t pw[4] = {H, C, p, p}, pb[1] = {H}, pos[3] = {1, (int64_t)c->pos_max * c->pos_max, H}, hd[1] = {c->head_dim};
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 1.0f / sqrtf((float)(C * p * p)), 4, pw, "%spos_embed.proj.weight", P) ||
        !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, pb, "%spos_embed.proj.bias", P) ||
        !mu_emit(v, u, SDT_INIT_NORMAL, 1.0f, 3, pos, "%spos_embed.pos_embed", P) ||
        !dit_emit_linear(v, u, H, MMDIT_TIME_DIM, P, "time_text_embed.timestep_embedder.linear_1") ||
        !dit_emit_linear(v, u, H, H, P, "time_text_embed.timestep_embedder.linear_2") ||
        !dit_emit_linear(v, u, H, c->pooled_dim, P, "time_text_embed.text_embedder.linear_1") ||
        !dit_emit_linear(v, u, H, H, P, "time_text_embed.text_embedder.linear_2") ||
        !dit_emit_linear(v, u, H, c->context_dim, P, "context_embedder"))
        return false;
    for (int l = 0; l < c->layers; l++) {
        const bool pre_only = l == c->layers - 1;
        const char *B = "transformer_blocks";
        const bool dual = l < c->dual_layers;
        if (!dit_emit_linear(v, u, (dual ? 9 : 6) * H, H, P, "%s.%d.norm1.linear", B, l) ||
            !dit_emit_linear(v, u, (pre_only ? 2 : 6) * H, H, P, "%s.%d.norm1_context.linear", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_q", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_k", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_v", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.add_q_proj", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.add_k_proj", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.add_v_proj", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_out.0", B, l) ||
            (!pre_only && !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_add_out", B, l)))
            return false;
        if (c->qk_norm && (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_q.weight", P, B, l) ||
                           !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_k.weight", P, B, l) ||
                           !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_added_q.weight", P, B, l) ||
                           !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_added_k.weight", P, B, l)))
            return false;
        if (dual && (!dit_emit_linear(v, u, H, H, P, "%s.%d.attn2.to_q", B, l) ||
                     !dit_emit_linear(v, u, H, H, P, "%s.%d.attn2.to_k", B, l) ||
                     !dit_emit_linear(v, u, H, H, P, "%s.%d.attn2.to_v", B, l) ||
                     !dit_emit_linear(v, u, H, H, P, "%s.%d.attn2.to_out.0", B, l)))
            return false;
        if (dual && c->qk_norm &&
            (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn2.norm_q.weight", P, B, l) ||
             !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn2.norm_k.weight", P, B, l)))
            return false;
        if (!dit_emit_linear(v, u, F, H, P, "%s.%d.ff.net.0.proj", B, l) ||
            !dit_emit_linear(v, u, H, F, P, "%s.%d.ff.net.2", B, l))
            return false;
        if (!pre_only && (!dit_emit_linear(v, u, F, H, P, "%s.%d.ff_context.net.0.proj", B, l) ||
                          !dit_emit_linear(v, u, H, F, P, "%s.%d.ff_context.net.2", B, l)))
            return false;
    }
    return dit_emit_linear(v, u, 2 * H, H, P, "norm_out.linear") && dit_emit_linear(v, u, p * p * C, H, P, "proj_out");
}

/* ---------------------------------------------------------------- loading */

static bool need(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                 const char *key_fmt, ...) __attribute__((format(printf, 6, 7)));
static bool need(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                 const char *key_fmt, ...)
{
    va_list ap;
    va_start(ap, key_fmt);
    bool ok = mu_vrequire_model(w, out, ndim, shape, error,
                                "the SD3 transformer file is incomplete (truncated, or another model); use a complete "
                                "diffusers SD3 / SD3.5 transformer",
                                key_fmt, ap);
    va_end(ap);
    return ok;
}

static bool need_linear(const sdt_weights *w, mmdit_linear *L, int64_t out, int64_t in, sdt_error *error, const char *P,
                        const char *name, int l)
{
    char full[200];
    if (l >= 0)
        snprintf(full, sizeof full, "%stransformer_blocks.%d.%s", P, l, name);
    else
        snprintf(full, sizeof full, "%s%s", P, name);
    int64_t ws[2] = {out, in}, bs[1] = {out};
    return need(w, &L->w, 2, ws, error, "%s.weight", full) && need(w, &L->b, 1, bs, error, "%s.bias", full);
}

static bool load_block(mmdit_model *m, const sdt_weights *w, int l, sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    const bool pre_only = l == c->layers - 1;
    mmdit_stream_weights *x = &m->img[l], *t = &m->ctx[l];
    int64_t hd[1] = {c->head_dim};
    x->dual = l < c->dual_layers;
    bool ok = need_linear(w, &x->mod, (x->dual ? 9 : 6) * H, H, error, P, "norm1.linear", l) &&
              need_linear(w, &t->mod, (pre_only ? 2 : 6) * H, H, error, P, "norm1_context.linear", l) &&
              need_linear(w, &x->q, H, H, error, P, "attn.to_q", l) &&
              need_linear(w, &x->k, H, H, error, P, "attn.to_k", l) &&
              need_linear(w, &x->v, H, H, error, P, "attn.to_v", l) &&
              need_linear(w, &x->out, H, H, error, P, "attn.to_out.0", l) &&
              need_linear(w, &t->q, H, H, error, P, "attn.add_q_proj", l) &&
              need_linear(w, &t->k, H, H, error, P, "attn.add_k_proj", l) &&
              need_linear(w, &t->v, H, H, error, P, "attn.add_v_proj", l) &&
              need_linear(w, &x->ff1, F, H, error, P, "ff.net.0.proj", l) &&
              need_linear(w, &x->ff2, H, F, error, P, "ff.net.2", l);
    if (ok && !pre_only)
        ok = need_linear(w, &t->out, H, H, error, P, "attn.to_add_out", l) &&
             need_linear(w, &t->ff1, F, H, error, P, "ff_context.net.0.proj", l) &&
             need_linear(w, &t->ff2, H, F, error, P, "ff_context.net.2", l);
    if (ok && pre_only && mu_has(w, "%stransformer_blocks.%d.attn.to_add_out.weight", P, l))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the last block (%d) has %stransformer_blocks.%d.attn.to_add_out.weight, but an SD3 "
                        "transformer's last block is context_pre_only; the block count or the file is wrong",
                        sdt_weights_path(w), l, P, l);
    if (ok && c->qk_norm)
        ok = need(w, &x->norm_q, 1, hd, error, "%stransformer_blocks.%d.attn.norm_q.weight", P, l) &&
             need(w, &x->norm_k, 1, hd, error, "%stransformer_blocks.%d.attn.norm_k.weight", P, l) &&
             need(w, &t->norm_q, 1, hd, error, "%stransformer_blocks.%d.attn.norm_added_q.weight", P, l) &&
             need(w, &t->norm_k, 1, hd, error, "%stransformer_blocks.%d.attn.norm_added_k.weight", P, l);
    if (ok && x->dual)
        ok = need_linear(w, &x->q2, H, H, error, P, "attn2.to_q", l) &&
             need_linear(w, &x->k2, H, H, error, P, "attn2.to_k", l) &&
             need_linear(w, &x->v2, H, H, error, P, "attn2.to_v", l) &&
             need_linear(w, &x->out2, H, H, error, P, "attn2.to_out.0", l);
    if (ok && x->dual && c->qk_norm)
        ok = need(w, &x->norm_q2, 1, hd, error, "%stransformer_blocks.%d.attn2.norm_q.weight", P, l) &&
             need(w, &x->norm_k2, 1, hd, error, "%stransformer_blocks.%d.attn2.norm_k.weight", P, l);
    return ok;
}

bool mmdit_load(mmdit_model *m, const mmdit_config *cfg, const sdt_weights *w, sdt_error *error)
{
    if (!mmdit_config_check(cfg, error)) return false;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    const mmdit_config *c = cfg;
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, C = c->in_channels, p = c->patch;
    int64_t pw[4] = {H, C, p, p}, pb[1] = {H}, pos[3] = {1, (int64_t)c->pos_max * c->pos_max, H};
    bool ok = need(w, &m->patch_w, 4, pw, error, "%spos_embed.proj.weight", P) &&
              need(w, &m->patch_b, 1, pb, error, "%spos_embed.proj.bias", P) &&
              need(w, &m->pos_table, 3, pos, error, "%spos_embed.pos_embed", P) &&
              need_linear(w, &m->t1, H, MMDIT_TIME_DIM, error, P, "time_text_embed.timestep_embedder.linear_1", -1) &&
              need_linear(w, &m->t2, H, H, error, P, "time_text_embed.timestep_embedder.linear_2", -1) &&
              need_linear(w, &m->p1, H, c->pooled_dim, error, P, "time_text_embed.text_embedder.linear_1", -1) &&
              need_linear(w, &m->p2, H, H, error, P, "time_text_embed.text_embedder.linear_2", -1) &&
              need_linear(w, &m->ctx_in, H, c->context_dim, error, P, "context_embedder", -1) &&
              need_linear(w, &m->norm_out, 2 * H, H, error, P, "norm_out.linear", -1) &&
              need_linear(w, &m->proj_out, p * p * C, H, error, P, "proj_out", -1);
    for (int l = 0; ok && l < c->layers; l++) ok = load_block(m, w, l, error);
    return ok;
}

/* ---------------------------------------------------------------- helpers */

#define TRY(call) MU_TRY(be, error, MODULE, call)

static dit_dims block_dims(const mmdit_config *c)
{
    dit_dims d = {.heads = c->heads, .head_dim = c->head_dim, .qk_norm = c->qk_norm, .mlp_ratio = c->mlp_ratio};
    return d;
}

static dit_env block_env(const mmdit_acts *a)
{
    dit_env e = {.batch = a->batch, .silu_temb = a->silu_temb, .ones = a->ones};
    return e;
}

/* ---------------------------------------------------------------- forward */

static bool arena_ok(const sdt_arena *ar, const char *what, sdt_error *error)
{
    if (sdt_arena_fits(ar)) return true;
    return sdt_fail(error, ar->error.code, "mmdit, %s: %s", what, ar->error.message);
}

static bool check_inputs(const mmdit_model *m, const mmdit_inputs *in, sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const sdt_tensor *x = in->latent, *t = in->context, *p = in->pooled;
    if (!x || x->ndim != 4 || x->shape[0] < 1 || x->shape[1] != c->in_channels || x->channels_last)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: the latent must be [batch, %d, height, width] (NCHW)",
                        c->in_channels);
    const int64_t B = x->shape[0], hmax = (int64_t)c->pos_max * c->patch;
    if (x->shape[2] < c->patch || x->shape[3] < c->patch || x->shape[2] % c->patch || x->shape[3] % c->patch ||
        x->shape[2] > hmax || x->shape[3] > hmax)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "mmdit: a %lld x %lld latent does not fit this transformer: sides must be multiples of %d and "
                        "at most %lld (pos_embed_max_size %d x patch %d)",
                        (long long)x->shape[2], (long long)x->shape[3], c->patch, (long long)hmax, c->pos_max,
                        c->patch);
    if (!t || t->ndim != 3 || t->shape[0] != B || t->shape[1] < 1 || t->shape[2] != c->context_dim ||
        t->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: the context must be a float tensor [%lld, tokens, %d]",
                        (long long)B, c->context_dim);
    if (!p || p->ndim != 2 || p->shape[0] != B || p->shape[1] != c->pooled_dim || p->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: the pooled projection must be a float tensor [%lld, %d]",
                        (long long)B, c->pooled_dim);
    if (!in->timesteps) return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: no timesteps given");
    if (in->act_dtype != SDT_F32 && in->act_dtype != SDT_F16 && in->act_dtype != SDT_BF16)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "mmdit: the activation dtype %s is not one the transformer stores; pass f32, f16 or bf16",
                        sdt_dtype_name(in->act_dtype));
    return true;
}

/* tok [B, gh*gw, p*p*C] <-> out [B, C, gh*p, gw*p] on the host (the latent is small), either direction. */
static void unpatchify_index(const mmdit_config *c, int64_t B, int64_t gh, int64_t gw, float *tok, float *img,
                             bool to_img)
{
    const int64_t p = c->patch, C = c->in_channels, W = gw * p, HH = gh * p, D = p * p * C;
    for (int64_t b = 0; b < B; b++)
        for (int64_t y = 0; y < gh; y++)
            for (int64_t x = 0; x < gw; x++)
                for (int64_t py = 0; py < p; py++)
                    for (int64_t px = 0; px < p; px++)
                        for (int64_t ch = 0; ch < C; ch++) {
                            float *tv = &tok[(b * gh * gw + y * gw + x) * D + (py * p + px) * C + ch];
                            float *iv = &img[((b * C + ch) * HH + y * p + py) * W + x * p + px];
                            if (to_img)
                                *iv = *tv;
                            else
                                *tv = *iv;
                        }
}

/* Block l's activations: its own, or (checkpointing) the work set, writing its output where the forward keeps it
 * (kept_out) or into the work set's own x_out (backward's recompute). */
static void block_bind(const mmdit_model *m, const mmdit_acts *a, int l, bool kept_out, dit_stream_acts *si,
                       dit_stream_acts *sc, sdt_tensor *J)
{
    const mmdit_config *c = &m->cfg;
    if (!a->checkpointing) {
        *si = a->img[l], *sc = a->ctx[l];
        memcpy(J, a->joint[l], 5 * sizeof *J);
        return;
    }
    const int64_t H = (int64_t)c->heads * c->head_dim;
    *si = dit_stream_work(&a->work_img, m->img[l].dual ? 9 : 6, H);
    *sc = dit_stream_work(&a->work_ctx, l == c->layers - 1 ? 2 : 6, H);
    if (kept_out) si->x_out = a->img[l].x_out, sc->x_out = a->ctx[l].x_out;
    memcpy(J, a->work_joint, 5 * sizeof *J);
}

/* One joint block: both streams' pre parts, the joint attention, the post parts (none for a pre_only text). */
static bool block_forward(const mmdit_model *m, sdt_backend *be, const dit_env *env, int l, dit_stream_acts *si,
                          dit_stream_acts *sc, sdt_tensor *J, const sdt_tensor *xi, const sdt_tensor *xc,
                          dit_fwd_tmp *t, int64_t N, sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const dit_dims dd = block_dims(c);
    const bool pre_only = l == c->layers - 1;
    if (!dit_stream_pre(&m->img[l], &dd, be, env, si, xi, &t->n_img, &t->ones_h, J, 0, false, error) ||
        !dit_stream_pre(&m->ctx[l], &dd, be, env, sc, xc, &t->n_ctx, &t->ones_h, J, N, pre_only, error))
        return false;
    TRY(be->attention_forward(be, &J[JO], &J[JLSE], &J[JQ], &J[JK], &J[JV], c->heads, false));
    if (!dit_stream_post(&m->img[l], &dd, be, env, si, xi, &t->n_img, &t->a_img, t, J, 0, error)) return false;
    return pre_only || dit_stream_post(&m->ctx[l], &dd, be, env, sc, xc, &t->n_ctx, &t->a_ctx, t, J, N, error);
}

static bool run_forward(const mmdit_model *m, sdt_backend *be, const mmdit_inputs *in, mmdit_acts *a, dit_fwd_tmp *t,
                        sdt_tensor *conv, sdt_tensor *tproj, sdt_tensor *th, sdt_tensor *tt, sdt_tensor *tp,
                        sdt_tensor *tok, sdt_tensor *tsteps, sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const int64_t B = a->batch, N = a->tokens, H = (int64_t)c->heads * c->head_dim;
    /* ones for broadcasting and for 1 + scale */
    const int64_t M = a->ones.shape[0];
    float *host = malloc((size_t)(M > B ? M : B) * sizeof(float));
    if (!host) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "mmdit: out of memory");
    for (int64_t i = 0; i < M; i++) host[i] = 1.0f;
    bool ok = dit_upload_f32(be, &a->ones, host, error);
    for (int64_t i = 0; i < B; i++) host[i] = in->timesteps[i];
    ok = ok && dit_upload_f32(be, tsteps, host, error);
    free(host);
    if (!ok) return false;
    /* conditioning: temb = t2(silu(t1(sinusoid))) + p2(silu(p1(pooled))) */
    TRY(be->timestep_embedding(be, tproj, tsteps, true, 0.0f, 10000.0f));
    TRY(be->linear_forward(be, th, tproj, &m->t1.w, &m->t1.b));
    TRY(be->activation_forward(be, tt, th, SDT_ACT_SILU));
    TRY(be->linear_forward(be, th, tt, &m->t2.w, &m->t2.b));
    TRY(be->linear_forward(be, &a->pooled_h, in->pooled, &m->p1.w, &m->p1.b));
    TRY(be->activation_forward(be, &a->pooled_a, &a->pooled_h, SDT_ACT_SILU));
    TRY(be->linear_forward(be, tp, &a->pooled_a, &m->p2.w, &m->p2.b));
    TRY(be->add_forward(be, &a->temb, th, tp));
    TRY(be->activation_forward(be, &a->silu_temb, &a->temb, SDT_ACT_SILU));
    /* streams */
    TRY(be->linear_forward(be, &a->ctx0, in->context, &m->ctx_in.w, &m->ctx_in.b));
    TRY(be->conv2d_forward(be, conv, in->latent, &m->patch_w, &m->patch_b, c->patch, 0));
    sdt_tensor conv3 = mu_reshape3(conv, B, H, N);
    TRY(be->transpose_forward(be, &a->img0, &conv3));
    const int64_t P = c->pos_max, top = (P - a->grid_h) / 2, left = (P - a->grid_w) / 2;
    sdt_tensor table = mu_reshape2(&m->pos_table, P * P, H);
    for (int b = 0; b < B; b++)
        for (int64_t y = 0; y < a->grid_h; y++) {
            sdt_tensor rows = dit_joint_rows(&a->img0, b, y * a->grid_w, a->grid_w),
                       pos = mu_rows(&table, (top + y) * P + left, a->grid_w);
            TRY(be->add_forward(be, &rows, &rows, &pos));
        }
    const dit_env env = block_env(a);
    for (int l = 0; l < c->layers; l++) {
        const sdt_tensor *xi = l ? &a->img[l - 1].x_out : &a->img0, *xc = l ? &a->ctx[l - 1].x_out : &a->ctx0;
        dit_stream_acts si, sc;
        sdt_tensor J[5];
        block_bind(m, a, l, true, &si, &sc, J);
        if (!block_forward(m, be, &env, l, &si, &sc, J, xi, xc, t, N, error)) return false;
    }
    /* output: continuous adaLN (scale, shift), proj_out, unpatchify */
    const sdt_tensor *x_last = &a->img[c->layers - 1].x_out;
    TRY(be->linear_forward(be, &a->out_mod, &a->silu_temb, &m->norm_out.w, &m->norm_out.b));
    if (!dit_make_gamma(be, &a->out_gamma, &a->out_mod, H, 0, &t->ones_h, error) ||
        !dit_modulated_ln(be, &t->n_img, &a->out_mean, &a->out_rstd, x_last, &a->out_gamma, &a->out_mod, 1, error))
        return false;
    TRY(be->linear_forward(be, tok, &t->n_img, &m->proj_out.w, &m->proj_out.b));
    const size_t n_out = (size_t)sdt_tensor_numel(&a->out);
    float *ht = malloc(n_out * sizeof(float)), *hi = malloc(n_out * sizeof(float));
    ok = ht && hi;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "mmdit: out of memory unpatchifying the output");
    if (ok && be->download(be, ht, tok->data, n_out * sizeof(float)) != 0)
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    if (ok) unpatchify_index(c, B, a->grid_h, a->grid_w, ht, hi, true);
    ok = ok && dit_upload_f32(be, &a->out, hi, error);
    free(ht), free(hi);
    return ok;
}

/* A block forward's temporaries (the forward's, and backward's recompute when checkpointing). */
static dit_fwd_tmp fwd_tmp_alloc(sdt_arena *arena, const mmdit_acts *a, int64_t H, int64_t F)
{
    const int64_t B = a->batch, N = a->tokens, T = a->ctx_tokens;
    const sdt_dtype dt = a->act_dtype;
    dit_fwd_tmp t;
    t.n_img = mu_alloc(arena, dt, 3, B, N, H, 0);
    t.n_ctx = mu_alloc(arena, dt, 3, B, T, H, 0);
    t.a_img = mu_alloc(arena, dt, 3, B, N, F, 0);
    t.a_ctx = mu_alloc(arena, dt, 3, B, T, F, 0);
    t.tmp = mu_alloc(arena, dt, 2, a->ones.shape[0], H, 0, 0); /* a gate broadcast: ones times gate, exact in dt */
    sdt_tensor o2 = mu_rows(&a->ones, 0, H);
    int64_t hs[1] = {H};
    t.ones_h = mu_reshape(&o2, 1, hs);
    return t;
}

bool mmdit_forward(const mmdit_model *m, sdt_backend *be, sdt_arena *arena, const mmdit_inputs *in, mmdit_acts *a,
                   sdt_error *error)
{
    if (!check_inputs(m, in, error)) return false;
    const mmdit_config *c = &m->cfg;
    memset(a, 0, sizeof(*a));
    const int64_t B = in->latent->shape[0], H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    a->batch = (int)B;
    a->grid_h = (int)(in->latent->shape[2] / c->patch);
    a->grid_w = (int)(in->latent->shape[3] / c->patch);
    a->tokens = a->grid_h * a->grid_w;
    a->ctx_tokens = (int)in->context->shape[1];
    a->context = *in->context;
    a->pooled = *in->pooled;
    /* The activation dtype (the run's, as the UNet's and T5's) for everything per token and for the modulation
     * (silu(temb) on, as the UNet's time embedding: the adaLN linears then run in the weights' dtype); f32 for
     * the conditioning MLPs' small [B, H] vectors, the norms' statistics, the logsumexp and the prediction. */
    const sdt_dtype dt = in->act_dtype;
    a->act_dtype = dt;
    const int64_t N = a->tokens, T = a->ctx_tokens, S = N + T;
    int64_t M = N > T ? N : T;
    if (H > M) M = H;
    a->ones = mu_alloc(arena, dt, 2, M, 1, 0, 0);
    a->pooled_h = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->pooled_a = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->temb = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->silu_temb = mu_alloc(arena, dt, 2, B, H, 0, 0);
    a->ctx0 = mu_alloc(arena, dt, 3, B, T, H, 0);
    a->img0 = mu_alloc(arena, dt, 3, B, N, H, 0);
    const dit_dims dd = block_dims(c);
    a->checkpointing = in->checkpointing;
    for (int l = 0; l < c->layers; l++) {
        if (a->checkpointing) { /* the block's outputs: the next block's inputs (the last text stream has none) */
            a->img[l].x_out = mu_alloc(arena, dt, 3, B, N, H, 0);
            if (l < c->layers - 1) a->ctx[l].x_out = mu_alloc(arena, dt, 3, B, T, H, 0);
            continue;
        }
        dit_stream_alloc(&a->img[l], &dd, arena, B, N, false, l < c->dual_layers, dt);
        dit_stream_alloc(&a->ctx[l], &dd, arena, B, T, l == c->layers - 1, false, dt);
        for (int j = JQ; j <= JO; j++) a->joint[l][j] = mu_alloc(arena, dt, 3, B, S, H, 0);
        a->joint[l][JLSE] = mu_alloc(arena, SDT_F32, 3, B, c->heads, S, 0);
    }
    if (a->checkpointing) { /* one block's activations, the largest block's shapes */
        dit_stream_alloc(&a->work_img, &dd, arena, B, N, false, c->dual_layers > 0, dt);
        dit_stream_alloc(&a->work_ctx, &dd, arena, B, T, false, false, dt);
        for (int j = JQ; j <= JO; j++) a->work_joint[j] = mu_alloc(arena, dt, 3, B, S, H, 0);
        a->work_joint[JLSE] = mu_alloc(arena, SDT_F32, 3, B, c->heads, S, 0);
    }
    a->out_mod = mu_alloc(arena, dt, 2, B, 2 * H, 0, 0);
    a->out_gamma = mu_alloc(arena, dt, 2, B, H, 0, 0);
    a->out_mean = mu_alloc(arena, SDT_F32, 1, B * N, 0, 0, 0);
    a->out_rstd = mu_alloc(arena, SDT_F32, 1, B * N, 0, 0, 0);
    a->out = mu_alloc(arena, SDT_F32, 4, B, c->in_channels, in->latent->shape[2], in->latent->shape[3]);
    size_t mark = sdt_arena_mark(arena);
    dit_fwd_tmp t = fwd_tmp_alloc(arena, a, H, F);
    sdt_tensor conv = mu_alloc(arena, dt, 4, B, H, a->grid_h, a->grid_w);
    sdt_tensor tproj = mu_alloc(arena, SDT_F32, 2, B, MMDIT_TIME_DIM, 0, 0);
    sdt_tensor th = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0), tt = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0),
               tp = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    sdt_tensor tok = mu_alloc(arena, SDT_F32, 3, B, N, (int64_t)c->patch * c->patch * c->in_channels, 0);
    sdt_tensor tsteps = mu_alloc(arena, SDT_F32, 1, B, 0, 0, 0);
    bool ok = true;
    if (!arena->measuring) {
        ok = arena_ok(arena, "the MMDiT forward", error) &&
             run_forward(m, be, in, a, &t, &conv, &tproj, &th, &tt, &tp, &tok, &tsteps, error);
    }
    sdt_arena_rewind(arena, mark);
    return ok;
}

/* ---------------------------------------------------------------- backward */

static bool run_backward(const mmdit_model *m, sdt_backend *be, const mmdit_acts *a, const sdt_tensor *dout,
                         sdt_tensor *dcontext, sdt_tensor *dpooled, dit_bwd_scratch *S, dit_fwd_tmp *t,
                         sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const int64_t B = a->batch, N = a->tokens, H = (int64_t)c->heads * c->head_dim;
    /* output: d(out) -> d(tokens) (host permutation) -> proj_out -> the final modulated LN */
    const size_t n_out = (size_t)sdt_tensor_numel(&a->out);
    float *ht = malloc(n_out * sizeof(float)), *hi = malloc(n_out * sizeof(float));
    bool ok = ht && hi;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "mmdit: out of memory for the output gradient");
    if (ok && (be->download(be, hi, dout->data, n_out * sizeof(float)) != 0))
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    if (ok) unpatchify_index(c, B, a->grid_h, a->grid_w, ht, hi, false);
    ok = ok && dit_upload_f32(be, &S->dtok, ht, error);
    free(ht), free(hi);
    if (!ok) return false;
    TRY(be->zero(be, &S->dst));
    TRY(be->zero(be, &S->dX[0]));
    TRY(be->zero(be, &S->dX[1])); /* the last block's text output is dropped */
    TRY(be->linear_input_grad(be, &S->dn[0], &S->dtok, &m->proj_out.w));
    sdt_tensor dmod2 = dit_dmod_view(S, B, 2, H);
    TRY(be->zero(be, &dmod2));
    if (!dit_modulated_ln_backward(be, &S->dX[0], &dmod2, &S->dgam, &S->dn[0], &a->img[c->layers - 1].x_out,
                                   &a->out_gamma, &a->out_mean, &a->out_rstd, 0, 1, error))
        return false;
    TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod2, &a->silu_temb, &m->norm_out.w));
    const dit_dims dd = block_dims(c);
    const dit_env env = block_env(a);
    for (int l = c->layers - 1; l >= 0; l--) {
        const bool pre_only = l == c->layers - 1;
        const sdt_tensor *xi = l ? &a->img[l - 1].x_out : &a->img0, *xc = l ? &a->ctx[l - 1].x_out : &a->ctx0;
        dit_stream_acts si, sc;
        sdt_tensor J[5];
        block_bind(m, a, l, false, &si, &sc, J);
        /* checkpointing: the block's forward again, from its kept inputs into the work set */
        if (a->checkpointing && !block_forward(m, be, &env, l, &si, &sc, J, xi, xc, t, N, error)) return false;
        /* the image stream's modulation gradient is kept in dmod_flat until its pre part: do the text
         * stream's post part on its own zeroed view after the image's, each finishing into dst */
        sdt_tensor dmod6 = dit_dmod_view(S, B, 6, H);
        if (pre_only)
            TRY(be->zero(be, &S->dJ[JO]));
        else {
            TRY(be->zero(be, &dmod6));
            if (!dit_stream_post_backward(&m->ctx[l], &dd, be, &env, &sc, xc, S, 1, &dmod6, N, error)) return false;
            /* gate and MLP parts of the text modulation reach dst now; its LN1 part comes below */
            TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod6, &a->silu_temb, &m->ctx[l].mod.w));
        }
        sdt_tensor dmod_img = dit_dmod_view(S, B, m->img[l].dual ? 9 : 6, H);
        TRY(be->zero(be, &dmod_img));
        if (!dit_stream_post_backward(&m->img[l], &dd, be, &env, &si, xi, S, 0, &dmod_img, 0, error)) return false;
        TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod_img, &a->silu_temb, &m->img[l].mod.w));
        TRY(be->attention_backward(be, &S->dJ[JQ], &S->dJ[JK], &S->dJ[JV], &S->dJ[JO], &J[JQ], &J[JK], &J[JV], &J[JO],
                                   &J[JLSE], c->heads, false));
        sdt_tensor dmod_any = dit_dmod_view(S, B, 9, H);
        TRY(be->zero(be, &dmod_any));
        if (!dit_stream_pre_backward(&m->img[l], &dd, be, &env, &si, xi, S, 0, false, 0, error)) return false;
        TRY(be->zero(be, &dmod_any));
        if (!dit_stream_pre_backward(&m->ctx[l], &dd, be, &env, &sc, xc, S, 1, pre_only, N, error)) return false;
    }
    if (dcontext) TRY(be->linear_backward(be, dcontext, NULL, NULL, &S->dX[1], &a->context, &m->ctx_in.w));
    if (dpooled) {
        /* temb = ... + p2(silu(p1(pooled))); every modulation read silu(temb) */
        TRY(be->zero(be, &S->dtemb));
        TRY(be->activation_backward(be, &S->dtemb, &S->dst, &a->temb, SDT_ACT_SILU));
        TRY(be->linear_input_grad(be, &S->dpa, &S->dtemb, &m->p2.w));
        TRY(be->zero(be, &S->dph));
        TRY(be->activation_backward(be, &S->dph, &S->dpa, &a->pooled_h, SDT_ACT_SILU));
        TRY(be->linear_backward(be, dpooled, NULL, NULL, &S->dph, &a->pooled, &m->p1.w));
    }
    return true;
}

bool mmdit_backward(const mmdit_model *m, sdt_backend *be, sdt_arena *arena, const mmdit_acts *a,
                    const sdt_tensor *dout, sdt_tensor *dcontext, sdt_tensor *dpooled, sdt_error *error)
{
    const mmdit_config *c = &m->cfg;
    const int64_t B = a->batch, N = a->tokens, T = a->ctx_tokens, H = (int64_t)c->heads * c->head_dim,
                  F = H * c->mlp_ratio;
    if (!dout || dout->ndim != 4 || dout->dtype != SDT_F32 || sdt_tensor_numel(dout) != sdt_tensor_numel(&a->out) ||
        dout->shape[0] != B)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: d(output) must be an f32 tensor shaped like the output");
    if (dcontext && (dcontext->ndim != 3 || dcontext->shape[0] != B || dcontext->shape[1] != T ||
                     dcontext->shape[2] != c->context_dim || dcontext->dtype == SDT_I32))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "mmdit: the context gradient must be a float tensor [%lld, %lld, %d]", (long long)B,
                        (long long)T, c->context_dim);
    if (dpooled && (dpooled->ndim != 2 || dpooled->shape[0] != B || dpooled->shape[1] != c->pooled_dim ||
                    dpooled->dtype == SDT_I32))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "mmdit: the pooled gradient must be a float tensor [%lld, %d]",
                        (long long)B, c->pooled_dim);
    if (!dcontext && !dpooled) return true;
    size_t mark = sdt_arena_mark(arena);
    dit_bwd_scratch s;
    /* the residual streams' gradients sum every branch and the modulation's every token: f32, as T5's; the
     * branches' gradients in the activation dtype */
    const sdt_dtype dt = a->act_dtype;
    dit_bwd_scratch_streams(&s, arena, dt, B, N, T, H, F);
    s.dmod_flat = mu_alloc(arena, SDT_F32, 1, B * 9 * H, 0, 0, 0);
    for (int j = 0; j < 5; j++) s.d2[j] = c->dual_layers > 0 ? mu_alloc(arena, dt, 3, B, N, H, 0) : (sdt_tensor){0};
    s.dgam = mu_alloc(arena, SDT_F32, 2, 1, H, 0, 0);
    s.tmp = mu_alloc(arena, dt, 2, a->ones.shape[0], H, 0, 0);
    s.tmp2 = mu_alloc(arena, SDT_F32, 2, a->ones.shape[0], H, 0, 0); /* d(broadcast gate), summed over tokens */
    s.dst = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dtemb = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dpa = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dph = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dtok = mu_alloc(arena, SDT_F32, 3, B, N, (int64_t)c->patch * c->patch * c->in_channels, 0);
    dit_fwd_tmp t = {0};
    if (a->checkpointing) t = fwd_tmp_alloc(arena, a, H, F);
    bool ok = true;
    if (!arena->measuring)
        ok = arena_ok(arena, "the MMDiT backward", error) &&
             run_backward(m, be, a, dout, dcontext, dpooled, &s, &t, error);
    sdt_arena_rewind(arena, mark);
    return ok;
}
