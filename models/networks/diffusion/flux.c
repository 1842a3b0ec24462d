/* flux.c - the Flux.1 transformer forward and backward to its conditioning; see flux.h. The double-stream
 * blocks are dit_blocks' joint streams with RoPE applied to the joint q and k before the attention; the
 * single-stream blocks and the packing are here. */
#include "flux.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "model_util.h"

#define MODULE "flux"
#define ROPE_THETA 10000.0

/* ---------------------------------------------------------------- configs */

static flux_config preset(bool guidance)
{
    flux_config c = {.double_layers = 19,
                     .single_layers = 38,
                     .heads = 24,
                     .head_dim = 128,
                     .in_channels = 16,
                     .context_dim = 4096,
                     .pooled_dim = 768,
                     .mlp_ratio = 4,
                     .axes_dim = {16, 56, 56},
                     .guidance = guidance};
    return c;
}

flux_config flux_config_dev(void)
{
    return preset(true);
}
flux_config flux_config_schnell(void)
{
    return preset(false);
}

flux_config flux_config_tiny(void)
{
    flux_config c = {.double_layers = 2,
                     .single_layers = 2,
                     .heads = 2,
                     .head_dim = 16,
                     .in_channels = 4,
                     .context_dim = 24,
                     .pooled_dim = 12,
                     .mlp_ratio = 4,
                     .axes_dim = {4, 6, 6},
                     .guidance = true};
    return c;
}

bool flux_config_check(const flux_config *c, sdt_error *error)
{
    const int *a = c->axes_dim;
    if (c->double_layers < 0 || c->double_layers > FLUX_MAX_LAYERS || c->single_layers < 0 ||
        c->single_layers > FLUX_MAX_LAYERS || c->double_layers + c->single_layers < 1 || c->heads < 1 ||
        c->head_dim < 2 || c->in_channels < 1 || c->context_dim < 1 || c->pooled_dim < 1 || c->mlp_ratio < 1)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "flux: config double %d single %d heads %d head_dim %d channels %d context %d pooled %d is "
                        "not a valid Flux transformer (sizes positive, 0..%d blocks of each kind, at least one)",
                        c->double_layers, c->single_layers, c->heads, c->head_dim, c->in_channels, c->context_dim,
                        c->pooled_dim, FLUX_MAX_LAYERS);
    if (a[0] < 0 || a[1] < 0 || a[2] < 0 || a[0] % 2 || a[1] % 2 || a[2] % 2 || a[0] + a[1] + a[2] != c->head_dim)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "flux: RoPE axes (%d, %d, %d) must be even and sum to the head width %d", a[0], a[1], a[2],
                        c->head_dim);
    return true;
}

static void axes_for(int head_dim, int *axes)
{
    const int spatial = head_dim == 128 ? 56 : 2 * (7 * head_dim / 32);
    axes[1] = axes[2] = spatial;
    axes[0] = head_dim - 2 * spatial;
}

bool flux_config_detect(const sdt_weights *w, const char *prefix, flux_config *cfg, sdt_error *error)
{
    const char *P = prefix ? prefix : "";
    if (strlen(P) >= FLUX_PREFIX_MAX)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "flux: key prefix \"%s\" is longer than %d characters", P,
                        FLUX_PREFIX_MAX - 1);
    const sdt_tensor *ctx = mu_get(w, "%scontext_embedder.weight", P);
    const sdt_tensor *xe = mu_get(w, "%sx_embedder.weight", P);
    const sdt_tensor *pooled = mu_get(w, "%stime_text_embed.text_embedder.linear_1.weight", P);
    const char *nq_fmt = "%stransformer_blocks.0.attn.norm_q.weight";
    const sdt_tensor *nq = mu_get(w, nq_fmt, P);
    if (!nq) nq = mu_get(w, "%ssingle_transformer_blocks.0.attn.norm_q.weight", P);
    const sdt_tensor *ff = mu_get(w, "%stransformer_blocks.0.ff.net.0.proj.weight", P);
    const sdt_tensor *mlp = mu_get(w, "%ssingle_transformer_blocks.0.proj_mlp.weight", P);
    if (!ctx || ctx->ndim != 2 || !xe || xe->ndim != 2 || !pooled || pooled->ndim != 2 || !nq || nq->ndim != 1 ||
        (!ff && !mlp))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: no Flux transformer found (expected %scontext_embedder.weight, %sx_embedder.weight, "
                        "%stime_text_embed.text_embedder.linear_1.weight and %stransformer_blocks.0.attn.norm_q."
                        "weight in diffusers' names); give a Flux.1 diffusers transformer file",
                        sdt_weights_path(w), P, P, P, P);
    flux_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.prefix, sizeof c.prefix, "%s", P);
    const int64_t H = ctx->shape[0];
    c.context_dim = (int)ctx->shape[1];
    c.pooled_dim = (int)pooled->shape[1];
    c.head_dim = (int)nq->shape[0];
    c.heads = c.head_dim > 0 && H % c.head_dim == 0 ? (int)(H / c.head_dim) : 0;
    const int64_t F = ff && ff->ndim == 2 ? ff->shape[0] : mlp && mlp->ndim == 2 ? mlp->shape[0] : 0;
    c.mlp_ratio = H > 0 && F % H == 0 ? (int)(F / H) : 0;
    c.guidance = mu_has(w, "%stime_text_embed.guidance_embedder.linear_1.weight", P);
    while (c.double_layers <= FLUX_MAX_LAYERS &&
           mu_has(w, "%stransformer_blocks.%d.norm1.linear.weight", P, c.double_layers))
        c.double_layers++;
    while (c.single_layers <= FLUX_MAX_LAYERS &&
           mu_has(w, "%ssingle_transformer_blocks.%d.norm.linear.weight", P, c.single_layers))
        c.single_layers++;
    axes_for(c.head_dim, c.axes_dim);
    if (c.heads == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the hidden width %lld (rows of %scontext_embedder.weight) is not a multiple of the head "
                        "width %d (from attn.norm_q.weight); the file is damaged or not a Flux transformer",
                        sdt_weights_path(w), (long long)H, P, c.head_dim);
    if (c.mlp_ratio == 0 || xe->shape[0] != H || xe->shape[1] % 4)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: %sx_embedder.weight is [%lld, %lld] and the MLP is %lld wide for a hidden width of %lld; "
                        "a Flux transformer has x_embedder [H, 4C] and an MLP a multiple of H; the file is damaged",
                        sdt_weights_path(w), P, (long long)xe->shape[0], (long long)xe->shape[1], (long long)F,
                        (long long)H);
    c.in_channels = (int)(xe->shape[1] / 4);
    if (!flux_config_check(&c, error)) return false;
    *cfg = c;
    return true;
}

/* ---------------------------------------------------------------- parameters */

