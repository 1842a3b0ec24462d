/* clip_text.c - CLIP text encoder forward/backward; see clip_text.h. */
#include "clip_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_util.h"

#define MODULE "clip_text"

/* ---------------------------------------------------------------- configs */

clip_config clip_config_sd1(void)
{
    clip_config c = {.vocab = 49408,
                     .width = 768,
                     .layers = 12,
                     .heads = 12,
                     .positions = 77,
                     .mlp_width = 3072,
                     .act = SDT_ACT_QUICK_GELU,
                     .default_skip = 1,
                     .ln_eps = 1e-5f,
                     .layout = CLIP_LAYOUT_HF};
    return c;
}

clip_config clip_config_sd2(void)
{
    clip_config c = {.vocab = 49408,
                     .width = 1024,
                     .layers = 24,
                     .heads = 16,
                     .positions = 77,
                     .mlp_width = 4096,
                     .act = SDT_ACT_GELU,
                     .default_skip = 2,
                     .ln_eps = 1e-5f,
                     .layout = CLIP_LAYOUT_OPENCLIP,
                     .pad_zero = true};
    return c;
}

clip_config clip_config_tiny(void)
{
    clip_config c = {.vocab = 1000,
                     .width = 128,
                     .layers = 3,
                     .heads = 2,
                     .positions = 77,
                     .mlp_width = 512,
                     .act = SDT_ACT_QUICK_GELU,
                     .default_skip = 1,
                     .ln_eps = 1e-5f,
                     .layout = CLIP_LAYOUT_HF};
    return c;
}

clip_config clip_config_sdxl_l(void)
{
    clip_config c = clip_config_sd1();
    c.slot = CLIP_SLOT_SDXL_L;
    c.default_skip = 2; /* sgm: layer "hidden", layer_idx 11 of 12 */
    c.context_without_final_norm = true;
    return c;
}

clip_config clip_config_sdxl_g(void)
{
    clip_config c = {.vocab = 49408,
                     .width = 1280,
                     .layers = 32,
                     .heads = 20,
                     .positions = 77,
                     .mlp_width = 5120,
                     .act = SDT_ACT_GELU,
                     .default_skip = 2,
                     .ln_eps = 1e-5f,
                     .layout = CLIP_LAYOUT_OPENCLIP,
                     .slot = CLIP_SLOT_SDXL_G,
                     .context_without_final_norm = true,
                     .projection_dim = 1280,
                     .pad_zero = true};
    return c;
}

clip_config clip_config_tiny_sdxl_l(void)
{
    clip_config c = clip_config_sdxl_l();
    c.vocab = 1000, c.width = 32, c.layers = 3, c.heads = 1, c.mlp_width = 128;
    return c;
}

clip_config clip_config_tiny_sdxl_g(void)
{
    clip_config c = clip_config_sdxl_g();
    c.vocab = 1000, c.width = 48, c.layers = 3, c.heads = 1, c.mlp_width = 192, c.projection_dim = 48;
    return c;
}

const char *clip_key_prefix(const clip_config *c)
{
    static const char *const prefixes[5][2] = {
        {"cond_stage_model.transformer.text_model.", "cond_stage_model.model."},
        {"conditioner.embedders.0.transformer.text_model.", "conditioner.embedders.0.model."},
        {"conditioner.embedders.1.transformer.text_model.", "conditioner.embedders.1.model."},
        /* SD3's files keep the encoders in transformers' names only; the OpenCLIP column is never found */
        {"text_encoders.clip_l.transformer.text_model.", "text_encoders.clip_l.transformer.text_model."},
        {"text_encoders.clip_g.transformer.text_model.", "text_encoders.clip_g.transformer.text_model."},
    };
    int slot = c->slot >= CLIP_SLOT_COND_STAGE && c->slot <= CLIP_SLOT_SD3_G ? (int)c->slot : 0;
    return prefixes[slot][c->layout == CLIP_LAYOUT_OPENCLIP];
}

int clip_pooled_dim(const clip_config *c)
{
    return c->projection_dim > 0 ? c->projection_dim : c->pooled_without_projection ? c->width : 0;
}

int32_t clip_pad_id(const clip_config *c, int32_t end_id)
{
    return c->pad_zero ? 0 : end_id;
}

/* transformers keeps CLIPTextModelWithProjection's projection beside text_model, not in it. */
static const char *hf_projection_key(const clip_config *c)
{
    return c->slot == CLIP_SLOT_SDXL_G   ? "conditioner.embedders.1.transformer.text_projection.weight"
           : c->slot == CLIP_SLOT_SDXL_L ? "conditioner.embedders.0.transformer.text_projection.weight"
           : c->slot == CLIP_SLOT_SD3_L  ? "text_encoders.clip_l.transformer.text_projection.weight"
           : c->slot == CLIP_SLOT_SD3_G  ? "text_encoders.clip_g.transformer.text_projection.weight"
                                         : "cond_stage_model.transformer.text_projection.weight";
}

bool clip_config_check(const clip_config *c, sdt_error *error)
{
    if (c->vocab <= 0 || c->width <= 0 || c->layers <= 0 || c->heads <= 0 || c->positions <= 0 || c->mlp_width <= 0 ||
        c->width % c->heads != 0 || c->projection_dim < 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: config vocab %d width %d layers %d heads %d positions %d is not a valid "
                 "text encoder (sizes must be positive and width divisible by heads)",
                 c->vocab, c->width, c->layers, c->heads, c->positions);
        return false;
    }
    if (c->layers > CLIP_MAX_LAYERS || c->default_skip < 1 || c->default_skip > c->layers) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: %d layers with default skip %d is outside what this build supports "
                 "(at most %d layers, skip between 1 and layers)",
                 c->layers, c->default_skip, CLIP_MAX_LAYERS);
        return false;
    }
    return true;
}

static int count_layers(const sdt_weights *w, const char *P, clip_layout layout)
{
    int n = 0;
    while (n < CLIP_MAX_LAYERS + 1 &&
           (layout == CLIP_LAYOUT_HF ? mu_has(w, "%sencoder.layers.%d.layer_norm1.weight", P, n)
                                     : mu_has(w, "%stransformer.resblocks.%d.ln_1.weight", P, n)))
        n++;
    return n;
}

