/* transformer_detect.c - see transformer_detect.h. The marker keys are those diffusers' single-file loader
 * tells the models by (loaders/single_file_utils.py CHECKPOINT_KEY_NAMES: "joint_blocks.0.context_block.
 * adaLN_modulation.1.bias" for SD3, x_block.attn2 for SD3.5 Medium, "double_blocks.0.img_attn.norm.key_norm.scale"
 * for Flux, "guidance_in.in_layer.bias" for dev), here in the diffusers names the weights layer gives them. */
#include "transformer_detect.h"

#include <glib.h>
#include <stdarg.h>
#include <string.h>

#include "c_numeric.h"
#include "transformer_keys.h"

static const sdt_tensor *getf(const sdt_weights *w, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static const sdt_tensor *getf(const sdt_weights *w, const char *fmt, ...)
{
    char key[256];
    va_list ap;
    va_start(ap, fmt);
    int n = sdt_c_vsnprintf(key, sizeof key, fmt, ap);
    va_end(ap);
    return n > 0 && (size_t)n < sizeof key ? sdt_weights_get(w, key) : NULL;
}

static int count_blocks(const sdt_weights *w, const char *P, const char *scope, const char *probe)
{
    int n = 0;
    while (n < 1000 && getf(w, "%s%s%d.%s", P, scope, n, probe)) n++;
    return n;
}

/* The transformer's family under prefix P, from diffusers' names. */
static sdt_tf_family family_at(const sdt_weights *w, const char *P)
{
    if (getf(w, "%spos_embed.proj.weight", P) && getf(w, "%stransformer_blocks.0.norm1.linear.weight", P))
        return SDT_TF_SD3;
    if (getf(w, "%sx_embedder.weight", P) && getf(w, "%ssingle_transformer_blocks.0.norm.linear.weight", P))
        return SDT_TF_FLUX;
    return SDT_TF_NONE;
}

/* How the file named the transformer's keys: from the source name of one of them. */
static const char *layout_of(const sdt_weights *w, const char *P, sdt_tf_family f)
{
    if (sdt_weights_is_folder(w)) return "diffusers folder";
    char key[160];
    g_snprintf(key, sizeof key, "%stransformer_blocks.0.norm1.linear.weight", P);
    const char *src = sdt_weights_source(w, key);
    if (!src) return "single file";
    if (g_str_has_prefix(src, "model.diffusion_model.joint_blocks."))
        return "single file, Stability AI's layout (model.diffusion_model.joint_blocks.N)";
    if (g_str_has_prefix(src, "model.diffusion_model.double_blocks."))
        return "single file, BFL's layout under model.diffusion_model. (ComfyUI, Forge)";
    if (g_str_has_prefix(src, "double_blocks.")) return "single file, BFL's layout (double_blocks.N, single_blocks.N)";
    (void)f;
    return *P ? "single file, diffusers' names under model.diffusion_model."
              : "single file, diffusers' transformer names (transformer/diffusion_pytorch_model)";
}

static void sd3_variant(sdt_tf_info *in)
{
    if (in->dual_layers > 0 && in->blocks == 24 && in->hidden == 1536)
        g_strlcpy(in->variant, "SD3.5 Medium", sizeof in->variant);
    else if (in->qk_norm && !in->dual_layers && in->blocks == 38 && in->hidden == 2432)
        g_strlcpy(in->variant, "SD3.5 Large", sizeof in->variant);
    else if (!in->qk_norm && !in->dual_layers && in->blocks == 24 && in->hidden == 1536)
        g_strlcpy(in->variant, "SD3 Medium", sizeof in->variant);
    else
        g_snprintf(in->variant, sizeof in->variant, "%s, %d blocks, width %lld",
                   in->dual_layers ? "SD3.5 Medium's architecture (MMDiT-X)"
                   : in->qk_norm   ? "SD3.5's architecture"
                                   : "SD3's architecture",
                   in->blocks, (long long)in->hidden);
}

static void flux_variant(sdt_tf_info *in)
{
    const char *name = in->guidance ? "Flux.1 dev" : "Flux.1 schnell";
    if (in->blocks == 19 && in->single_blocks == 38 && in->hidden == 3072)
        g_strlcpy(in->variant, name, sizeof in->variant);
    else
        g_snprintf(in->variant, sizeof in->variant, "%s's architecture, %d + %d blocks, width %lld", name, in->blocks,
                   in->single_blocks, (long long)in->hidden);
}

/* The encoders and the VAE, where all-in-one files (SAI's, ComfyUI's) and folders (in the canonical space)
 * keep them. */
static void find_parts(const sdt_weights *w, sdt_tf_info *in)
{
    static const struct {
        sdt_tf_part part;
        const char *prefix, *probe;
    } where[] = {
        {SDT_TF_CLIP_L, SDT_TK_CLIP_L_PREFIX, "text_model.embeddings.token_embedding.weight"},
        {SDT_TF_CLIP_G, SDT_TK_CLIP_G_PREFIX, "text_model.embeddings.token_embedding.weight"},
        {SDT_TF_T5XXL, SDT_TK_T5XXL_PREFIX, "shared.weight"},
        {SDT_TF_T5XXL, SDT_TK_T5XXL_PREFIX, "encoder.embed_tokens.weight"},
        {SDT_TF_VAE, "first_stage_model.", "decoder.conv_out.weight"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(where); i++)
        if (!in->has[where[i].part] && getf(w, "%s%s", where[i].prefix, where[i].probe)) {
            in->has[where[i].part] = true;
            in->prefix[where[i].part] = where[i].prefix;
        }
}

bool sdt_tf_detect(const sdt_weights *w, sdt_tf_info *info)
{
    memset(info, 0, sizeof *info);
    static const char *const prefixes[] = {SDT_TK_TRANSFORMER_PREFIX, ""};
    const char *P = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(prefixes) && !P; i++)
        if ((info->family = family_at(w, prefixes[i])) != SDT_TF_NONE) P = prefixes[i];
    if (!P) return false;
    info->has[SDT_TF_TRANSFORMER] = true;
    info->prefix[SDT_TF_TRANSFORMER] = P;
    info->layout = layout_of(w, P, info->family);
    info->blocks = count_blocks(w, P, "transformer_blocks.", "norm1.linear.weight");
    const sdt_tensor *ctx = getf(w, "%scontext_embedder.weight", P);
    info->hidden = ctx && ctx->ndim == 2 ? ctx->shape[0] : 0;
    if (info->family == SDT_TF_SD3) {
        info->qk_norm = getf(w, "%stransformer_blocks.0.attn.norm_q.weight", P) != NULL;
        info->dual_layers = count_blocks(w, P, "transformer_blocks.", "attn2.to_q.weight");
        sd3_variant(info);
    } else {
        info->single_blocks = count_blocks(w, P, "single_transformer_blocks.", "norm.linear.weight");
        info->guidance = getf(w, "%stime_text_embed.guidance_embedder.linear_1.weight", P) != NULL;
        flux_variant(info);
    }
    find_parts(w, info);
    return true;
}

sdt_tf_part sdt_tf_lone_part(const sdt_weights *w)
{
    const sdt_tensor *tok = sdt_weights_get(w, "text_model.embeddings.token_embedding.weight");
    if (tok && tok->ndim == 2) return tok->shape[1] >= 1280 ? SDT_TF_CLIP_G : SDT_TF_CLIP_L;
    if ((sdt_weights_get(w, "shared.weight") || sdt_weights_get(w, "encoder.embed_tokens.weight")) &&
        sdt_weights_get(w, "encoder.block.0.layer.0.SelfAttention.q.weight"))
        return SDT_TF_T5XXL;
    if (sdt_weights_get(w, "encoder.conv_in.weight") && sdt_weights_get(w, "decoder.conv_out.weight"))
        return SDT_TF_VAE;
    return SDT_TF_TRANSFORMER;
}

const char *sdt_tf_family_name(sdt_tf_family f)
{
    return f == SDT_TF_SD3 ? "sd3" : f == SDT_TF_FLUX ? "flux" : "none";
}

const char *sdt_tf_family_title(sdt_tf_family f)
{
    return f == SDT_TF_SD3 ? "SD3/SD3.5" : f == SDT_TF_FLUX ? "Flux.1" : "none";
}

static const struct {
    const char *name, *title, *option, *sd3_file, *flux_file;
} parts[SDT_TF_PART_COUNT] = {
    [SDT_TF_TRANSFORMER] = {"transformer", "the transformer", "FILE", "", ""},
    [SDT_TF_CLIP_L] = {"clip_l", "CLIP-L", "--clip-l FILE", "clip_l.safetensors", "clip_l.safetensors"},
    [SDT_TF_CLIP_G] = {"clip_g", "CLIP-G", "--clip-g FILE", "clip_g.safetensors", "clip_g.safetensors"},
    [SDT_TF_T5XXL] = {"t5xxl", "T5-XXL", "--t5xxl FILE", "t5xxl_fp16.safetensors or t5xxl_fp8_e4m3fn.safetensors",
                      "t5xxl_fp16.safetensors or t5xxl_fp8_e4m3fn.safetensors"},
    [SDT_TF_VAE] = {"vae", "the VAE", "--vae FILE", "the SD3.5 VAE, vae/diffusion_pytorch_model.safetensors",
                    "ae.safetensors"},
};

const char *sdt_tf_part_name(sdt_tf_part p)
{
    return (unsigned)p < SDT_TF_PART_COUNT ? parts[p].name : "?";
}

const char *sdt_tf_part_title(sdt_tf_part p)
{
    return (unsigned)p < SDT_TF_PART_COUNT ? parts[p].title : "?";
}

const char *sdt_tf_part_option(sdt_tf_part p)
{
    return (unsigned)p < SDT_TF_PART_COUNT ? parts[p].option : "?";
}

bool sdt_tf_family_needs(sdt_tf_family f, sdt_tf_part p)
{
    if (f == SDT_TF_NONE) return false;
    return !(f == SDT_TF_FLUX && p == SDT_TF_CLIP_G);
}

/* "a", "a and b", "a, b and c" of the n items. */
static void append_list(GString *s, const char *const *items, int n)
{
    for (int i = 0; i < n; i++) {
        if (i) g_string_append(s, i == n - 1 ? " and " : ", ");
        g_string_append(s, items[i]);
    }
}

char *sdt_tf_missing_sentence(const sdt_tf_info *info, const char *path)
{
    return sdt_tf_missing_sentence_of(info, path, (1u << SDT_TF_PART_COUNT) - 1);
}

char *sdt_tf_missing_sentence_of(const sdt_tf_info *info, const char *path, unsigned parts_wanted)
{
    const char *carried[SDT_TF_PART_COUNT];
    char *wanted[SDT_TF_PART_COUNT];
    int n_carried = 0, n_wanted = 0;
    for (int p = SDT_TF_CLIP_L; p < SDT_TF_PART_COUNT; p++) {
        if (!sdt_tf_family_needs(info->family, (sdt_tf_part)p) || !(parts_wanted & (1u << p))) continue;
        if (info->has[p])
            carried[n_carried++] = parts[p].title;
        else
            wanted[n_wanted++] = g_strdup_printf("%s with %s (%s)", parts[p].title, parts[p].option,
                                                 info->family == SDT_TF_FLUX ? parts[p].flux_file : parts[p].sd3_file);
    }
    if (!n_wanted) return NULL;
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "%s carries the %s transformer (%s)", path, sdt_tf_family_title(info->family),
                           info->variant);
    if (n_carried) {
        g_string_append(s, " with ");
        append_list(s, carried, n_carried);
    } else {
        g_string_append(s, " only");
    }
    g_string_append(s, "; give ");
    append_list(s, (const char *const *)wanted, n_wanted);
    g_string_append(s, ".");
    for (int i = 0; i < n_wanted; i++) g_free(wanted[i]);
    return g_string_free(s, FALSE);
}
