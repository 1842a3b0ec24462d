/* t5_encoder.c - the T5 v1.1 encoder forward/backward; see t5_encoder.h. */
#include "t5_encoder.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_util.h"
#include "shared_math.h"

#define MODULE "t5_encoder"

/* ---------------------------------------------------------------- configs */

t5_config t5_config_xxl(void)
{
    t5_config c = {.vocab = 32128,
                   .d_model = 4096,
                   .layers = 24,
                   .heads = 64,
                   .d_kv = 64,
                   .d_ff = 10240,
                   .rel_buckets = 32,
                   .rel_max_distance = 128,
                   .ln_eps = 1e-6f};
    return c;
}

t5_config t5_config_tiny(void)
{
    t5_config c = {.vocab = 96,
                   .d_model = 32,
                   .layers = 3,
                   .heads = 4,
                   .d_kv = 6,
                   .d_ff = 40,
                   .rel_buckets = 32,
                   .rel_max_distance = 128,
                   .ln_eps = 1e-6f};
    return c;
}

bool t5_config_check(const t5_config *c, sdt_error *error)
{
    if (c->vocab <= 0 || c->d_model <= 0 || c->layers <= 0 || c->heads <= 0 || c->d_kv <= 0 || c->d_ff <= 0 ||
        c->layers > T5_MAX_LAYERS)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "t5_encoder: config vocab %d d_model %d layers %d heads %d d_kv %d d_ff %d is not a valid T5 "
                        "encoder (sizes must be positive, at most %d layers)",
                        c->vocab, c->d_model, c->layers, c->heads, c->d_kv, c->d_ff, T5_MAX_LAYERS);
    if (c->rel_buckets < 4 || c->rel_buckets % 2 || c->rel_max_distance <= c->rel_buckets / 4 || !(c->ln_eps >= 0))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "t5_encoder: %d relative-position buckets with max distance %d are not T5's kind (an even "
                        "count of at least 4, max distance above a quarter of it; T5 uses 32 and 128)",
                        c->rel_buckets, c->rel_max_distance);
    return true;
}

static int count_layers(const sdt_weights *w, const char *P)
{
    int n = 0;
    while (n < T5_MAX_LAYERS + 1 && mu_has(w, "%sencoder.block.%d.layer.0.layer_norm.weight", P, n)) n++;
    return n;
}

static const sdt_tensor *embedding_table(const sdt_weights *w, const char *P)
{
    const sdt_tensor *t = mu_get(w, "%sshared.weight", P);
    return t ? t : mu_get(w, "%sencoder.embed_tokens.weight", P);
}