/* SDXL's and SD3's conditioning (the penultimate layer, no final norm), whatever layout stores the encoder. */
static bool two_encoder_slot_config(const sdt_weights *w, clip_config *c, sdt_error *error)
{
    c->default_skip = 2;
    c->context_without_final_norm = true;
    bool sd3 = c->slot == CLIP_SLOT_SD3_L || c->slot == CLIP_SLOT_SD3_G;
    if (c->slot == CLIP_SLOT_SDXL_L || c->slot == CLIP_SLOT_SD3_L) {
        c->act = SDT_ACT_QUICK_GELU;
        if (c->slot == CLIP_SLOT_SDXL_L) return true; /* SD3's CLIP-L has a projection too (its pooled half) */
    } else {
        c->act = SDT_ACT_GELU;
        c->pad_zero = true;
    }
    bool hf = c->layout == CLIP_LAYOUT_HF;
    const sdt_tensor *proj =
        hf ? sdt_weights_get(w, hf_projection_key(c)) : mu_get(w, "%stext_projection", clip_key_prefix(c));
    if (!proj || proj->ndim != 2 || proj->shape[hf ? 1 : 0] != c->width) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: %s needs its projection %s as a [%s] matrix for the pooled output; use a complete %s",
                 sdt_weights_path(w),
                 sd3 ? (c->slot == CLIP_SLOT_SD3_L ? "SD3's CLIP-L" : "SD3's CLIP-G (OpenCLIP bigG)")
                     : "SDXL's second text encoder (OpenCLIP bigG)",
                 hf ? hf_projection_key(c) : "conditioner.embedders.1.model.text_projection",
                 hf ? "projection, width" : "width, projection",
                 sd3 ? "text encoder file (clip_l.safetensors / clip_g.safetensors)" : "SDXL checkpoint");
        return false;
    }
    c->projection_dim = (int)proj->shape[hf ? 0 : 1];
    return true;
}

bool clip_config_detect(const sdt_weights *w, clip_config *cfg, sdt_error *error)
{
    return clip_config_detect_at(w, CLIP_SLOT_COND_STAGE, cfg, error);
}

void clip_config_as_pooler(clip_config *c)
{
    c->act = SDT_ACT_QUICK_GELU;
    c->default_skip = 1;
    c->context_without_final_norm = false;
    c->pad_zero = false;
    c->projection_dim = 0;
    c->pooled_without_projection = true;
}

static bool detect_at(const sdt_weights *w, clip_slot slot, bool pooler, clip_config *cfg, sdt_error *error);

bool clip_config_detect_at(const sdt_weights *w, clip_slot slot, clip_config *cfg, sdt_error *error)
{
    return detect_at(w, slot, false, cfg, error);
}

bool clip_config_detect_pooler(const sdt_weights *w, clip_slot slot, clip_config *cfg, sdt_error *error)
{
    return detect_at(w, slot, true, cfg, error);
}

static bool detect_at(const sdt_weights *w, clip_slot slot, bool pooler, clip_config *cfg, sdt_error *error)
{
    clip_config c;
    memset(&c, 0, sizeof(c));
    c.slot = slot;
    c.layout = CLIP_LAYOUT_HF;
    const char *P = clip_key_prefix(&c);
    const sdt_tensor *tok = mu_get(w, "%sembeddings.token_embedding.weight", P);
    const sdt_tensor *pos = mu_get(w, "%sembeddings.position_embedding.weight", P);
    if (!tok) {
        c.layout = CLIP_LAYOUT_OPENCLIP;
        P = clip_key_prefix(&c);
        tok = mu_get(w, "%stoken_embedding.weight", P);
        pos = mu_get(w, "%spositional_embedding", P);
    }
    if (!tok || !pos || tok->ndim != 2 || pos->ndim != 2 || tok->shape[1] != pos->shape[1]) {
        clip_config hf = c, oc = c;
        hf.layout = CLIP_LAYOUT_HF;
        oc.layout = CLIP_LAYOUT_OPENCLIP;
        const char *part = slot == CLIP_SLOT_COND_STAGE ? "cond_stage_model." : clip_key_prefix(&hf);
        if (sdt_weights_missing_part(w, part, error)) return false;
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: no text encoder found (expected %sembeddings.token_embedding.weight or "
                 "%stoken_embedding.weight with a matching position embedding); use a full SD checkpoint",
                 sdt_weights_path(w), clip_key_prefix(&hf), clip_key_prefix(&oc));
        return false;
    }
    c.vocab = (int)tok->shape[0];
    c.width = (int)tok->shape[1];
    c.positions = (int)pos->shape[0];
    c.heads = c.width / 64 > 0 ? c.width / 64 : 1;
    c.mlp_width = 4 * c.width;
    c.layers = count_layers(w, P, c.layout);
    c.ln_eps = 1e-5f;
    const sdt_tensor *fc1 = c.layout == CLIP_LAYOUT_HF ? mu_get(w, "%sencoder.layers.0.mlp.fc1.weight", P)
                                                       : mu_get(w, "%stransformer.resblocks.0.mlp.c_fc.weight", P);
    if (fc1 && fc1->ndim == 2) c.mlp_width = (int)fc1->shape[0];
    if (pooler) {
        clip_config_as_pooler(&c);
    } else if (slot != CLIP_SLOT_COND_STAGE) {
        if (!two_encoder_slot_config(w, &c, error)) return false;
    } else if (c.layout == CLIP_LAYOUT_OPENCLIP) {
        c.act = SDT_ACT_GELU;
        c.default_skip = 2; /* SD 2.x conditions on the penultimate layer */
        c.pad_zero = true;
    } else {
        /* diffusers stores SD 2.x's OpenCLIP-H in the HF layout with 23 layers already cut. */
        c.act = c.width == 1024 ? SDT_ACT_GELU : SDT_ACT_QUICK_GELU;
        c.pad_zero = c.width == 1024;
        c.default_skip = 1;
    }
    if (!clip_config_check(&c, error)) return false;
    *cfg = c;
    return true;
}

/* ---------------------------------------------------------------- parameters */