bool flux_params(const flux_config *c, sdt_param_visitor v, void *u)
{
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio, D = 4 * (int64_t)c->in_channels;
    int64_t hd[1] = {c->head_dim};
    if (!dit_emit_linear(v, u, H, D, P, "x_embedder") ||
        !dit_emit_linear(v, u, H, c->context_dim, P, "context_embedder") ||
        !dit_emit_linear(v, u, H, FLUX_TIME_DIM, P, "time_text_embed.timestep_embedder.linear_1") ||
        !dit_emit_linear(v, u, H, H, P, "time_text_embed.timestep_embedder.linear_2") ||
        (c->guidance && (!dit_emit_linear(v, u, H, FLUX_TIME_DIM, P, "time_text_embed.guidance_embedder.linear_1") ||
                         !dit_emit_linear(v, u, H, H, P, "time_text_embed.guidance_embedder.linear_2"))) ||
        !dit_emit_linear(v, u, H, c->pooled_dim, P, "time_text_embed.text_embedder.linear_1") ||
        !dit_emit_linear(v, u, H, H, P, "time_text_embed.text_embedder.linear_2"))
        return false;
    static const char *const attn_lin[] = {"to_q",       "to_k",       "to_v",     "add_q_proj",
                                           "add_k_proj", "add_v_proj", "to_out.0", "to_add_out"};
    static const char *const attn_norm[] = {"norm_q", "norm_k", "norm_added_q", "norm_added_k"};
    for (int l = 0; l < c->double_layers; l++) {
        const char *B = "transformer_blocks";
        if (!dit_emit_linear(v, u, 6 * H, H, P, "%s.%d.norm1.linear", B, l) ||
            !dit_emit_linear(v, u, 6 * H, H, P, "%s.%d.norm1_context.linear", B, l))
            return false;
        for (int i = 0; i < 8; i++)
            if (!dit_emit_linear(v, u, H, H, P, "%s.%d.attn.%s", B, l, attn_lin[i])) return false;
        for (int i = 0; i < 4; i++)
            if (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.%s.weight", P, B, l, attn_norm[i])) return false;
        if (!dit_emit_linear(v, u, F, H, P, "%s.%d.ff.net.0.proj", B, l) ||
            !dit_emit_linear(v, u, H, F, P, "%s.%d.ff.net.2", B, l) ||
            !dit_emit_linear(v, u, F, H, P, "%s.%d.ff_context.net.0.proj", B, l) ||
            !dit_emit_linear(v, u, H, F, P, "%s.%d.ff_context.net.2", B, l))
            return false;
    }
    for (int l = 0; l < c->single_layers; l++) {
        const char *B = "single_transformer_blocks";
        if (!dit_emit_linear(v, u, 3 * H, H, P, "%s.%d.norm.linear", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_q", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_k", B, l) ||
            !dit_emit_linear(v, u, H, H, P, "%s.%d.attn.to_v", B, l) ||
            !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_q.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_ONES, 0, 1, hd, "%s%s.%d.attn.norm_k.weight", P, B, l) ||
            !dit_emit_linear(v, u, F, H, P, "%s.%d.proj_mlp", B, l) ||
            !dit_emit_linear(v, u, H, H + F, P, "%s.%d.proj_out", B, l))
            return false;
    }
    return dit_emit_linear(v, u, 2 * H, H, P, "norm_out.linear") && dit_emit_linear(v, u, D, H, P, "proj_out");
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
                                "the Flux transformer file is incomplete (truncated, or another model); use a complete "
                                "diffusers Flux.1 transformer",
                                key_fmt, ap);
    va_end(ap);
    return ok;
}

static bool need_linear(const sdt_weights *w, dit_linear *L, int64_t out, int64_t in, sdt_error *error, const char *fmt,
                        ...) __attribute__((format(printf, 6, 7)));
static bool need_linear(const sdt_weights *w, dit_linear *L, int64_t out, int64_t in, sdt_error *error, const char *fmt,
                        ...)
{
    char full[220];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(full, sizeof full, fmt, ap);
    va_end(ap);
    int64_t ws[2] = {out, in}, bs[1] = {out};
    return need(w, &L->w, 2, ws, error, "%s.weight", full) && need(w, &L->b, 1, bs, error, "%s.bias", full);
}

static bool load_double(flux_model *m, const sdt_weights *w, int l, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    dit_stream_weights *x = &m->img[l], *t = &m->ctx[l];
    int64_t hd[1] = {c->head_dim};
#define BL(name) "%stransformer_blocks.%d." name, P, l
    return need_linear(w, &x->mod, 6 * H, H, error, BL("norm1.linear")) &&
           need_linear(w, &t->mod, 6 * H, H, error, BL("norm1_context.linear")) &&
           need_linear(w, &x->q, H, H, error, BL("attn.to_q")) && need_linear(w, &x->k, H, H, error, BL("attn.to_k")) &&
           need_linear(w, &x->v, H, H, error, BL("attn.to_v")) &&
           need_linear(w, &x->out, H, H, error, BL("attn.to_out.0")) &&
           need_linear(w, &t->q, H, H, error, BL("attn.add_q_proj")) &&
           need_linear(w, &t->k, H, H, error, BL("attn.add_k_proj")) &&
           need_linear(w, &t->v, H, H, error, BL("attn.add_v_proj")) &&
           need_linear(w, &t->out, H, H, error, BL("attn.to_add_out")) &&
           need(w, &x->norm_q, 1, hd, error, BL("attn.norm_q.weight")) &&
           need(w, &x->norm_k, 1, hd, error, BL("attn.norm_k.weight")) &&
           need(w, &t->norm_q, 1, hd, error, BL("attn.norm_added_q.weight")) &&
           need(w, &t->norm_k, 1, hd, error, BL("attn.norm_added_k.weight")) &&
           need_linear(w, &x->ff1, F, H, error, BL("ff.net.0.proj")) &&
           need_linear(w, &x->ff2, H, F, error, BL("ff.net.2")) &&
           need_linear(w, &t->ff1, F, H, error, BL("ff_context.net.0.proj")) &&
           need_linear(w, &t->ff2, H, F, error, BL("ff_context.net.2"));
#undef BL
}

static bool load_single(flux_model *m, const sdt_weights *w, int l, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    flux_single_weights *s = &m->single[l];
    int64_t hd[1] = {c->head_dim};
#define BL(name) "%ssingle_transformer_blocks.%d." name, P, l
    return need_linear(w, &s->mod, 3 * H, H, error, BL("norm.linear")) &&
           need_linear(w, &s->q, H, H, error, BL("attn.to_q")) && need_linear(w, &s->k, H, H, error, BL("attn.to_k")) &&
           need_linear(w, &s->v, H, H, error, BL("attn.to_v")) &&
           need(w, &s->norm_q, 1, hd, error, BL("attn.norm_q.weight")) &&
           need(w, &s->norm_k, 1, hd, error, BL("attn.norm_k.weight")) &&
           need_linear(w, &s->mlp, F, H, error, BL("proj_mlp")) &&
           need_linear(w, &s->out, H, H + F, error, BL("proj_out"));
#undef BL
}