bool t5_config_detect(const sdt_weights *w, const char *prefix, t5_config *cfg, sdt_error *error)
{
    const char *P = prefix ? prefix : "";
    if (strlen(P) >= T5_PREFIX_MAX)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "t5_encoder: key prefix \"%s\" is longer than %d characters",
                        P, T5_PREFIX_MAX - 1);
    t5_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.prefix, sizeof c.prefix, "%s", P);
    const sdt_tensor *emb = embedding_table(w, P);
    const sdt_tensor *rel = mu_get(w, "%sencoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", P);
    const sdt_tensor *q = mu_get(w, "%sencoder.block.0.layer.0.SelfAttention.q.weight", P);
    const sdt_tensor *wi0 = mu_get(w, "%sencoder.block.0.layer.1.DenseReluDense.wi_0.weight", P);
    if (!emb || emb->ndim != 2)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: no T5 encoder found (expected %sshared.weight or %sencoder.embed_tokens.weight, a [vocab, "
                        "d_model] matrix); give a T5 v1.1 encoder file such as t5xxl_fp16.safetensors",
                        sdt_weights_path(w), P, P);
    if (!wi0 && mu_has(w, "%sencoder.block.0.layer.1.DenseReluDense.wi.weight", P))
        return sdt_fail(
            error, SDT_ERR_UNSUPPORTED,
            "%s: this is a T5 v1.0 encoder (one ReLU feed-forward, %sencoder.block.0.layer.1.DenseReluDense."
            "wi.weight); SD3 and Flux use T5 v1.1 (gated GELU, wi_0 and wi_1): give a T5 v1.1 / T5-XXL file",
            sdt_weights_path(w), P);
    if (!rel || rel->ndim != 2 || !q || q->ndim != 2 || !wi0 || wi0->ndim != 2)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the T5 encoder's block 0 is incomplete (it needs %sencoder.block.0.layer.0.SelfAttention."
                        "q.weight, ...relative_attention_bias.weight and %sencoder.block.0.layer.1.DenseReluDense.wi_0."
                        "weight as matrices); the file is truncated or not a T5 v1.1 encoder",
                        sdt_weights_path(w), P, P);
    c.vocab = (int)emb->shape[0];
    c.d_model = (int)emb->shape[1];
    c.rel_buckets = (int)rel->shape[0];
    c.heads = (int)rel->shape[1];
    c.d_kv = c.heads > 0 && q->shape[0] % c.heads == 0 ? (int)(q->shape[0] / c.heads) : 0;
    c.d_ff = (int)wi0->shape[0];
    c.layers = count_layers(w, P);
    c.rel_max_distance = 128;
    c.ln_eps = 1e-6f;
    if (c.d_kv == 0)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: %sencoder.block.0.layer.0.SelfAttention.q.weight has %lld rows, not a multiple of the %d "
                        "heads the relative attention bias has; the file is not a T5 encoder",
                        sdt_weights_path(w), P, (long long)q->shape[0], c.heads);
    if (!t5_config_check(&c, error)) return false;
    *cfg = c;
    return true;
}

/* ---------------------------------------------------------------- parameters */