static bool clip_params_hf(const clip_config *c, sdt_param_visitor v, void *u)
{
    const char *P = clip_key_prefix(c);
    int64_t C = c->width, M = c->mlp_width;
    int64_t tok[2] = {c->vocab, C}, pos[2] = {c->positions, C}, vec[1] = {C}, sq[2] = {C, C};
    int64_t fc1[2] = {M, C}, fc1b[1] = {M}, fc2[2] = {C, M};
    float std_c = 1.0f / sqrtf((float)C), std_m = 1.0f / sqrtf((float)M);
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 0.02f, 2, tok, "%sembeddings.token_embedding.weight", P)) return false;
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 0.01f, 2, pos, "%sembeddings.position_embedding.weight", P)) return false;
    static const char *proj[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int i = 0; i < c->layers; i++) {
        if (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%sencoder.layers.%d.layer_norm1.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sencoder.layers.%d.layer_norm1.bias", P, i))
            return false;
        for (int p = 0; p < 4; p++)
            if (!mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, sq, "%sencoder.layers.%d.self_attn.%s.weight", P, i,
                         proj[p]) ||
                !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sencoder.layers.%d.self_attn.%s.bias", P, i, proj[p]))
                return false;
        if (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%sencoder.layers.%d.layer_norm2.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sencoder.layers.%d.layer_norm2.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, fc1, "%sencoder.layers.%d.mlp.fc1.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, fc1b, "%sencoder.layers.%d.mlp.fc1.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_m, 2, fc2, "%sencoder.layers.%d.mlp.fc2.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sencoder.layers.%d.mlp.fc2.bias", P, i))
            return false;
    }
    int64_t text_proj[2] = {c->projection_dim, C}; /* transformers' Linear weight [out, in], no bias */
    return mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%sfinal_layer_norm.weight", P) &&
           mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sfinal_layer_norm.bias", P) &&
           (c->projection_dim == 0 || mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, text_proj, "%s", hf_projection_key(c)));
}

static bool clip_params_openclip(const clip_config *c, sdt_param_visitor v, void *u)
{
    const char *P = clip_key_prefix(c);
    int64_t C = c->width, M = c->mlp_width;
    int64_t tok[2] = {c->vocab, C}, pos[2] = {c->positions, C}, vec[1] = {C}, sq[2] = {C, C};
    int64_t in_w[2] = {3 * C, C}, in_b[1] = {3 * C}, fc1[2] = {M, C}, fc1b[1] = {M}, fc2[2] = {C, M};
    float std_c = 1.0f / sqrtf((float)C), std_m = 1.0f / sqrtf((float)M);
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 0.02f, 2, tok, "%stoken_embedding.weight", P)) return false;
    if (!mu_emit(v, u, SDT_INIT_NORMAL, 0.01f, 2, pos, "%spositional_embedding", P)) return false;
    for (int i = 0; i < c->layers; i++) {
        if (!mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%stransformer.resblocks.%d.ln_1.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%stransformer.resblocks.%d.ln_1.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, in_w, "%stransformer.resblocks.%d.attn.in_proj_weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, in_b, "%stransformer.resblocks.%d.attn.in_proj_bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, sq, "%stransformer.resblocks.%d.attn.out_proj.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%stransformer.resblocks.%d.attn.out_proj.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%stransformer.resblocks.%d.ln_2.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%stransformer.resblocks.%d.ln_2.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, fc1, "%stransformer.resblocks.%d.mlp.c_fc.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, fc1b, "%stransformer.resblocks.%d.mlp.c_fc.bias", P, i) ||
            !mu_emit(v, u, SDT_INIT_NORMAL, std_m, 2, fc2, "%stransformer.resblocks.%d.mlp.c_proj.weight", P, i) ||
            !mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%stransformer.resblocks.%d.mlp.c_proj.bias", P, i))
            return false;
    }
    int64_t scalar[1] = {1}, proj[2] = {C, c->projection_dim > 0 ? c->projection_dim : C}; /* [in, out] */
    return mu_emit(v, u, SDT_INIT_ONES, 0, 1, vec, "%sln_final.weight", P) &&
           mu_emit(v, u, SDT_INIT_ZEROS, 0, 1, vec, "%sln_final.bias", P) &&
           mu_emit(v, u, SDT_INIT_NORMAL, std_c, 2, proj, "%stext_projection", P) &&
           mu_emit(v, u, SDT_INIT_ONES, 0, 0, scalar, "%slogit_scale", P);
}

bool clip_params(const clip_config *cfg, sdt_param_visitor visit, void *user)
{
    return cfg->layout == CLIP_LAYOUT_HF ? clip_params_hf(cfg, visit, user) : clip_params_openclip(cfg, visit, user);
}

/* ---------------------------------------------------------------- loading */

static bool load_layer_hf(clip_layer_weights *L, const clip_config *c, const sdt_weights *w, int i, sdt_error *error)
{
    const char *P = clip_key_prefix(c);
    int64_t C = c->width, M = c->mlp_width;
    int64_t vec[1] = {C}, sq[2] = {C, C}, fc1[2] = {M, C}, fc1b[1] = {M}, fc2[2] = {C, M};
    return mu_require(w, &L->ln1_w, 1, vec, error, "%sencoder.layers.%d.layer_norm1.weight", P, i) &&
           mu_require(w, &L->ln1_b, 1, vec, error, "%sencoder.layers.%d.layer_norm1.bias", P, i) &&
           mu_require(w, &L->q_w, 2, sq, error, "%sencoder.layers.%d.self_attn.q_proj.weight", P, i) &&
           mu_require(w, &L->q_b, 1, vec, error, "%sencoder.layers.%d.self_attn.q_proj.bias", P, i) &&
           mu_require(w, &L->k_w, 2, sq, error, "%sencoder.layers.%d.self_attn.k_proj.weight", P, i) &&
           mu_require(w, &L->k_b, 1, vec, error, "%sencoder.layers.%d.self_attn.k_proj.bias", P, i) &&
           mu_require(w, &L->v_w, 2, sq, error, "%sencoder.layers.%d.self_attn.v_proj.weight", P, i) &&
           mu_require(w, &L->v_b, 1, vec, error, "%sencoder.layers.%d.self_attn.v_proj.bias", P, i) &&
           mu_require(w, &L->o_w, 2, sq, error, "%sencoder.layers.%d.self_attn.out_proj.weight", P, i) &&
           mu_require(w, &L->o_b, 1, vec, error, "%sencoder.layers.%d.self_attn.out_proj.bias", P, i) &&
           mu_require(w, &L->ln2_w, 1, vec, error, "%sencoder.layers.%d.layer_norm2.weight", P, i) &&
           mu_require(w, &L->ln2_b, 1, vec, error, "%sencoder.layers.%d.layer_norm2.bias", P, i) &&
           mu_require(w, &L->fc1_w, 2, fc1, error, "%sencoder.layers.%d.mlp.fc1.weight", P, i) &&
           mu_require(w, &L->fc1_b, 1, fc1b, error, "%sencoder.layers.%d.mlp.fc1.bias", P, i) &&
           mu_require(w, &L->fc2_w, 2, fc2, error, "%sencoder.layers.%d.mlp.fc2.weight", P, i) &&
           mu_require(w, &L->fc2_b, 1, vec, error, "%sencoder.layers.%d.mlp.fc2.bias", P, i);
}