bool flux_load(flux_model *m, const flux_config *cfg, const sdt_weights *w, sdt_error *error)
{
    if (!flux_config_check(cfg, error)) return false;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    const flux_config *c = cfg;
    const char *P = c->prefix;
    const int64_t H = (int64_t)c->heads * c->head_dim, D = 4 * (int64_t)c->in_channels;
    bool ok = need_linear(w, &m->x_in, H, D, error, "%sx_embedder", P) &&
              need_linear(w, &m->ctx_in, H, c->context_dim, error, "%scontext_embedder", P) &&
              need_linear(w, &m->t1, H, FLUX_TIME_DIM, error, "%stime_text_embed.timestep_embedder.linear_1", P) &&
              need_linear(w, &m->t2, H, H, error, "%stime_text_embed.timestep_embedder.linear_2", P) &&
              need_linear(w, &m->p1, H, c->pooled_dim, error, "%stime_text_embed.text_embedder.linear_1", P) &&
              need_linear(w, &m->p2, H, H, error, "%stime_text_embed.text_embedder.linear_2", P) &&
              need_linear(w, &m->norm_out, 2 * H, H, error, "%snorm_out.linear", P) &&
              need_linear(w, &m->proj_out, D, H, error, "%sproj_out", P);
    if (ok && c->guidance)
        ok = need_linear(w, &m->g1, H, FLUX_TIME_DIM, error, "%stime_text_embed.guidance_embedder.linear_1", P) &&
             need_linear(w, &m->g2, H, H, error, "%stime_text_embed.guidance_embedder.linear_2", P);
    for (int l = 0; ok && l < c->double_layers; l++) ok = load_double(m, w, l, error);
    for (int l = 0; ok && l < c->single_layers; l++) ok = load_single(m, w, l, error);
    if (ok && !(m->rope = calloc(1, sizeof *m->rope)))
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flux: out of memory for the RoPE cache");
    return ok;
}

void flux_free(flux_model *m)
{
    flux_rope_cache *r = m ? m->rope : NULL;
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        r->be->free(r->be, r->entry[i].cos.data);
        r->be->free(r->be, r->entry[i].sin.data);
    }
    free(r);
    m->rope = NULL;
}

/* ---------------------------------------------------------------- helpers */

#define TRY(call) MU_TRY(be, error, MODULE, call)

static dit_dims block_dims(const flux_config *c)
{
    dit_dims d = {.heads = c->heads, .head_dim = c->head_dim, .qk_norm = true, .mlp_ratio = c->mlp_ratio};
    return d;
}

static dit_env block_env(const flux_acts *a)
{
    dit_env e = {.batch = a->batch, .silu_temb = a->silu_temb, .ones = a->ones};
    return e;
}

static bool arena_ok(const sdt_arena *ar, const char *what, sdt_error *error)
{
    if (sdt_arena_fits(ar)) return true;
    return sdt_fail(error, ar->error.code, "flux, %s: %s", what, ar->error.message);
}

static bool check_inputs(const flux_model *m, const flux_inputs *in, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const sdt_tensor *x = in->latent, *t = in->context, *p = in->pooled;
    if (!x || x->ndim != 4 || x->shape[0] < 1 || x->shape[1] != c->in_channels || x->channels_last ||
        x->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "flux: the latent must be a float tensor [batch, %d, height, width] (NCHW, unpacked)",
                        c->in_channels);
    const int64_t B = x->shape[0];
    if (x->shape[2] < 2 || x->shape[3] < 2 || x->shape[2] % 2 || x->shape[3] % 2)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "flux: a %lld x %lld latent cannot be packed into 2 x 2 patches; its sides must be even "
                        "(images a multiple of 16 pixels)",
                        (long long)x->shape[2], (long long)x->shape[3]);
    if (!t || t->ndim != 3 || t->shape[0] != B || t->shape[1] < 1 || t->shape[2] != c->context_dim ||
        t->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: the context must be a float tensor [%lld, tokens, %d]",
                        (long long)B, c->context_dim);
    if (!p || p->ndim != 2 || p->shape[0] != B || p->shape[1] != c->pooled_dim || p->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: the pooled projection must be a float tensor [%lld, %d]",
                        (long long)B, c->pooled_dim);
    if (!in->timesteps) return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: no timesteps given");
    if (c->guidance && !in->guidance)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "flux: this transformer embeds a guidance scale (Flux dev, guidance-distilled); give one per "
                        "batch element (3.5 is the usual value)");
    if (in->act_dtype != SDT_F32 && in->act_dtype != SDT_F16 && in->act_dtype != SDT_BF16)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "flux: the activation dtype %s is not one the transformer stores; pass f32, f16 or bf16",
                        sdt_dtype_name(in->act_dtype));
    return true;
}

/* packed [B, gh*gw, 4C] (features (c, py, px)) <-> image [B, C, 2gh, 2gw] on the host, either direction
 * (diffusers' _pack_latents / _unpack_latents). */
static void pack_index(int64_t B, int64_t C, int64_t gh, int64_t gw, float *tok, float *img, bool to_img)
{
    const int64_t W = 2 * gw, HH = 2 * gh;
    for (int64_t b = 0; b < B; b++)
        for (int64_t y = 0; y < gh; y++)
            for (int64_t x = 0; x < gw; x++)
                for (int64_t ch = 0; ch < C; ch++)
                    for (int64_t py = 0; py < 2; py++)
                        for (int64_t px = 0; px < 2; px++) {
                            float *tv = &tok[(b * gh * gw + y * gw + x) * 4 * C + ch * 4 + py * 2 + px];
                            float *iv = &img[((b * C + ch) * HH + 2 * y + py) * W + 2 * x + px];
                            if (to_img)
                                *iv = *tv;
                            else
                                *tv = *iv;
                        }
}

/* Device f32 [n] <-> host, through the pack permutation. */
static bool repack(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src, const flux_acts *a, int64_t C, bool to_img,
                   sdt_error *error)
{
    const size_t n = (size_t)sdt_tensor_numel(src);
    float *hs = malloc(n * sizeof(float)), *hd = malloc(n * sizeof(float));
    bool ok = hs && hd;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flux: out of memory packing the latent");
    if (ok && be->download(be, hs, src->data, n * sizeof(float)) != 0)
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    if (ok) {
        if (to_img)
            pack_index(a->batch, C, a->grid_h, a->grid_w, hs, hd, true);
        else
            pack_index(a->batch, C, a->grid_h, a->grid_w, hd, hs, false);
    }
    ok = ok && dit_upload_f32(be, dst, hd, error);
    free(hs), free(hd);
    return ok;
}

/* FluxPosEmbed: per axis a of width d, angle = id_a / theta^(2k/d) for pair k, cos and sin repeated over the pair;
 * text ids (0, 0, 0), image token (row, col) ids (0, row, col). */