bool t5_params(const t5_config *c, sdt_param_visitor v, void *u)
{
    const char *P = c->prefix;
    const int64_t D = c->d_model, I = (int64_t)c->heads * c->d_kv, F = c->d_ff;
    int64_t emb[2] = {c->vocab, D}, vec[1] = {D}, qkv[2] = {I, D}, o[2] = {D, I}, wi[2] = {F, D}, wo[2] = {D, F};
    int64_t rel[2] = {c->rel_buckets, c->heads};
    const float std_q = 1.0f / sqrtf((float)(D * c->d_kv)), std_d = 1.0f / sqrtf((float)D);
    const float std_i = 1.0f / sqrtf((float)I), std_f = 1.0f / sqrtf((float)F);
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 1.0f, 2, emb, "%sshared.weight", P)) return false;
    for (int l = 0; l < c->layers; l++) {
        const char *B = "encoder.block";
        if (!mu_emit(v, u, SDT_INIT_NORMAL, std_q, 2, qkv, "%s%s.%d.layer.0.SelfAttention.q.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_d, 2, qkv, "%s%s.%d.layer.0.SelfAttention.k.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_d, 2, qkv, "%s%s.%d.layer.0.SelfAttention.v.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_i, 2, o, "%s%s.%d.layer.0.SelfAttention.o.weight", P, B, l))
            return false;
        if (l == 0 && !mu_emit(v, u, SDT_INIT_NORMAL, 0.5f, 2, rel,
                               "%s%s.0.layer.0.SelfAttention.relative_attention_bias.weight", P, B))
            return false;
        if (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%s%s.%d.layer.0.layer_norm.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_d, 2, wi, "%s%s.%d.layer.1.DenseReluDense.wi_0.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_d, 2, wi, "%s%s.%d.layer.1.DenseReluDense.wi_1.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_f, 2, wo, "%s%s.%d.layer.1.DenseReluDense.wo.weight", P, B, l) ||
            !mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%s%s.%d.layer.1.layer_norm.weight", P, B, l))
            return false;
    }
    return mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%sencoder.final_layer_norm.weight", P);
}

/* ---------------------------------------------------------------- loading */

/* mu_require with a T5 sentence for a missing key (the generic one speaks of Stable Diffusion checkpoints). */
static bool t5_require(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                       const char *key_fmt, ...) __attribute__((format(printf, 6, 7)));
static bool t5_require(const sdt_weights *w, sdt_tensor *out, int ndim, const int64_t *shape, sdt_error *error,
                       const char *key_fmt, ...)
{
    va_list ap;
    va_start(ap, key_fmt);
    bool ok = mu_vrequire_model(w, out, ndim, shape, error,
                                "the T5 encoder file is incomplete (truncated, or another model); use a complete T5 "
                                "v1.1 encoder file such as t5xxl_fp16.safetensors",
                                key_fmt, ap);
    va_end(ap);
    return ok;
}

static bool load_layer(t5_layer_weights *L, const t5_config *c, const sdt_weights *w, int l, sdt_error *error)
{
    const char *P = c->prefix;
    const int64_t D = c->d_model, I = (int64_t)c->heads * c->d_kv, F = c->d_ff;
    int64_t vec[1] = {D}, qkv[2] = {I, D}, o[2] = {D, I}, wi[2] = {F, D}, wo[2] = {D, F};
    return t5_require(w, &L->ln1_w, 1, vec, error, "%sencoder.block.%d.layer.0.layer_norm.weight", P, l) &&
           t5_require(w, &L->q_w, 2, qkv, error, "%sencoder.block.%d.layer.0.SelfAttention.q.weight", P, l) &&
           t5_require(w, &L->k_w, 2, qkv, error, "%sencoder.block.%d.layer.0.SelfAttention.k.weight", P, l) &&
           t5_require(w, &L->v_w, 2, qkv, error, "%sencoder.block.%d.layer.0.SelfAttention.v.weight", P, l) &&
           t5_require(w, &L->o_w, 2, o, error, "%sencoder.block.%d.layer.0.SelfAttention.o.weight", P, l) &&
           t5_require(w, &L->ln2_w, 1, vec, error, "%sencoder.block.%d.layer.1.layer_norm.weight", P, l) &&
           t5_require(w, &L->wi0_w, 2, wi, error, "%sencoder.block.%d.layer.1.DenseReluDense.wi_0.weight", P, l) &&
           t5_require(w, &L->wi1_w, 2, wi, error, "%sencoder.block.%d.layer.1.DenseReluDense.wi_1.weight", P, l) &&
           t5_require(w, &L->wo_w, 2, wo, error, "%sencoder.block.%d.layer.1.DenseReluDense.wo.weight", P, l);
}

bool t5_encoder_load(t5_encoder *m, const t5_config *cfg, const sdt_weights *w, sdt_error *error)
{
    if (!t5_config_check(cfg, error)) return false;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    const char *P = cfg->prefix;
    int64_t emb[2] = {cfg->vocab, cfg->d_model}, rel[2] = {cfg->rel_buckets, cfg->heads}, vec[1] = {cfg->d_model};
    /* transformers saves the tied table as shared.weight; some exports keep only encoder.embed_tokens.weight */
    bool has_shared = mu_has(w, "%sshared.weight", P);
    bool ok = (has_shared ? t5_require(w, &m->tok_emb, 2, emb, error, "%sshared.weight", P)
                          : t5_require(w, &m->tok_emb, 2, emb, error, "%sencoder.embed_tokens.weight", P)) &&
              t5_require(w, &m->rel_bias, 2, rel, error,
                         "%sencoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", P) &&
              t5_require(w, &m->lnf_w, 1, vec, error, "%sencoder.final_layer_norm.weight", P);
    for (int l = 0; ok && l < cfg->layers; l++) ok = load_layer(&m->layer[l], cfg, w, l, error);
    return ok;
}

bool t5_encoder_token_rows(const t5_encoder *m, sdt_backend *be, const int32_t *ids, int n, sdt_tensor *out,
                           sdt_error *error)
{
    if (!out || out->ndim != 2 || out->shape[0] != n || out->shape[1] != m->cfg.d_model || out->dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "t5_encoder: token rows go to a float tensor [%d, %d]", n,
                        m->cfg.d_model);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "t5_encoder: token id %d is outside the vocabulary of %d tokens",
                            ids[i], m->cfg.vocab);
        sdt_tensor dst = mu_rows(out, i, 1), src = mu_rows(&m->tok_emb, ids[i], 1);
        MU_TRY(be, error, MODULE, be->convert(be, &dst, &src));
    }
    return true;
}