static bool load_layer_openclip(clip_layer_weights *L, const clip_config *c, const sdt_weights *w, int i,
                                sdt_error *error)
{
    const char *P = clip_key_prefix(c);
    int64_t C = c->width, M = c->mlp_width;
    int64_t vec[1] = {C}, sq[2] = {C, C}, in_w[2] = {3 * C, C}, in_b[1] = {3 * C};
    int64_t fc1[2] = {M, C}, fc1b[1] = {M}, fc2[2] = {C, M};
    sdt_tensor qkv_w, qkv_b;
    if (!mu_require(w, &L->ln1_w, 1, vec, error, "%stransformer.resblocks.%d.ln_1.weight", P, i) ||
        !mu_require(w, &L->ln1_b, 1, vec, error, "%stransformer.resblocks.%d.ln_1.bias", P, i) ||
        !mu_require(w, &qkv_w, 2, in_w, error, "%stransformer.resblocks.%d.attn.in_proj_weight", P, i) ||
        !mu_require(w, &qkv_b, 1, in_b, error, "%stransformer.resblocks.%d.attn.in_proj_bias", P, i) ||
        !mu_require(w, &L->o_w, 2, sq, error, "%stransformer.resblocks.%d.attn.out_proj.weight", P, i) ||
        !mu_require(w, &L->o_b, 1, vec, error, "%stransformer.resblocks.%d.attn.out_proj.bias", P, i) ||
        !mu_require(w, &L->ln2_w, 1, vec, error, "%stransformer.resblocks.%d.ln_2.weight", P, i) ||
        !mu_require(w, &L->ln2_b, 1, vec, error, "%stransformer.resblocks.%d.ln_2.bias", P, i) ||
        !mu_require(w, &L->fc1_w, 2, fc1, error, "%stransformer.resblocks.%d.mlp.c_fc.weight", P, i) ||
        !mu_require(w, &L->fc1_b, 1, fc1b, error, "%stransformer.resblocks.%d.mlp.c_fc.bias", P, i) ||
        !mu_require(w, &L->fc2_w, 2, fc2, error, "%stransformer.resblocks.%d.mlp.c_proj.weight", P, i) ||
        !mu_require(w, &L->fc2_b, 1, vec, error, "%stransformer.resblocks.%d.mlp.c_proj.bias", P, i))
        return false;
    /* torch.nn.MultiheadAttention packs q, k, v as consecutive row blocks. */
    L->q_w = mu_rows(&qkv_w, 0, C);
    L->k_w = mu_rows(&qkv_w, C, C);
    L->v_w = mu_rows(&qkv_w, 2 * C, C);
    L->q_b = mu_rows(&qkv_b, 0, C);
    L->k_b = mu_rows(&qkv_b, C, C);
    L->v_b = mu_rows(&qkv_b, 2 * C, C);
    return true;
}

bool clip_text_load(clip_text_model *m, const clip_config *cfg, const sdt_weights *w, sdt_error *error)
{
    if (!clip_config_check(cfg, error)) return false;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    int64_t C = cfg->width;
    int64_t tok[2] = {cfg->vocab, C}, pos[2] = {cfg->positions, C}, vec[1] = {C};
    bool hf = cfg->layout == CLIP_LAYOUT_HF;
    const char *P = clip_key_prefix(cfg);
    bool ok = hf ? mu_require(w, &m->tok_emb, 2, tok, error, "%sembeddings.token_embedding.weight", P) &&
                       mu_require(w, &m->pos_emb, 2, pos, error, "%sembeddings.position_embedding.weight", P) &&
                       mu_require(w, &m->lnf_w, 1, vec, error, "%sfinal_layer_norm.weight", P) &&
                       mu_require(w, &m->lnf_b, 1, vec, error, "%sfinal_layer_norm.bias", P)
                 : mu_require(w, &m->tok_emb, 2, tok, error, "%stoken_embedding.weight", P) &&
                       mu_require(w, &m->pos_emb, 2, pos, error, "%spositional_embedding", P) &&
                       mu_require(w, &m->lnf_w, 1, vec, error, "%sln_final.weight", P) &&
                       mu_require(w, &m->lnf_b, 1, vec, error, "%sln_final.bias", P);
    for (int i = 0; ok && i < cfg->layers; i++)
        ok = hf ? load_layer_hf(&m->layer[i], cfg, w, i, error) : load_layer_openclip(&m->layer[i], cfg, w, i, error);
    int64_t proj_hf[2] = {cfg->projection_dim, C}, proj_oc[2] = {C, cfg->projection_dim};
    if (ok && cfg->projection_dim > 0)
        ok = hf ? mu_require(w, &m->proj, 2, proj_hf, error, "%s", hf_projection_key(cfg))
                : mu_require(w, &m->proj, 2, proj_oc, error, "%stext_projection", P);
    return ok;
}

bool clip_text_token_rows(const clip_text_model *m, sdt_backend *be, const int32_t *ids, int n, sdt_tensor *out,
                          sdt_error *error)
{
    if (!out || out->ndim != 2 || out->shape[0] != n || out->shape[1] != m->cfg.width || out->dtype == SDT_I32) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "clip_text: token rows go to a float tensor [%d, %d]", n, m->cfg.width);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "clip_text: token id %d is outside the vocabulary of %d tokens", ids[i],
                     m->cfg.vocab);
            return false;
        }
        sdt_tensor dst = mu_rows(out, i, 1), src = mu_rows(&m->tok_emb, ids[i], 1);
        MU_TRY(be, error, MODULE, be->convert(be, &dst, &src));
    }
    return true;
}

/* ---------------------------------------------------------------- forward */

static int layers_to_run(const clip_config *c, int clip_skip)
{
    int skip = clip_skip > 0 ? clip_skip : c->default_skip;
    return c->layers - (skip - 1);
}