static bool rope_tables(const flux_config *c, sdt_backend *be, const flux_acts *a, sdt_tensor *cosv, sdt_tensor *sinv,
                        sdt_error *error)
{
    const int64_t T = a->ctx_tokens, S = T + a->tokens, D = c->head_dim;
    float *hc = malloc((size_t)(S * D) * sizeof(float)), *hs = malloc((size_t)(S * D) * sizeof(float));
    if (!hc || !hs) {
        free(hc), free(hs);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flux: out of memory for the RoPE tables");
    }
    for (int64_t s = 0; s < S; s++) {
        const int64_t i = s - T;
        const double ids[3] = {0, s < T ? 0 : (double)(i / a->grid_w), s < T ? 0 : (double)(i % a->grid_w)};
        int off = 0;
        for (int ax = 0; ax < 3; ax++) {
            const int d = c->axes_dim[ax];
            for (int k = 0; k < d / 2; k++) {
                const double angle = ids[ax] / pow(ROPE_THETA, (double)(2 * k) / (double)d);
                hc[s * D + off + 2 * k] = hc[s * D + off + 2 * k + 1] = (float)cos(angle);
                hs[s * D + off + 2 * k] = hs[s * D + off + 2 * k + 1] = (float)sin(angle);
            }
            off += d;
        }
    }
    bool ok = dit_upload_f32(be, cosv, hc, error) && dit_upload_f32(be, sinv, hs, error);
    free(hc), free(hs);
    return ok;
}

/* The tables of a's shape from the model's cache, built there the first time; false with error empty when they
 * are not cached (no cache, another backend, the cache full): the forward builds them in its arena. */
static bool rope_cached(const flux_model *m, sdt_backend *be, flux_acts *a, sdt_error *error)
{
    flux_rope_cache *r = m->rope;
    if (!r || (r->be && r->be != be)) return false;
    for (int i = 0; i < r->n; i++) {
        const flux_rope_entry *e = &r->entry[i];
        if (e->ctx_tokens == a->ctx_tokens && e->grid_h == a->grid_h && e->grid_w == a->grid_w) {
            a->cos = e->cos, a->sin = e->sin;
            return true;
        }
    }
    if (r->n == FLUX_ROPE_SHAPES) return false;
    const int64_t S = (int64_t)a->ctx_tokens + a->tokens;
    flux_rope_entry e = {.ctx_tokens = a->ctx_tokens, .grid_h = a->grid_h, .grid_w = a->grid_w};
    e.cos = sdt_tensor_4d(NULL, SDT_F32, 2, S, m->cfg.head_dim, 0, 0);
    e.sin = e.cos;
    e.cos.device = e.sin.device = be->device;
    const size_t bytes = sdt_tensor_nbytes(&e.cos);
    e.cos.data = be->alloc(be, bytes);
    e.sin.data = e.cos.data ? be->alloc(be, bytes) : NULL;
    if (!e.sin.data || !rope_tables(&m->cfg, be, a, &e.cos, &e.sin, error)) {
        if (e.cos.data) be->free(be, e.cos.data);
        if (e.sin.data) be->free(be, e.sin.data);
        if (!error->message[0])
            sdt_fail(error, be->error.code ? be->error.code : SDT_ERR_OUT_OF_MEMORY,
                     "flux: no memory for the RoPE tables: %s", be->error.message);
        return false;
    }
    r->be = be;
    r->entry[r->n++] = e;
    r->builds++;
    a->cos = e.cos, a->sin = e.sin;
    return true;
}

/* Rows [off, off + n) of every batch element of joint [B, S, H] <-> part [B, n, H]. */
static bool copy_rows(sdt_backend *be, sdt_tensor *joint, sdt_tensor *part, int64_t off, bool into_joint,
                      sdt_error *error)
{
    const int64_t n = part->shape[1];
    for (int b = 0; b < part->shape[0]; b++) {
        sdt_tensor jr = dit_joint_rows(joint, b, off, n), pr = dit_batch_rows(part, b);
        if (into_joint)
            TRY(be->convert(be, &jr, &pr));
        else
            TRY(be->convert(be, &pr, &jr));
    }
    return true;
}

/* [B, S, w] as concat_channels' [B*S, w, 1, 1]. */
static sdt_tensor as_channels(const sdt_tensor *t)
{
    sdt_tensor r = *t;
    r.ndim = 4;
    r.shape[0] = t->shape[0] * t->shape[1];
    r.shape[1] = t->shape[2];
    r.shape[2] = r.shape[3] = 1;
    return r;
}

/* RMS norm per head of q and k into Q and K, then the rotation, in place. */
static bool qk_norm_rope(const flux_model *m, sdt_backend *be, const flux_acts *a, sdt_tensor *Q, sdt_tensor *K,
                         const sdt_tensor *q, const sdt_tensor *k, sdt_tensor *rq, sdt_tensor *rk, const sdt_tensor *nq,
                         const sdt_tensor *nk, sdt_error *error)
{
    const int hd = m->cfg.head_dim;
    sdt_tensor Qh = dit_heads_view(Q, hd), qh = dit_heads_view(q, hd), Kh = dit_heads_view(K, hd),
               kh = dit_heads_view(k, hd);
    TRY(be->rmsnorm_forward(be, &Qh, rq, &qh, nq, DIT_LN_EPS));
    TRY(be->rmsnorm_forward(be, &Kh, rk, &kh, nk, DIT_LN_EPS));
    TRY(be->rope_forward(be, Q, Q, &a->cos, &a->sin));
    TRY(be->rope_forward(be, K, K, &a->cos, &a->sin));
    return true;
}

/* ---------------------------------------------------------------- forward */

typedef struct single_tmp {
    sdt_tensor n, act, cat, tmp; /* [B, S, H], [B, S, 4H], [B, S, 5H], [S, H] */
} single_tmp;

static bool single_forward(const flux_model *m, sdt_backend *be, const flux_acts *a, const flux_single_weights *W,
                           flux_single_acts *s, const sdt_tensor *x, single_tmp *t, const sdt_tensor *ones_h,
                           sdt_error *error)
{
    const int64_t H = (int64_t)m->cfg.heads * m->cfg.head_dim;
    TRY(be->linear_forward(be, &s->mod, &a->silu_temb, &W->mod.w, &W->mod.b));
    if (!dit_make_gamma(be, &s->gamma, &s->mod, H, 1, ones_h, error) ||
        !dit_modulated_ln(be, &t->n, &s->mean, &s->rstd, x, &s->gamma, &s->mod, 0, error))
        return false;
    TRY(be->linear_forward(be, &s->q, &t->n, &W->q.w, &W->q.b));
    TRY(be->linear_forward(be, &s->k, &t->n, &W->k.w, &W->k.b));
    TRY(be->linear_forward(be, &s->v, &t->n, &W->v.w, &W->v.b));
    if (!qk_norm_rope(m, be, a, &s->Q, &s->K, &s->q, &s->k, &s->rstd_q, &s->rstd_k, &W->norm_q, &W->norm_k, error))
        return false;
    TRY(be->attention_forward(be, &s->O, &s->lse, &s->Q, &s->K, &s->v, m->cfg.heads, false));
    TRY(be->linear_forward(be, &s->h, &t->n, &W->mlp.w, &W->mlp.b));
    TRY(be->activation_forward(be, &t->act, &s->h, SDT_ACT_GELU_TANH));
    sdt_tensor cat4 = as_channels(&t->cat), o4 = as_channels(&s->O), a4 = as_channels(&t->act);
    TRY(be->concat_channels_forward(be, &cat4, &o4, &a4));
    TRY(be->linear_forward(be, &s->y, &t->cat, &W->out.w, &W->out.b));
    return dit_gated_residual(be, &s->x_out, x, &s->y, &s->mod, 2, &a->ones, &t->tmp, error);
}