/* ---------------------------------------------------------------- forward */

void t5_relative_buckets(const t5_config *c, int T, int32_t *out)
{
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            out[(int64_t)i * T + j] = t5_relative_bucket(j - i, c->rel_buckets, c->rel_max_distance);
}

static bool check_inputs(const t5_encoder *m, const t5_inputs *in, sdt_error *error)
{
    const t5_config *c = &m->cfg;
    const sdt_tensor *tok = in->tokens;
    if (!tok || tok->ndim != 2 || tok->dtype != SDT_I32 || tok->shape[0] < 1 || tok->shape[1] < 1)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "t5_encoder: tokens must be an I32 tensor [batch, length], both >= 1");
    if (in->act_dtype == SDT_I32)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "t5_encoder: activation dtype must be a float type (f32, f16 or bf16)");
    for (int64_t b = 0; in->lengths && b < tok->shape[0]; b++)
        if (in->lengths[b] < 1 || in->lengths[b] > tok->shape[1])
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "t5_encoder: sequence %lld has length %d, outside 1..%lld (at least its end token is "
                            "attended)",
                            (long long)b, in->lengths[b], (long long)tok->shape[1]);
    int64_t R = 0;
    if (in->n_overrides > 0) {
        if (!in->rows || !in->overrides || in->rows->ndim != 2 || in->rows->shape[1] != c->d_model ||
            in->rows->dtype == SDT_I32)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "t5_encoder: override rows must be a float tensor [rows, %d] (the encoder's d_model)",
                            c->d_model);
        R = in->rows->shape[0];
    }
    for (int i = 0; i < in->n_overrides; i++) {
        const t5_override *o = &in->overrides[i];
        if (o->batch < 0 || o->batch >= tok->shape[0] || o->position < 0 || o->position >= tok->shape[1] ||
            o->row < 0 || o->row >= R)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "t5_encoder: override %d (batch %d, position %d, row %d) is outside the batch [%lld, %lld] "
                            "or the %lld rows given",
                            i, o->batch, o->position, o->row, (long long)tok->shape[0], (long long)tok->shape[1],
                            (long long)R);
    }
    return true;
}

static bool arena_ok(const sdt_arena *ar, const char *what, sdt_error *error)
{
    if (sdt_arena_fits(ar)) return true;
    return sdt_fail(error, ar->error.code, "t5_encoder, %s: %s", what, ar->error.message);
}

/* bias[bb, h, i, j] = rel_bias[bucket(j - i), h], plus -inf at keys j >= lengths[bb] when masked. Built on
 * the host from the (small) table: the same numbers on every backend. */
static bool build_bias(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_inputs *in, t5_acts *a,
                       sdt_error *error)
{
    const t5_config *c = &m->cfg;
    const int T = a->seq, H = c->heads, NB = c->rel_buckets, Bb = (int)a->bias.shape[0];
    size_t mark = sdt_arena_mark(arena);
    sdt_tensor table = mu_alloc(arena, SDT_F32, 2, NB, H, 0, 0);
    if (!arena_ok(arena, "the relative position bias", error)) return false;
    const size_t n = (size_t)Bb * H * T * T;
    float *host = malloc(n * sizeof(float) + (size_t)NB * H * sizeof(float));
    int32_t *buckets = malloc((size_t)T * T * sizeof(int32_t));
    if (!host || !buckets) {
        free(host), free(buckets);
        sdt_arena_rewind(arena, mark);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "t5_encoder: out of memory building the %d x %d position bias", T,
                        T);
    }
    float *tab = host + n;
    bool ok = be->convert(be, &table, &m->rel_bias) == 0 &&
              be->download(be, tab, table.data, (size_t)NB * H * sizeof(float)) == 0;
    sdt_arena_rewind(arena, mark);
    if (ok) {
        t5_relative_buckets(c, T, buckets);
        for (int bb = 0; bb < Bb; bb++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    float *dst = host + (((size_t)bb * H + h) * T + i) * T;
                    const int valid = in->lengths ? in->lengths[bb] : T;
                    for (int j = 0; j < T; j++)
                        dst[j] = j < valid ? tab[(size_t)buckets[(size_t)i * T + j] * H + h] : -INFINITY;
                }
        ok = be->upload(be, a->bias.data, host, n * sizeof(float)) == 0;
    }
    free(host), free(buckets);
    if (!ok)
        return sdt_fail(error, be->error.code, "t5_encoder: the %s backend failed: %s", be->name, be->error.message);
    return true;
}