static bool check_inputs(const clip_text_model *m, const clip_text_inputs *in, sdt_error *error)
{
    const clip_config *c = &m->cfg;
    const sdt_tensor *tok = in->tokens;
    if (!tok || tok->ndim != 2 || tok->dtype != SDT_I32 || tok->shape[1] < 1 || tok->shape[1] > c->positions ||
        tok->shape[0] < 1) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: tokens must be an I32 tensor [batch, length] with 1 <= length <= %d", c->positions);
        return false;
    }
    int n = layers_to_run(c, in->clip_skip);
    if (in->clip_skip < 0 || n < 1) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: CLIP skip %d is out of range for a %d-layer text encoder; use 1 to %d", in->clip_skip,
                 c->layers, c->layers);
        return false;
    }
    if (in->act_dtype == SDT_I32) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "clip_text: activation dtype must be a float type (f32, f16 or bf16)");
        return false;
    }
    int64_t R = 0;
    if (in->n_overrides > 0) {
        if (!in->rows || !in->overrides || in->rows->ndim != 2 || in->rows->shape[1] != c->width ||
            in->rows->dtype == SDT_I32) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "clip_text: override rows must be a float tensor [rows, %d] (the text encoder width)", c->width);
            return false;
        }
        R = in->rows->shape[0];
    }
    for (int i = 0; i < in->n_overrides; i++) {
        const clip_override *o = &in->overrides[i];
        if (o->batch < 0 || o->batch >= tok->shape[0] || o->position < 0 || o->position >= tok->shape[1] ||
            o->row < 0 || o->row >= R) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "clip_text: override %d (batch %d, position %d, row %d) is outside the batch "
                     "[%lld, %lld] or the %lld rows given",
                     i, o->batch, o->position, o->row, (long long)tok->shape[0], (long long)tok->shape[1],
                     (long long)R);
            return false;
        }
    }
    return true;
}

static void alloc_layer_acts(clip_layer_acts *a, const clip_config *c, sdt_arena *ar, int64_t B, int64_t T,
                             sdt_dtype dt)
{
    int64_t C = c->width, N = B * T;
    a->ln1 = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->ln1_mean = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->ln1_rstd = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->q = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->k = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->v = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->lse = mu_alloc(ar, SDT_F32, 3, B, c->heads, T, 0);
    a->attn = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->x_mid = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->ln2 = mu_alloc(ar, dt, 3, B, T, C, 0);
    a->ln2_mean = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->ln2_rstd = mu_alloc(ar, SDT_F32, 1, N, 0, 0, 0);
    a->fc1 = mu_alloc(ar, dt, 3, B, T, c->mlp_width, 0);
    a->act = mu_alloc(ar, dt, 3, B, T, c->mlp_width, 0);
    a->x_out = mu_alloc(ar, dt, 3, B, T, C, 0);
}

/* Token + position embedding, with override rows in place of token rows. */
static bool embed(const clip_text_model *m, sdt_backend *be, const clip_text_inputs *in, clip_text_acts *a,
                  sdt_error *error)
{
    int64_t T = a->seq, C = m->cfg.width;
    sdt_tensor pos = mu_rows(&m->pos_emb, 0, T);
    MU_TRY(be, error, MODULE, be->embedding_forward(be, &a->x0, in->tokens, &m->tok_emb, &pos));
    sdt_tensor x0_rows = mu_reshape2(&a->x0, a->batch * T, C);
    for (int i = 0; i < in->n_overrides; i++) {
        const clip_override *o = &in->overrides[i];
        sdt_tensor slot = mu_rows(&x0_rows, (int64_t)o->batch * T + o->position, 1);
        sdt_tensor row = mu_rows(in->rows, o->row, 1);
        sdt_tensor pos_row = mu_rows(&m->pos_emb, o->position, 1);
        MU_TRY(be, error, MODULE, be->convert(be, &slot, &row));
        MU_TRY(be, error, MODULE, be->axpy(be, &slot, 1.0f, &pos_row));
    }
    return true;
}

/* Anomaly mode: the first tensor with a non-finite value is an error naming where it came from. */
static bool check_finite(sdt_backend *be, bool on, const sdt_tensor *t, const char *what, int layer, sdt_error *error)
{
    if (!on) return true;
    int64_t bad = 0;
    MU_TRY(be, error, MODULE, be->count_nonfinite(be, t, &bad));
    if (!bad) return true;
    char where[96];
    if (layer >= 0)
        snprintf(where, sizeof where, "text_model.encoder.layers.%d.%s", layer, what);
    else
        snprintf(where, sizeof where, "text_model.%s", what);
    sdt_fail(error, SDT_ERR_NUMERICAL,
             "clip_text anomaly: %lld non-finite values in %s (the first op of the text encoder to "
             "produce one)",
             (long long)bad, where);
    return false;
}

/* The outputs of one layer in the order they are computed, named as the HF checkpoint names the op. */
static bool layer_check(sdt_backend *be, const clip_layer_acts *a, int layer, sdt_error *error)
{
    const struct {
        const sdt_tensor *t;
        const char *what;
    } outs[] = {
        {&a->ln1, "layer_norm1 output"},
        {&a->q, "self_attn.q_proj output"},
        {&a->k, "self_attn.k_proj output"},
        {&a->v, "self_attn.v_proj output"},
        {&a->lse, "self_attn softmax statistics"},
        {&a->attn, "self_attn output"},
        {&a->x_mid, "self_attn.out_proj output (with the residual)"},
        {&a->ln2, "layer_norm2 output"},
        {&a->fc1, "mlp.fc1 output"},
        {&a->act, "mlp activation output"},
        {&a->x_out, "mlp.fc2 output (with the residual)"},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (!check_finite(be, true, outs[i].t, outs[i].what, layer, error)) return false;
    return true;
}

static bool layer_forward(const clip_layer_weights *L, const clip_config *c, sdt_backend *be, clip_layer_acts *a,
                          const sdt_tensor *x_in, sdt_error *error)
{
    int64_t N = x_in->shape[0] * x_in->shape[1], C = c->width;
    sdt_tensor x2 = mu_reshape2(x_in, N, C), ln1 = mu_reshape2(&a->ln1, N, C);
    MU_TRY(be, error, MODULE,
           be->layernorm_forward(be, &ln1, &a->ln1_mean, &a->ln1_rstd, &x2, &L->ln1_w, &L->ln1_b, c->ln_eps));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->q, &a->ln1, &L->q_w, &L->q_b));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->k, &a->ln1, &L->k_w, &L->k_b));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->v, &a->ln1, &L->v_w, &L->v_b));
    MU_TRY(be, error, MODULE, be->attention_forward(be, &a->attn, &a->lse, &a->q, &a->k, &a->v, c->heads, true));
    MU_TRY(be, error, MODULE, be->linear_residual_forward(be, &a->x_mid, &a->attn, &L->o_w, &L->o_b, x_in));
    sdt_tensor xm2 = mu_reshape2(&a->x_mid, N, C), ln2 = mu_reshape2(&a->ln2, N, C);
    MU_TRY(be, error, MODULE,
           be->layernorm_forward(be, &ln2, &a->ln2_mean, &a->ln2_rstd, &xm2, &L->ln2_w, &L->ln2_b, c->ln_eps));
    MU_TRY(be, error, MODULE, be->linear_forward(be, &a->fc1, &a->ln2, &L->fc1_w, &L->fc1_b));
    MU_TRY(be, error, MODULE, be->activation_forward(be, &a->act, &a->fc1, c->act));
    MU_TRY(be, error, MODULE, be->linear_residual_forward(be, &a->x_out, &a->act, &L->fc2_w, &L->fc2_b, &a->x_mid));
    return true;
}