/* Double block l's activations: its own, or (checkpointing) the work set, writing its outputs where the forward
 * keeps them (kept_out) or into the work set's own x_out (backward's recompute). */
static void double_bind(const flux_acts *a, int l, bool kept_out, dit_stream_acts *si, dit_stream_acts *sc,
                        sdt_tensor *J)
{
    if (!a->checkpointing) {
        *si = a->img[l], *sc = a->ctx[l];
        memcpy(J, a->joint[l], 5 * sizeof *J);
        return;
    }
    *si = a->work_img, *sc = a->work_ctx;
    if (kept_out) si->x_out = a->img[l].x_out, sc->x_out = a->ctx[l].x_out;
    memcpy(J, a->work_joint, 5 * sizeof *J);
}

/* Single block l's activations, the same way. */
static flux_single_acts single_bind(const flux_acts *a, int l, bool kept_out)
{
    if (!a->checkpointing) return a->single[l];
    flux_single_acts s = a->work_single;
    if (kept_out) s.x_out = a->single[l].x_out;
    return s;
}

/* One double-stream block: the streams' pre parts over [text; image], RoPE, the joint attention, the post parts. */
static bool double_forward(const flux_model *m, sdt_backend *be, const flux_acts *a, int l, dit_stream_acts *si,
                           dit_stream_acts *sc, sdt_tensor *J, const sdt_tensor *xi, const sdt_tensor *xc,
                           dit_fwd_tmp *t, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const int64_t T = a->ctx_tokens;
    const dit_dims dd = block_dims(c);
    const dit_env env = block_env(a);
    if (!dit_stream_pre(&m->ctx[l], &dd, be, &env, sc, xc, &t->n_ctx, &t->ones_h, J, 0, false, error) ||
        !dit_stream_pre(&m->img[l], &dd, be, &env, si, xi, &t->n_img, &t->ones_h, J, T, false, error))
        return false;
    TRY(be->rope_forward(be, &J[JQ], &J[JQ], &a->cos, &a->sin));
    TRY(be->rope_forward(be, &J[JK], &J[JK], &a->cos, &a->sin));
    TRY(be->attention_forward(be, &J[JO], &J[JLSE], &J[JQ], &J[JK], &J[JV], c->heads, false));
    return dit_stream_post(&m->img[l], &dd, be, &env, si, xi, &t->n_img, &t->a_img, t, J, T, error) &&
           dit_stream_post(&m->ctx[l], &dd, be, &env, sc, xc, &t->n_ctx, &t->a_ctx, t, J, 0, error);
}

static bool run_forward(const flux_model *m, sdt_backend *be, const flux_inputs *in, flux_acts *a, dit_fwd_tmp *t,
                        single_tmp *st, sdt_tensor *lat, sdt_tensor *packed, sdt_tensor *tproj, sdt_tensor *th,
                        sdt_tensor *tt, sdt_tensor *tok, sdt_tensor *tsteps, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const int64_t B = a->batch, N = a->tokens, T = a->ctx_tokens, H = (int64_t)c->heads * c->head_dim;
    const int64_t M = a->ones.shape[0];
    float *host = malloc((size_t)(M > B ? M : B) * sizeof(float));
    if (!host) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flux: out of memory");
    for (int64_t i = 0; i < M; i++) host[i] = 1.0f;
    bool ok = dit_upload_f32(be, &a->ones, host, error);
    free(host);
    if (!ok || (a->rope_in_arena && !rope_tables(c, be, a, &a->cos, &a->sin, error))) return false;
    /* conditioning: temb = t2(silu(t1(sin(1000 t)))) [+ g2(silu(g1(sin(1000 g))))] + p2(silu(p1(pooled))) */
    const dit_linear *emb[2][2] = {{&m->t1, &m->t2}, {&m->g1, &m->g2}};
    const float *vals[2] = {in->timesteps, in->guidance};
    TRY(be->linear_forward(be, &a->pooled_h, in->pooled, &m->p1.w, &m->p1.b));
    TRY(be->activation_forward(be, &a->pooled_a, &a->pooled_h, SDT_ACT_SILU));
    TRY(be->linear_forward(be, &a->temb, &a->pooled_a, &m->p2.w, &m->p2.b));
    for (int e = 0; e < (c->guidance ? 2 : 1); e++) {
        float *hp = malloc((size_t)B * sizeof(float));
        if (!hp) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "flux: out of memory");
        for (int64_t i = 0; i < B; i++) hp[i] = 1000.0f * vals[e][i];
        ok = dit_upload_f32(be, tsteps, hp, error);
        free(hp);
        if (!ok) return false;
        TRY(be->timestep_embedding(be, tproj, tsteps, true, 0.0f, 10000.0f));
        TRY(be->linear_forward(be, th, tproj, &emb[e][0]->w, &emb[e][0]->b));
        TRY(be->activation_forward(be, tt, th, SDT_ACT_SILU));
        TRY(be->linear_forward(be, th, tt, &emb[e][1]->w, &emb[e][1]->b));
        TRY(be->add_forward(be, &a->temb, &a->temb, th));
    }
    TRY(be->activation_forward(be, &a->silu_temb, &a->temb, SDT_ACT_SILU));
    /* streams */
    TRY(be->linear_forward(be, &a->ctx0, in->context, &m->ctx_in.w, &m->ctx_in.b));
    TRY(be->convert(be, lat, in->latent));
    if (!repack(be, packed, lat, a, c->in_channels, false, error)) return false;
    TRY(be->linear_forward(be, &a->img0, packed, &m->x_in.w, &m->x_in.b));
    for (int l = 0; l < c->double_layers; l++) {
        const sdt_tensor *xi = l ? &a->img[l - 1].x_out : &a->img0, *xc = l ? &a->ctx[l - 1].x_out : &a->ctx0;
        dit_stream_acts si, sc;
        sdt_tensor J[5];
        double_bind(a, l, true, &si, &sc, J);
        if (!double_forward(m, be, a, l, &si, &sc, J, xi, xc, t, error)) return false;
    }
    const int L2 = c->double_layers;
    sdt_tensor *ximg = L2 ? &a->img[L2 - 1].x_out : &a->img0, *xctx = L2 ? &a->ctx[L2 - 1].x_out : &a->ctx0;
    if (!copy_rows(be, &a->x_join, xctx, 0, true, error) || !copy_rows(be, &a->x_join, ximg, T, true, error))
        return false;
    for (int l = 0; l < c->single_layers; l++) {
        const sdt_tensor *x = l ? &a->single[l - 1].x_out : &a->x_join;
        flux_single_acts s = single_bind(a, l, true);
        if (!single_forward(m, be, a, &m->single[l], &s, x, st, &t->ones_h, error)) return false;
    }
    sdt_tensor *x_last = c->single_layers ? &a->single[c->single_layers - 1].x_out : &a->x_join;
    if (!copy_rows(be, x_last, &a->x_img, T, false, error)) return false;
    /* output: continuous adaLN (scale, shift), proj_out, unpack */
    TRY(be->linear_forward(be, &a->out_mod, &a->silu_temb, &m->norm_out.w, &m->norm_out.b));
    if (!dit_make_gamma(be, &a->out_gamma, &a->out_mod, H, 0, &t->ones_h, error) ||
        !dit_modulated_ln(be, &t->n_img, &a->out_mean, &a->out_rstd, &a->x_img, &a->out_gamma, &a->out_mod, 1, error))
        return false;
    TRY(be->linear_forward(be, tok, &t->n_img, &m->proj_out.w, &m->proj_out.b));
    (void)N;
    return repack(be, &a->out, tok, a, c->in_channels, true, error);
}