static void alloc_layer_acts(t5_layer_acts *a, const t5_config *c, sdt_arena *ar, int64_t B, int64_t T, sdt_dtype dt)
{
    const int64_t D = c->d_model, I = (int64_t)c->heads * c->d_kv, F = c->d_ff, N = B * T;
    a->rstd1 = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->q = mu_alloc(ar, dt, 3, B, T, I, 0);
    a->k = mu_alloc(ar, dt, 3, B, T, I, 0);
    a->v = mu_alloc(ar, dt, 3, B, T, I, 0);
    a->lse = mu_alloc(ar, SDT_F32, 3, B, c->heads, T, 0);
    a->attn = mu_alloc(ar, dt, 3, B, T, I, 0);
    a->x_mid = mu_alloc(ar, dt, 3, B, T, D, 0);
    a->rstd2 = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->gate = mu_alloc(ar, dt, 3, B, T, F, 0);
    a->up = mu_alloc(ar, dt, 3, B, T, F, 0);
    a->x_out = mu_alloc(ar, dt, 3, B, T, D, 0);
}

static bool layer_forward(const t5_layer_weights *L, const t5_config *c, sdt_backend *be, t5_acts *acts,
                          t5_layer_acts *a, const sdt_tensor *x_in, sdt_error *error)
{
    MU_TRY(be, error, MODULE, be->rmsnorm_forward(be, &acts->norm, &a->rstd1, x_in, &L->ln1_w, c->ln_eps));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->q, &acts->norm, &L->q_w, NULL));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->k, &acts->norm, &L->k_w, NULL));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->v, &acts->norm, &L->v_w, NULL));
    MU_TRY(be, error, MODULE,
           be->attention_bias_forward(be, &a->attn, &a->lse, &a->q, &a->k, &a->v, &acts->bias, c->heads, 1.0f));
    MU_TRY(be, error, MODULE, be->linear_residual_forward(be, &a->x_mid, &a->attn, &L->o_w, NULL, x_in));
    MU_TRY(be, error, MODULE, be->rmsnorm_forward(be, &acts->norm, &a->rstd2, &a->x_mid, &L->ln2_w, c->ln_eps));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->gate, &acts->norm, &L->wi0_w, NULL));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->up, &acts->norm, &L->wi1_w, NULL));
    MU_TRY(be, error, MODULE, be->gated_activation_forward(be, &acts->prod, &a->gate, &a->up, SDT_ACT_GELU_TANH));
    MU_TRY(be, error, MODULE, be->linear_residual_forward(be, &a->x_out, &acts->prod, &L->wo_w, NULL, &a->x_mid));
    return true;
}