static bool arena_ok(const sdt_arena *ar, const char *what, sdt_error *error)
{
    if (sdt_arena_fits(ar)) return true;
    return sdt_fail(error, ar->error.code, "clip_text, %s: %s", what, ar->error.message);
}

/* The end-of-text row of each sequence: the first largest id (OpenCLIP's text.argmax(dim=-1); transformers
 * takes the first eos, the same position since the end token is the vocabulary's last), as b * T + t. */
static bool end_rows(sdt_backend *be, const sdt_tensor *tokens, sdt_tensor *index, sdt_error *error)
{
    int64_t B = tokens->shape[0], T = tokens->shape[1];
    int32_t *ids = malloc((size_t)(B * T + B) * sizeof(int32_t));
    if (!ids) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "clip_text: out of memory finding the end-of-text tokens");
    int32_t *rows = ids + B * T;
    bool ok = be->download(be, ids, tokens->data, (size_t)(B * T) * sizeof(int32_t)) == 0;
    for (int64_t b = 0; ok && b < B; b++) {
        int64_t best = 0;
        for (int64_t t = 1; t < T; t++)
            if (ids[b * T + t] > ids[b * T + best]) best = t;
        rows[b] = (int32_t)(b * T + best);
    }
    ok = ok && be->upload(be, index->data, rows, (size_t)B * sizeof(int32_t)) == 0;
    free(ids);
    if (!ok)
        return sdt_fail(error, be->error.code, "clip_text: the %s backend failed: %s", be->name, be->error.message);
    return true;
}

/* pooled = ln_final(x_last[end]) @ text_projection. OpenCLIP stores the projection [in, out], the
 * transpose of a Linear weight [out, in]: x @ P is then linear_backward's input gradient with P as
 * the weight, and its backward linear_forward with P, so neither layout is copied. */
static bool pooled_forward(const clip_text_model *m, sdt_backend *be, clip_text_acts *a, const sdt_tensor *tokens,
                           const sdt_tensor *x_last, sdt_error *error)
{
    const clip_config *c = &m->cfg;
    int64_t B = a->batch, T = a->seq, C = c->width;
    if (!end_rows(be, tokens, &a->end_index, error)) return false;
    sdt_tensor table = mu_reshape2(x_last, B * T, C), end2 = mu_reshape2(&a->end_x, B, C);
    MU_TRY(be, error, MODULE, be->embedding_forward(be, &a->end_x, &a->end_index, &table, NULL));
    MU_TRY(be, error, MODULE,
           be->layernorm_forward(be, &a->end_ln, &a->end_mean, &a->end_rstd, &end2, &m->lnf_w, &m->lnf_b, c->ln_eps));
    /* As [B, 1, width]: each sequence's row is its own sample to the projection, so a sequence's pooled
     * vector does not depend on what shares its batch (the text cache encodes in other groups). */
    if (c->projection_dim == 0) /* pooler_output: a->pooled is end_ln itself */
        return check_finite(be, a->anomaly_check, &a->pooled, "pooled output (ln_final at the end token)", -1, error);
    sdt_tensor end_ln3 = mu_reshape3(&a->end_ln, B, 1, C), pooled3 = mu_reshape3(&a->pooled, B, 1, c->projection_dim);
    if (c->layout == CLIP_LAYOUT_HF) {
        MU_TRY(be, error, MODULE, be->linear_forward(be, &pooled3, &end_ln3, &m->proj, NULL));
    } else {
        MU_TRY(be, error, MODULE, be->zero(be, &a->pooled));
        MU_TRY(be, error, MODULE, be->linear_backward(be, &pooled3, NULL, NULL, &end_ln3, &pooled3, &m->proj));
    }
    return check_finite(be, a->anomaly_check, &a->pooled, "pooled output (ln_final at the end token, text_projection)",
                        -1, error);
}