/* In dt as dit_stream_alloc's: the statistics f32. */
static void alloc_single(flux_single_acts *s, const flux_config *c, sdt_arena *ar, int64_t B, int64_t S, sdt_dtype dt)
{
    const int64_t H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio;
    s->mod = mu_alloc(ar, dt, 2, B, 3 * H, 0, 0);
    s->gamma = mu_alloc(ar, dt, 2, B, H, 0, 0);
    s->mean = mu_alloc(ar, SDT_F32, 1, B * S, 0, 0, 0);
    s->rstd = mu_alloc(ar, SDT_F32, 1, B * S, 0, 0, 0);
    sdt_tensor *bsh[] = {&s->q, &s->k, &s->v, &s->Q, &s->K, &s->O, &s->y, &s->x_out};
    for (size_t i = 0; i < sizeof bsh / sizeof bsh[0]; i++) *bsh[i] = mu_alloc(ar, dt, 3, B, S, H, 0);
    s->rstd_q = mu_alloc(ar, SDT_F32, 1, B * S * c->heads, 0, 0, 0);
    s->rstd_k = mu_alloc(ar, SDT_F32, 1, B * S * c->heads, 0, 0, 0);
    s->lse = mu_alloc(ar, SDT_F32, 3, B, c->heads, S, 0);
    s->h = mu_alloc(ar, dt, 3, B, S, F, 0);
}

/* A forward's block temporaries (the forward's, and backward's recompute when checkpointing). */
static void fwd_tmp_alloc(sdt_arena *arena, const flux_acts *a, int64_t H, int64_t F, dit_fwd_tmp *t, single_tmp *st)
{
    const int64_t B = a->batch, N = a->tokens, T = a->ctx_tokens, S = N + T;
    const sdt_dtype dt = a->act_dtype;
    t->n_img = mu_alloc(arena, dt, 3, B, N, H, 0);
    t->n_ctx = mu_alloc(arena, dt, 3, B, T, H, 0);
    t->a_img = mu_alloc(arena, dt, 3, B, N, F, 0);
    t->a_ctx = mu_alloc(arena, dt, 3, B, T, F, 0);
    t->tmp = mu_alloc(arena, dt, 2, a->ones.shape[0], H, 0, 0); /* a gate broadcast: ones times gate, exact in dt */
    st->n = mu_alloc(arena, dt, 3, B, S, H, 0);
    st->act = mu_alloc(arena, dt, 3, B, S, F, 0);
    st->cat = mu_alloc(arena, dt, 3, B, S, H + F, 0);
    st->tmp = t->tmp;
    sdt_tensor o2 = mu_rows(&a->ones, 0, H);
    int64_t hs[1] = {H};
    t->ones_h = mu_reshape(&o2, 1, hs);
}

bool flux_forward(const flux_model *m, sdt_backend *be, sdt_arena *arena, const flux_inputs *in, flux_acts *a,
                  sdt_error *error)
{
    if (!check_inputs(m, in, error)) return false;
    const flux_config *c = &m->cfg;
    memset(a, 0, sizeof(*a));
    const int64_t B = in->latent->shape[0], H = (int64_t)c->heads * c->head_dim, F = H * c->mlp_ratio,
                  C = c->in_channels;
    a->batch = (int)B;
    a->grid_h = (int)(in->latent->shape[2] / 2);
    a->grid_w = (int)(in->latent->shape[3] / 2);
    a->tokens = a->grid_h * a->grid_w;
    a->ctx_tokens = (int)in->context->shape[1];
    a->context = *in->context;
    a->pooled = *in->pooled;
    /* The activation dtype for everything per token and the modulation, as mmdit_forward (which says why) */
    const sdt_dtype dt = in->act_dtype;
    a->act_dtype = dt;
    const int64_t N = a->tokens, T = a->ctx_tokens, S = N + T;
    const int64_t M = S > H ? S : H;
    a->ones = mu_alloc(arena, dt, 2, M, 1, 0, 0);
    if (!arena->measuring) {
        sdt_error rope_error = {0};
        if (!rope_cached(m, be, a, &rope_error) && rope_error.message[0]) {
            *error = rope_error;
            return false;
        }
        a->rope_in_arena = !a->cos.data;
    } else {
        a->rope_in_arena = true; /* measured as if uncached: the bound holds either way */
    }
    if (a->rope_in_arena) {
        a->cos = mu_alloc(arena, SDT_F32, 2, S, c->head_dim, 0, 0);
        a->sin = mu_alloc(arena, SDT_F32, 2, S, c->head_dim, 0, 0);
    }
    a->pooled_h = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->pooled_a = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->temb = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    a->silu_temb = mu_alloc(arena, dt, 2, B, H, 0, 0);
    a->ctx0 = mu_alloc(arena, dt, 3, B, T, H, 0);
    a->img0 = mu_alloc(arena, dt, 3, B, N, H, 0);
    const dit_dims dd = block_dims(c);
    a->checkpointing = in->checkpointing;
    for (int l = 0; l < c->double_layers; l++) {
        if (a->checkpointing) { /* the block's outputs: the next block's inputs */
            a->img[l].x_out = mu_alloc(arena, dt, 3, B, N, H, 0);
            a->ctx[l].x_out = mu_alloc(arena, dt, 3, B, T, H, 0);
            continue;
        }
        dit_stream_alloc(&a->img[l], &dd, arena, B, N, false, false, dt);
        dit_stream_alloc(&a->ctx[l], &dd, arena, B, T, false, false, dt);
        for (int j = JQ; j <= JO; j++) a->joint[l][j] = mu_alloc(arena, dt, 3, B, S, H, 0);
        a->joint[l][JLSE] = mu_alloc(arena, SDT_F32, 3, B, c->heads, S, 0);
    }
    a->x_join = mu_alloc(arena, dt, 3, B, S, H, 0);
    for (int l = 0; l < c->single_layers; l++) {
        if (a->checkpointing)
            a->single[l].x_out = mu_alloc(arena, dt, 3, B, S, H, 0);
        else
            alloc_single(&a->single[l], c, arena, B, S, dt);
    }
    if (a->checkpointing) { /* one block of each kind */
        dit_stream_alloc(&a->work_img, &dd, arena, B, N, false, false, dt);
        dit_stream_alloc(&a->work_ctx, &dd, arena, B, T, false, false, dt);
        for (int j = JQ; j <= JO; j++) a->work_joint[j] = mu_alloc(arena, dt, 3, B, S, H, 0);
        a->work_joint[JLSE] = mu_alloc(arena, SDT_F32, 3, B, c->heads, S, 0);
        alloc_single(&a->work_single, c, arena, B, S, dt);
    }
    a->x_img = mu_alloc(arena, dt, 3, B, N, H, 0);
    a->out_mod = mu_alloc(arena, dt, 2, B, 2 * H, 0, 0);
    a->out_gamma = mu_alloc(arena, dt, 2, B, H, 0, 0);
    a->out_mean = mu_alloc(arena, SDT_F32, 1, B * N, 0, 0, 0);
    a->out_rstd = mu_alloc(arena, SDT_F32, 1, B * N, 0, 0, 0);
    a->out = mu_alloc(arena, SDT_F32, 4, B, C, in->latent->shape[2], in->latent->shape[3]);
    size_t mark = sdt_arena_mark(arena);
    dit_fwd_tmp t;
    single_tmp st;
    fwd_tmp_alloc(arena, a, H, F, &t, &st);
    sdt_tensor lat = mu_alloc(arena, SDT_F32, 4, B, C, in->latent->shape[2], in->latent->shape[3]);
    sdt_tensor packed = mu_alloc(arena, SDT_F32, 3, B, N, 4 * C, 0);
    sdt_tensor tok = mu_alloc(arena, SDT_F32, 3, B, N, 4 * C, 0);
    sdt_tensor tproj = mu_alloc(arena, SDT_F32, 2, B, FLUX_TIME_DIM, 0, 0);
    sdt_tensor th = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0), tt = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    sdt_tensor tsteps = mu_alloc(arena, SDT_F32, 1, B, 0, 0, 0);
    bool ok = true;
    if (!arena->measuring) {
        ok = arena_ok(arena, "the Flux forward", error) &&
             run_forward(m, be, in, a, &t, &st, &lat, &packed, &tproj, &th, &tt, &tok, &tsteps, error);
    }
    sdt_arena_rewind(arena, mark);
    return ok;
}