bool t5_encoder_forward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_inputs *in, t5_acts *a,
                        sdt_error *error)
{
    if (!check_inputs(m, in, error)) return false;
    const t5_config *c = &m->cfg;
    memset(a, 0, sizeof(*a));
    a->batch = (int)in->tokens->shape[0];
    a->seq = (int)in->tokens->shape[1];
    a->act_dtype = in->act_dtype;
    if (in->n_overrides > 0) a->rows = *in->rows;
    a->overrides = in->overrides;
    a->n_overrides = in->n_overrides;
    const int64_t B = a->batch, T = a->seq, D = c->d_model;
    const sdt_dtype dt = in->act_dtype;

    a->bias = mu_alloc(arena, SDT_F32, 4, in->lengths ? B : 1, c->heads, T, T);
    a->x0 = mu_alloc(arena, dt, 3, B, T, D, 0);
    for (int l = 0; l < c->layers; l++) alloc_layer_acts(&a->layer[l], c, arena, B, T, dt);
    a->rstd_f = mu_alloc(arena, SDT_F32, 1, B * T, 0, 0, 0);
    a->out = mu_alloc(arena, dt, 3, B, T, D, 0);
    /* temporaries every layer overwrites: nothing in backward reads them */
    size_t mark = sdt_arena_mark(arena);
    a->norm = mu_alloc(arena, dt, 3, B, T, D, 0);
    a->prod = mu_alloc(arena, dt, 3, B, T, c->d_ff, 0);
    if (arena->measuring) {
        mu_alloc(arena, SDT_F32, 2, c->rel_buckets, c->heads, 0, 0); /* build_bias's table, on top of them */
        sdt_arena_rewind(arena, mark);
        return true;
    }
    bool ok = arena_ok(arena, "the T5 encoder forward", error) && build_bias(m, be, arena, in, a, error);
    if (ok && be->embedding_forward(be, &a->x0, in->tokens, &m->tok_emb, NULL) != 0)
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    sdt_tensor x0_rows = mu_reshape2(&a->x0, B * T, D);
    for (int i = 0; ok && i < in->n_overrides; i++) {
        const t5_override *o = &in->overrides[i];
        sdt_tensor slot = mu_rows(&x0_rows, (int64_t)o->batch * T + o->position, 1), row = mu_rows(in->rows, o->row, 1);
        if (be->convert(be, &slot, &row) != 0)
            ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    }
    const sdt_tensor *x = &a->x0;
    for (int l = 0; ok && l < c->layers; l++) {
        ok = layer_forward(&m->layer[l], c, be, a, &a->layer[l], x, error);
        x = &a->layer[l].x_out;
    }
    if (ok && be->rmsnorm_forward(be, &a->out, &a->rstd_f, x, &m->lnf_w, c->ln_eps) != 0)
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    sdt_arena_rewind(arena, mark);
    /* the temporaries are gone: keep their shapes only */
    a->norm.data = NULL;
    a->prod.data = NULL;
    return ok;
}

/* ---------------------------------------------------------------- backward */

typedef struct t5_grad_scratch {
    sdt_tensor dx;                   /* d(residual stream) [B, T, D], f32 */
    sdt_tensor d_h;                  /* d(norm output) [B, T, D] */
    sdt_tensor d_attn, dq, dk, dv;   /* [B, T, I] */
    sdt_tensor d_prod, d_gate, d_up; /* [B, T, F] */
} t5_grad_scratch;

/* dx holds d(x_out) on entry and d(x_in) on return. */
static bool layer_backward(const t5_layer_weights *L, const t5_config *c, sdt_backend *be, const t5_acts *acts,
                           const t5_layer_acts *a, const sdt_tensor *x_in, t5_grad_scratch *s, sdt_error *error)
{
    /* feed-forward: x_out = x_mid + wo(gelu_tanh(wi_0 h) * wi_1 h), h = rmsnorm(x_mid). The frozen linears'
     * input gradients that first reach a buffer are written (linear_input_grad); the rest accumulate. */
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_prod, &s->dx, &L->wo_w));
    MU_TRY(be, error, MODULE,
           be->gated_activation_backward(be, &s->d_gate, &s->d_up, &s->d_prod, &a->gate, &a->up, SDT_ACT_GELU_TANH));
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_h, &s->d_gate, &L->wi0_w));
    MU_TRY(be, error, MODULE, be->linear_backward(be, &s->d_h, NULL, NULL, &s->d_up, &acts->norm, &L->wi1_w));
    MU_TRY(be, error, MODULE, be->rmsnorm_backward(be, &s->dx, NULL, &s->d_h, &a->x_mid, &L->ln2_w, &a->rstd2));
    /* attention: x_mid = x_in + o(attn(q, k, v of rmsnorm(x_in))) */
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_attn, &s->dx, &L->o_w));
    MU_TRY(be, error, MODULE,
           be->attention_bias_backward(be, &s->dq, &s->dk, &s->dv, &s->d_attn, &a->q, &a->k, &a->v, &a->attn, &a->lse,
                                       &acts->bias, c->heads, 1.0f));
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_h, &s->dq, &L->q_w));
    MU_TRY(be, error, MODULE, be->linear_backward(be, &s->d_h, NULL, NULL, &s->dk, &acts->norm, &L->k_w));
    MU_TRY(be, error, MODULE, be->linear_backward(be, &s->d_h, NULL, NULL, &s->dv, &acts->norm, &L->v_w));
    MU_TRY(be, error, MODULE, be->rmsnorm_backward(be, &s->dx, NULL, &s->d_h, x_in, &L->ln1_w, &a->rstd1));
    return true;
}