bool clip_text_forward(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_inputs *in,
                       clip_text_acts *a, sdt_error *error)
{
    if (!check_inputs(m, in, error)) return false;
    const clip_config *c = &m->cfg;
    memset(a, 0, sizeof(*a));
    a->batch = (int)in->tokens->shape[0];
    a->seq = (int)in->tokens->shape[1];
    a->context_layers = layers_to_run(c, in->clip_skip);
    bool pooled = clip_pooled_dim(c) > 0;
    a->layers_run = pooled ? c->layers : a->context_layers; /* the pooled output reads the last layer */
    a->act_dtype = in->act_dtype;
    a->anomaly_check = in->anomaly_check;
    if (in->n_overrides > 0) a->rows = *in->rows;
    a->overrides = in->overrides;
    a->n_overrides = in->n_overrides;
    int64_t B = a->batch, T = a->seq, C = c->width, N = B * T;

    a->x0 = mu_alloc(arena, in->act_dtype, 3, B, T, C, 0);
    for (int l = 0; l < a->layers_run; l++) alloc_layer_acts(&a->layer[l], c, arena, B, T, in->act_dtype);
    const sdt_tensor *x_context = a->context_layers > 0 ? &a->layer[a->context_layers - 1].x_out : &a->x0;
    if (c->context_without_final_norm) {
        a->out = *x_context; /* SDXL: the hidden state is the context */
    } else {
        a->lnf_mean = mu_alloc(arena, SDT_F32, 1, N, 0, 0, 0);
        a->lnf_rstd = mu_alloc(arena, SDT_F32, 1, N, 0, 0, 0);
        a->out = mu_alloc(arena, in->act_dtype, 3, B, T, C, 0);
    }
    if (pooled) {
        a->end_index = mu_alloc(arena, SDT_I32, 2, B, 1, 0, 0);
        a->end_x = mu_alloc(arena, in->act_dtype, 3, B, 1, C, 0);
        a->end_ln = mu_alloc(arena, in->act_dtype, 2, B, C, 0, 0);
        a->end_mean = mu_alloc(arena, SDT_F32, 1, B, 0, 0, 0);
        a->end_rstd = mu_alloc(arena, SDT_F32, 1, B, 0, 0, 0);
        a->pooled = c->projection_dim > 0 ? mu_alloc(arena, in->act_dtype, 2, B, c->projection_dim, 0, 0) : a->end_ln;
    }
    if (arena->measuring) return true;
    if (!arena_ok(arena, "the text encoder forward", error)) return false;

    if (!embed(m, be, in, a, error)) return false;
    if (!check_finite(be, in->anomaly_check, &a->x0, "embeddings output (token + position)", -1, error)) return false;
    const sdt_tensor *x = &a->x0;
    for (int l = 0; l < a->layers_run; l++) {
        if (!layer_forward(&m->layer[l], c, be, &a->layer[l], x, error)) return false;
        if (in->anomaly_check && !layer_check(be, &a->layer[l], l, error)) return false;
        x = &a->layer[l].x_out;
    }
    if (pooled && !pooled_forward(m, be, a, in->tokens, x, error)) return false;
    if (c->context_without_final_norm) return true;
    sdt_tensor x2 = mu_reshape2(x_context, N, C), out2 = mu_reshape2(&a->out, N, C);
    MU_TRY(be, error, MODULE,
           be->layernorm_forward(be, &out2, &a->lnf_mean, &a->lnf_rstd, &x2, &m->lnf_w, &m->lnf_b, c->ln_eps));
    return check_finite(be, in->anomaly_check, &a->out, "final_layer_norm output", -1, error);
}

/* ---------------------------------------------------------------- backward */

typedef struct clip_grad_scratch {
    sdt_tensor dx;              /* d(residual stream) [B, T, C], f32 */
    sdt_tensor d_c, dq, dk, dv; /* [B, T, C] */
    sdt_tensor d_m, d_fc1;      /* [B, T, M] */
} clip_grad_scratch;

/* dx holds d(x_out) on entry and d(x_in) on return. */
static bool layer_backward(const clip_layer_weights *L, const clip_config *c, sdt_backend *be, const clip_layer_acts *a,
                           const sdt_tensor *x_in, clip_grad_scratch *s, sdt_error *error)
{
    int64_t N = x_in->shape[0] * x_in->shape[1], C = c->width;
    /* MLP branch: x_out = x_mid + fc2(act(fc1(ln2(x_mid)))). A frozen linear's input gradient that is
     * the first to reach its buffer is written (linear_input_grad), so only d_fc1 needs zeroing. */
    MU_TRY(be, error, MODULE, be->zero(be, &s->d_fc1));
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_m, &s->dx, &L->fc2_w));
    MU_TRY(be, error, MODULE, be->activation_backward(be, &s->d_fc1, &s->d_m, &a->fc1, c->act));
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_c, &s->d_fc1, &L->fc1_w));
    sdt_tensor dx2 = mu_reshape2(&s->dx, N, C), dc2 = mu_reshape2(&s->d_c, N, C);
    sdt_tensor xm2 = mu_reshape2(&a->x_mid, N, C);
    MU_TRY(be, error, MODULE,
           be->layernorm_backward(be, &dx2, NULL, NULL, &dc2, &xm2, &L->ln2_w, &a->ln2_mean, &a->ln2_rstd));
    /* Attention branch: x_mid = x_in + out_proj(attn(q, k, v of ln1(x_in))). attention_backward writes
     * dq, dk, dv (ops.h); d(ln1) is written by the Q projection's input gradient, then K and V add. */
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_c, &s->dx, &L->o_w));
    MU_TRY(be, error, MODULE,
           be->attention_backward(be, &s->dq, &s->dk, &s->dv, &s->d_c, &a->q, &a->k, &a->v, &a->attn, &a->lse, c->heads,
                                  true));
    MU_TRY(be, error, MODULE, be->linear_input_grad(be, &s->d_c, &s->dq, &L->q_w));
    MU_TRY(be, error, MODULE, be->linear_backward(be, &s->d_c, NULL, NULL, &s->dk, &a->ln1, &L->k_w));
    MU_TRY(be, error, MODULE, be->linear_backward(be, &s->d_c, NULL, NULL, &s->dv, &a->ln1, &L->v_w));
    sdt_tensor xi2 = mu_reshape2(x_in, N, C);
    MU_TRY(be, error, MODULE,
           be->layernorm_backward(be, &dx2, NULL, NULL, &dc2, &xi2, &L->ln1_w, &a->ln1_mean, &a->ln1_rstd));
    return true;
}

/* d(pooled) into dx (the last layer's output, f32 [B, T, C]) at each sequence's end-of-text row. */
static bool pooled_backward(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_acts *a,
                            const sdt_tensor *dpooled, sdt_tensor *dx, sdt_error *error)
{
    const clip_config *c = &m->cfg;
    int64_t B = a->batch, T = a->seq, C = c->width;
    /* d_end is f32 like dx: the table gradient of embedding_backward (the scatter into dx's rows) */
    sdt_tensor d_ln = mu_alloc(arena, a->act_dtype, 2, B, C, 0, 0), d_end = mu_alloc(arena, SDT_F32, 3, B, 1, C, 0);
    if (arena->measuring) return true;
    if (!arena_ok(arena, "the pooled output's backward", error)) return false;
    sdt_tensor d_end2 = mu_reshape2(&d_end, B, C), end2 = mu_reshape2(&a->end_x, B, C);
    sdt_tensor dx_rows = mu_reshape2(dx, B * T, C);
    MU_TRY(be, error, MODULE, be->zero(be, &d_ln));
    MU_TRY(be, error, MODULE, be->zero(be, &d_end));
    if (c->projection_dim == 0) /* pooler_output: d(pooled) is d(end_ln) */
        MU_TRY(be, error, MODULE, be->axpy(be, &d_ln, 1.0f, dpooled));
    else if (c->layout == CLIP_LAYOUT_HF)
        MU_TRY(be, error, MODULE, be->linear_backward(be, &d_ln, NULL, NULL, dpooled, &a->end_ln, &m->proj));
    else
        MU_TRY(be, error, MODULE, be->linear_forward(be, &d_ln, dpooled, &m->proj, NULL));
    MU_TRY(be, error, MODULE,
           be->layernorm_backward(be, &d_end2, NULL, NULL, &d_ln, &end2, &m->lnf_w, &a->end_mean, &a->end_rstd));
    MU_TRY(be, error, MODULE, be->embedding_backward(be, &dx_rows, NULL, &d_end, &a->end_index));
    return true;
}