/* ---------------------------------------------------------------- backward */

typedef struct single_scratch {
    sdt_tensor dX, dy, dn, dq, dk, dR; /* [B, S, H] */
    sdt_tensor dcat, da, dh;           /* [B, S, 5H], [B, S, 4H] x 2 */
} single_scratch;

/* d(rotated) -> d(normed) in place, through scratch dR */
static bool rope_back_inplace(sdt_backend *be, const flux_acts *a, sdt_tensor *d, sdt_tensor *dR, sdt_error *error)
{
    TRY(be->zero(be, dR));
    TRY(be->rope_backward(be, dR, d, &a->cos, &a->sin));
    TRY(be->convert(be, d, dR));
    return true;
}

/* One single-stream block backward: d(x_out) in G->dX becomes d(x) (accumulated in place); the modulation's
 * gradient reaches S->dst. dQ, dK, dV, dO are the joint scratch S->dJ. */
static bool single_backward(const flux_model *m, sdt_backend *be, const flux_acts *a, const flux_single_weights *W,
                            const flux_single_acts *s, const sdt_tensor *x, dit_bwd_scratch *S, single_scratch *G,
                            sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const int64_t H = (int64_t)c->heads * c->head_dim, B = a->batch;
    sdt_tensor dmod = dit_dmod_view(S, B, 3, H);
    TRY(be->zero(be, &dmod));
    if (!dit_gated_residual_backward(be, &G->dy, &dmod, &G->dX, &s->y, &s->mod, 2, &a->ones, &S->tmp, &S->tmp2, error))
        return false;
    TRY(be->linear_input_grad(be, &G->dcat, &G->dy, &W->out.w));
    sdt_tensor *dQ = &S->dJ[JQ], *dK = &S->dJ[JK], *dV = &S->dJ[JV], *dO = &S->dJ[JO];
    TRY(be->zero(be, dO));
    TRY(be->zero(be, &G->da));
    sdt_tensor dcat4 = as_channels(&G->dcat), dO4 = as_channels(dO), da4 = as_channels(&G->da);
    TRY(be->concat_channels_backward(be, &dO4, &da4, &dcat4));
    TRY(be->zero(be, &G->dh));
    TRY(be->activation_backward(be, &G->dh, &G->da, &s->h, SDT_ACT_GELU_TANH));
    TRY(be->linear_input_grad(be, &G->dn, &G->dh, &W->mlp.w));
    TRY(be->attention_backward(be, dQ, dK, dV, dO, &s->Q, &s->K, &s->v, &s->O, &s->lse, c->heads, false));
    if (!rope_back_inplace(be, a, dQ, &G->dR, error) || !rope_back_inplace(be, a, dK, &G->dR, error)) return false;
    const int hd = c->head_dim;
    sdt_tensor dqh = dit_heads_view(&G->dq, hd), dQh = dit_heads_view(dQ, hd), qh = dit_heads_view(&s->q, hd),
               dkh = dit_heads_view(&G->dk, hd), dKh = dit_heads_view(dK, hd), kh = dit_heads_view(&s->k, hd);
    TRY(be->zero(be, &G->dq));
    TRY(be->zero(be, &G->dk));
    TRY(be->rmsnorm_backward(be, &dqh, NULL, &dQh, &qh, &W->norm_q, &s->rstd_q));
    TRY(be->rmsnorm_backward(be, &dkh, NULL, &dKh, &kh, &W->norm_k, &s->rstd_k));
    TRY(be->linear_backward(be, &G->dn, NULL, NULL, &G->dq, &G->dn, &W->q.w));
    TRY(be->linear_backward(be, &G->dn, NULL, NULL, &G->dk, &G->dn, &W->k.w));
    TRY(be->linear_backward(be, &G->dn, NULL, NULL, dV, &G->dn, &W->v.w));
    if (!dit_modulated_ln_backward(be, &G->dX, &dmod, &S->dgam, &G->dn, x, &s->gamma, &s->mean, &s->rstd, 1, 0, error))
        return false;
    TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod, &a->silu_temb, &W->mod.w));
    return true;
}