bool t5_encoder_backward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_acts *a,
                         const sdt_tensor *dout, sdt_tensor *drows, sdt_error *error)
{
    const t5_config *c = &m->cfg;
    const int64_t B = a->batch, T = a->seq, D = c->d_model, I = (int64_t)c->heads * c->d_kv, F = c->d_ff;
    if (!dout || dout->ndim != 3 || dout->shape[0] != B || dout->shape[1] != T || dout->shape[2] != D)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "t5_encoder: d(output) must have the forward output's shape [%lld, %lld, %lld]", (long long)B,
                        (long long)T, (long long)D);
    if (a->n_overrides > 0 && (!drows || drows->ndim != 2 || drows->shape[0] != a->rows.shape[0] ||
                               drows->shape[1] != D || drows->dtype == SDT_I32))
        return sdt_fail(
            error, SDT_ERR_BAD_FORMAT,
            "t5_encoder: the row gradient must be a float tensor shaped like the override rows [%lld, %lld]",
            (long long)a->rows.shape[0], (long long)D);
    if (a->n_overrides == 0) return true; /* nothing trainable upstream: no work */

    size_t mark = sdt_arena_mark(arena);
    const sdt_dtype dt = a->act_dtype;
    t5_grad_scratch s;
    /* The residual-stream gradient sums many branches: keep it f32 whatever the activation dtype. */
    s.dx = mu_alloc(arena, SDT_F32, 3, B, T, D, 0);
    s.d_h = mu_alloc(arena, dt, 3, B, T, D, 0);
    s.d_attn = mu_alloc(arena, dt, 3, B, T, I, 0);
    s.dq = mu_alloc(arena, dt, 3, B, T, I, 0);
    s.dk = mu_alloc(arena, dt, 3, B, T, I, 0);
    s.dv = mu_alloc(arena, dt, 3, B, T, I, 0);
    s.d_prod = mu_alloc(arena, dt, 3, B, T, F, 0);
    s.d_gate = mu_alloc(arena, dt, 3, B, T, F, 0);
    s.d_up = mu_alloc(arena, dt, 3, B, T, F, 0);
    bool ok = true;
    if (arena->measuring) goto done;
    if (!(ok = arena_ok(arena, "the T5 encoder backward", error))) goto done;
    const sdt_tensor *x_last = &a->layer[c->layers - 1].x_out;
    if (be->zero(be, &s.dx) != 0 || be->rmsnorm_backward(be, &s.dx, NULL, dout, x_last, &m->lnf_w, &a->rstd_f) != 0) {
        ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
        goto done;
    }
    for (int l = c->layers - 1; ok && l >= 0; l--) {
        const sdt_tensor *x_in = l > 0 ? &a->layer[l - 1].x_out : &a->x0;
        ok = layer_backward(&m->layer[l], c, be, a, &a->layer[l], x_in, &s, error);
    }
    /* the embedding passes d(x0) straight to each overridden row */
    sdt_tensor dx2 = mu_reshape2(&s.dx, B * T, D);
    for (int i = 0; ok && i < a->n_overrides; i++) {
        const t5_override *o = &a->overrides[i];
        sdt_tensor slot = mu_rows(&dx2, (int64_t)o->batch * T + o->position, 1), drow = mu_rows(drows, o->row, 1);
        if (be->axpy(be, &drow, 1.0f, &slot) != 0)
            ok = sdt_fail(error, be->error.code, "%s: the %s backend failed: %s", MODULE, be->name, be->error.message);
    }
done:
    sdt_arena_rewind(arena, mark);
    return ok;
}