bool clip_text_backward(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_acts *a,
                        const sdt_tensor *dout, sdt_tensor *drows, sdt_error *error)
{
    if (!dout) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: d(output) is missing; give the gradient of the loss with respect "
                 "to the text encoder's output");
        return false;
    }
    return clip_text_backward_pooled(m, be, arena, a, dout, NULL, drows, error);
}

bool clip_text_backward_pooled(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_acts *a,
                               const sdt_tensor *dout, const sdt_tensor *dpooled, sdt_tensor *drows, sdt_error *error)
{
    const clip_config *c = &m->cfg;
    int64_t B = a->batch, T = a->seq, C = c->width, M = c->mlp_width, N = B * T;
    if (dout && (dout->ndim != 3 || dout->shape[0] != B || dout->shape[1] != T || dout->shape[2] != C)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: d(output) must have the forward output's shape [%lld, %lld, %lld]", (long long)B,
                 (long long)T, (long long)C);
        return false;
    }
    if (dpooled && (clip_pooled_dim(c) == 0 || dpooled->ndim != 2 || dpooled->shape[0] != B ||
                    dpooled->shape[1] != clip_pooled_dim(c))) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: d(pooled) must be [%lld, %d], the pooled output's shape (only an "
                 "encoder with a pooled output, SDXL's bigG, SD3's and Flux's encoders, has one)",
                 (long long)B, clip_pooled_dim(c));
        return false;
    }
    if (a->n_overrides > 0 && (!drows || drows->ndim != 2 || drows->shape[0] != a->rows.shape[0] ||
                               drows->shape[1] != C || drows->dtype == SDT_I32)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "clip_text: the row gradient must be a float tensor shaped like the override rows "
                 "[%lld, %lld]",
                 (long long)a->rows.shape[0], (long long)C);
        return false;
    }
    if (a->n_overrides == 0) return true; /* nothing trainable upstream: no work */

    size_t mark = sdt_arena_mark(arena);
    clip_grad_scratch s;
    /* The residual-stream gradient sums many branches: keep it f32 whatever the activation dtype. */
    s.dx = mu_alloc(arena, SDT_F32, 3, B, T, C, 0);
    s.d_c = mu_alloc(arena, a->act_dtype, 3, B, T, C, 0);
    s.dq = mu_alloc(arena, a->act_dtype, 3, B, T, C, 0);
    s.dk = mu_alloc(arena, a->act_dtype, 3, B, T, C, 0);
    s.dv = mu_alloc(arena, a->act_dtype, 3, B, T, C, 0);
    s.d_m = mu_alloc(arena, a->act_dtype, 3, B, T, M, 0);
    s.d_fc1 = mu_alloc(arena, a->act_dtype, 3, B, T, M, 0);
    bool ok = true;
    if (arena->measuring) {
        if (dpooled) ok = pooled_backward(m, be, arena, a, dpooled, &s.dx, error);
        goto done;
    }
    if (!(ok = arena_ok(arena, "the text encoder backward", error))) goto done;
    if (be->zero(be, &s.dx) != 0) {
        ok = sdt_fail(error, be->error.code, "clip_text: the %s backend failed: %s", be->name, be->error.message);
        goto done;
    }
    /* The pooled output's path: from the last layer down to the context's layer. */
    int l = a->context_layers - 1;
    if (dpooled) {
        ok = pooled_backward(m, be, arena, a, dpooled, &s.dx, error);
        for (int k = a->layers_run - 1; ok && k > l; k--)
            ok = layer_backward(&m->layer[k], c, be, &a->layer[k], &a->layer[k - 1].x_out, &s, error) &&
                 check_finite(be, a->anomaly_check, &s.dx, "input gradient", k, error);
    }
    /* The context's gradient joins there (through the final layernorm unless SDXL's context skips it). */
    const sdt_tensor *x_context = l >= 0 ? &a->layer[l].x_out : &a->x0;
    sdt_tensor dx2 = mu_reshape2(&s.dx, N, C);
    if (ok && dout) {
        if (c->context_without_final_norm) {
            ok = be->axpy(be, &s.dx, 1.0f, dout) == 0;
        } else {
            sdt_tensor dout2 = mu_reshape2(dout, N, C), xl2 = mu_reshape2(x_context, N, C);
            ok = be->layernorm_backward(be, &dx2, NULL, NULL, &dout2, &xl2, &m->lnf_w, &a->lnf_mean, &a->lnf_rstd) == 0;
        }
        if (!ok) sdt_fail(error, be->error.code, "clip_text: the %s backend failed: %s", be->name, be->error.message);
    }
    for (; ok && l >= 0; l--) {
        const sdt_tensor *x_in = l > 0 ? &a->layer[l - 1].x_out : &a->x0;
        ok = layer_backward(&m->layer[l], c, be, &a->layer[l], x_in, &s, error) &&
             check_finite(be, a->anomaly_check, &s.dx, "input gradient", l, error);
    }
    /* The embedding sum passes d(x0) straight to each overridden row. */
    for (int i = 0; ok && i < a->n_overrides; i++) {
        const clip_override *o = &a->overrides[i];
        sdt_tensor slot = mu_rows(&dx2, (int64_t)o->batch * T + o->position, 1);
        sdt_tensor drow = mu_rows(drows, o->row, 1);
        if (be->axpy(be, &drow, 1.0f, &slot) != 0) {
            sdt_fail(error, be->error.code, "clip_text: the %s backend failed: %s", be->name, be->error.message);
            ok = false;
        }
    }
done:
    sdt_arena_rewind(arena, mark);
    return ok;
}