static bool run_backward(const flux_model *m, sdt_backend *be, const flux_acts *a, const sdt_tensor *dout,
                         sdt_tensor *dcontext, sdt_tensor *dpooled, dit_bwd_scratch *S, single_scratch *G,
                         dit_fwd_tmp *t, single_tmp *st, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const int64_t B = a->batch, T = a->ctx_tokens, H = (int64_t)c->heads * c->head_dim;
    /* output: d(out) -> d(tokens) (host permutation) -> proj_out -> the final modulated LN */
    if (!repack(be, &S->dtok, dout, a, c->in_channels, false, error)) return false;
    TRY(be->zero(be, &S->dst));
    TRY(be->zero(be, &S->dX[0]));
    TRY(be->zero(be, &G->dX));
    TRY(be->linear_input_grad(be, &S->dn[0], &S->dtok, &m->proj_out.w));
    sdt_tensor dmod2 = dit_dmod_view(S, B, 2, H);
    TRY(be->zero(be, &dmod2));
    if (!dit_modulated_ln_backward(be, &S->dX[0], &dmod2, &S->dgam, &S->dn[0], &a->x_img, &a->out_gamma, &a->out_mean,
                                   &a->out_rstd, 0, 1, error))
        return false;
    TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod2, &a->silu_temb, &m->norm_out.w));
    if (!copy_rows(be, &G->dX, &S->dX[0], T, true, error)) return false; /* text rows stay zero */
    for (int l = c->single_layers - 1; l >= 0; l--) {
        const sdt_tensor *x = l ? &a->single[l - 1].x_out : &a->x_join;
        flux_single_acts s = single_bind(a, l, false);
        /* checkpointing: the block's forward again, from its kept input into the work set */
        if (a->checkpointing && !single_forward(m, be, a, &m->single[l], &s, x, st, &t->ones_h, error)) return false;
        if (!single_backward(m, be, a, &m->single[l], &s, x, S, G, error)) return false;
    }
    if (!copy_rows(be, &G->dX, &S->dX[1], 0, false, error) || !copy_rows(be, &G->dX, &S->dX[0], T, false, error))
        return false;
    const dit_dims dd = block_dims(c);
    const dit_env env = block_env(a);
    for (int l = c->double_layers - 1; l >= 0; l--) {
        const sdt_tensor *xi = l ? &a->img[l - 1].x_out : &a->img0, *xc = l ? &a->ctx[l - 1].x_out : &a->ctx0;
        dit_stream_acts si, sc;
        sdt_tensor J[5];
        double_bind(a, l, false, &si, &sc, J);
        if (a->checkpointing && !double_forward(m, be, a, l, &si, &sc, J, xi, xc, t, error)) return false;
        sdt_tensor dmod6 = dit_dmod_view(S, B, 6, H);
        TRY(be->zero(be, &dmod6));
        if (!dit_stream_post_backward(&m->ctx[l], &dd, be, &env, &sc, xc, S, 1, &dmod6, 0, error)) return false;
        TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod6, &a->silu_temb, &m->ctx[l].mod.w));
        TRY(be->zero(be, &dmod6));
        if (!dit_stream_post_backward(&m->img[l], &dd, be, &env, &si, xi, S, 0, &dmod6, T, error)) return false;
        TRY(be->linear_backward(be, &S->dst, NULL, NULL, &dmod6, &a->silu_temb, &m->img[l].mod.w));
        TRY(be->attention_backward(be, &S->dJ[JQ], &S->dJ[JK], &S->dJ[JV], &S->dJ[JO], &J[JQ], &J[JK], &J[JV], &J[JO],
                                   &J[JLSE], c->heads, false));
        if (!rope_back_inplace(be, a, &S->dJ[JQ], &G->dR, error) ||
            !rope_back_inplace(be, a, &S->dJ[JK], &G->dR, error))
            return false;
        TRY(be->zero(be, &dmod6));
        if (!dit_stream_pre_backward(&m->img[l], &dd, be, &env, &si, xi, S, 0, false, T, error)) return false;
        TRY(be->zero(be, &dmod6));
        if (!dit_stream_pre_backward(&m->ctx[l], &dd, be, &env, &sc, xc, S, 1, false, 0, error)) return false;
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

bool flux_backward(const flux_model *m, sdt_backend *be, sdt_arena *arena, const flux_acts *a, const sdt_tensor *dout,
                   sdt_tensor *dcontext, sdt_tensor *dpooled, sdt_error *error)
{
    const flux_config *c = &m->cfg;
    const int64_t B = a->batch, N = a->tokens, T = a->ctx_tokens, S = N + T, H = (int64_t)c->heads * c->head_dim,
                  F = H * c->mlp_ratio;
    if (!dout || dout->ndim != 4 || dout->dtype != SDT_F32 || !sdt_tensor_same_shape(dout, &a->out))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: d(output) must be an f32 tensor shaped like the output");
    if (dcontext && (dcontext->ndim != 3 || dcontext->shape[0] != B || dcontext->shape[1] != T ||
                     dcontext->shape[2] != c->context_dim || dcontext->dtype == SDT_I32))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: the context gradient must be a float tensor [%lld, %lld, %d]",
                        (long long)B, (long long)T, c->context_dim);
    if (dpooled && (dpooled->ndim != 2 || dpooled->shape[0] != B || dpooled->shape[1] != c->pooled_dim ||
                    dpooled->dtype == SDT_I32))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "flux: the pooled gradient must be a float tensor [%lld, %d]",
                        (long long)B, c->pooled_dim);
    if (!dcontext && !dpooled) return true;
    size_t mark = sdt_arena_mark(arena);
    dit_bwd_scratch s;
    memset(&s, 0, sizeof s);
    /* f32 for the residual streams' gradients and the modulation's, the branches' in the activation dtype (as
     * mmdit_backward) */
    const sdt_dtype dt = a->act_dtype;
    dit_bwd_scratch_streams(&s, arena, dt, B, N, T, H, F);
    s.dmod_flat = mu_alloc(arena, SDT_F32, 1, B * 6 * H, 0, 0, 0);
    s.dgam = mu_alloc(arena, SDT_F32, 2, 1, H, 0, 0);
    s.tmp = mu_alloc(arena, dt, 2, a->ones.shape[0], H, 0, 0);
    s.tmp2 = mu_alloc(arena, SDT_F32, 2, a->ones.shape[0], H, 0, 0);
    s.dst = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dtemb = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dpa = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dph = mu_alloc(arena, SDT_F32, 2, B, H, 0, 0);
    s.dtok = mu_alloc(arena, SDT_F32, 3, B, N, 4 * (int64_t)c->in_channels, 0);
    single_scratch g;
    g.dX = mu_alloc(arena, SDT_F32, 3, B, S, H, 0);
    sdt_tensor *bsh[] = {&g.dy, &g.dn, &g.dq, &g.dk, &g.dR};
    for (size_t i = 0; i < sizeof bsh / sizeof bsh[0]; i++) *bsh[i] = mu_alloc(arena, dt, 3, B, S, H, 0);
    g.dcat = mu_alloc(arena, dt, 3, B, S, H + F, 0);
    g.da = mu_alloc(arena, dt, 3, B, S, F, 0);
    g.dh = mu_alloc(arena, dt, 3, B, S, F, 0);
    dit_fwd_tmp t = {0};
    single_tmp st = {0};
    if (a->checkpointing) fwd_tmp_alloc(arena, a, H, F, &t, &st);
    bool ok = true;
    if (!arena->measuring)
        ok = arena_ok(arena, "the Flux backward", error) &&
             run_backward(m, be, a, dout, dcontext, dpooled, &s, &g, &t, &st, error);
    sdt_arena_rewind(arena, mark);
    return ok;
}
