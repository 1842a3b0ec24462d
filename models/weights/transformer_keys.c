/* transformer_keys.c - see transformer_keys.h. Every name, split and swap below is as diffusers'
 * src/diffusers/loaders/single_file_utils.py has them (convert_sd3_transformer_checkpoint_to_diffusers,
 * convert_flux_transformer_checkpoint_to_diffusers, swap_scale_shift). */
#include "transformer_keys.h"

#include <glib.h>
#include <string.h>

// clang-format off
#define R(scope_, src_, form_, ...) {.scope = scope_, .src = src_, .form = form_, .dst = {__VA_ARGS__}}
/* ComfyUI renames Flux's "*_norm.scale" to "*_norm.weight" when it loads a model (process_unet_state_dict), so
 * files it saves may carry either spelling: read both, write the first. */
#define ALIAS(scope_, src_, dst_) {.scope = scope_, .src = src_, .form = SDT_TK_SAME, .dst = {dst_}, .alias = true}
// clang-format on

static const sdt_tk_rule sd3_rules[] = {
    R(SDT_TK_TOP, "pos_embed", SDT_TK_SAME, "pos_embed.pos_embed"),
    R(SDT_TK_TOP, "x_embedder.proj.", SDT_TK_SAME, "pos_embed.proj."),
    R(SDT_TK_TOP, "t_embedder.mlp.0.", SDT_TK_SAME, "time_text_embed.timestep_embedder.linear_1."),
    R(SDT_TK_TOP, "t_embedder.mlp.2.", SDT_TK_SAME, "time_text_embed.timestep_embedder.linear_2."),
    R(SDT_TK_TOP, "y_embedder.mlp.0.", SDT_TK_SAME, "time_text_embed.text_embedder.linear_1."),
    R(SDT_TK_TOP, "y_embedder.mlp.2.", SDT_TK_SAME, "time_text_embed.text_embedder.linear_2."),
    R(SDT_TK_TOP, "context_embedder.", SDT_TK_SAME, "context_embedder."),
    R(SDT_TK_TOP, "final_layer.linear.", SDT_TK_SAME, "proj_out."),
    R(SDT_TK_TOP, "final_layer.adaLN_modulation.1.", SDT_TK_SWAP, "norm_out.linear."),
    R(SDT_TK_BLOCK, "x_block.attn.qkv.", SDT_TK_SPLIT3, "attn.to_q.", "attn.to_k.", "attn.to_v."),
    R(SDT_TK_BLOCK, "context_block.attn.qkv.", SDT_TK_SPLIT3, "attn.add_q_proj.", "attn.add_k_proj.",
      "attn.add_v_proj."),
    R(SDT_TK_BLOCK, "x_block.attn2.qkv.", SDT_TK_SPLIT3, "attn2.to_q.", "attn2.to_k.", "attn2.to_v."),
    R(SDT_TK_BLOCK, "x_block.attn.ln_q.", SDT_TK_SAME, "attn.norm_q."),
    R(SDT_TK_BLOCK, "x_block.attn.ln_k.", SDT_TK_SAME, "attn.norm_k."),
    R(SDT_TK_BLOCK, "context_block.attn.ln_q.", SDT_TK_SAME, "attn.norm_added_q."),
    R(SDT_TK_BLOCK, "context_block.attn.ln_k.", SDT_TK_SAME, "attn.norm_added_k."),
    R(SDT_TK_BLOCK, "x_block.attn2.ln_q.", SDT_TK_SAME, "attn2.norm_q."),
    R(SDT_TK_BLOCK, "x_block.attn2.ln_k.", SDT_TK_SAME, "attn2.norm_k."),
    R(SDT_TK_BLOCK, "x_block.attn.proj.", SDT_TK_SAME, "attn.to_out.0."),
    R(SDT_TK_BLOCK, "context_block.attn.proj.", SDT_TK_SAME, "attn.to_add_out."),
    R(SDT_TK_BLOCK, "x_block.attn2.proj.", SDT_TK_SAME, "attn2.to_out.0."),
    R(SDT_TK_BLOCK, "x_block.adaLN_modulation.1.", SDT_TK_SAME, "norm1.linear."),
    R(SDT_TK_BLOCK, "context_block.adaLN_modulation.1.", SDT_TK_SWAP_IF_LAST, "norm1_context.linear."),
    R(SDT_TK_BLOCK, "x_block.mlp.fc1.", SDT_TK_SAME, "ff.net.0.proj."),
    R(SDT_TK_BLOCK, "x_block.mlp.fc2.", SDT_TK_SAME, "ff.net.2."),
    R(SDT_TK_BLOCK, "context_block.mlp.fc1.", SDT_TK_SAME, "ff_context.net.0.proj."),
    R(SDT_TK_BLOCK, "context_block.mlp.fc2.", SDT_TK_SAME, "ff_context.net.2."),
};

static const sdt_tk_rule flux_rules[] = {
    R(SDT_TK_TOP, "img_in.", SDT_TK_SAME, "x_embedder."),
    R(SDT_TK_TOP, "txt_in.", SDT_TK_SAME, "context_embedder."),
    R(SDT_TK_TOP, "time_in.in_layer.", SDT_TK_SAME, "time_text_embed.timestep_embedder.linear_1."),
    R(SDT_TK_TOP, "time_in.out_layer.", SDT_TK_SAME, "time_text_embed.timestep_embedder.linear_2."),
    R(SDT_TK_TOP, "vector_in.in_layer.", SDT_TK_SAME, "time_text_embed.text_embedder.linear_1."),
    R(SDT_TK_TOP, "vector_in.out_layer.", SDT_TK_SAME, "time_text_embed.text_embedder.linear_2."),
    R(SDT_TK_TOP, "guidance_in.in_layer.", SDT_TK_SAME, "time_text_embed.guidance_embedder.linear_1."),
    R(SDT_TK_TOP, "guidance_in.out_layer.", SDT_TK_SAME, "time_text_embed.guidance_embedder.linear_2."),
    R(SDT_TK_TOP, "final_layer.linear.", SDT_TK_SAME, "proj_out."),
    R(SDT_TK_TOP, "final_layer.adaLN_modulation.1.", SDT_TK_SWAP, "norm_out.linear."),
    R(SDT_TK_BLOCK, "img_mod.lin.", SDT_TK_SAME, "norm1.linear."),
    R(SDT_TK_BLOCK, "txt_mod.lin.", SDT_TK_SAME, "norm1_context.linear."),
    R(SDT_TK_BLOCK, "img_attn.qkv.", SDT_TK_SPLIT3, "attn.to_q.", "attn.to_k.", "attn.to_v."),
    R(SDT_TK_BLOCK, "txt_attn.qkv.", SDT_TK_SPLIT3, "attn.add_q_proj.", "attn.add_k_proj.", "attn.add_v_proj."),
    R(SDT_TK_BLOCK, "img_attn.norm.query_norm.scale", SDT_TK_SAME, "attn.norm_q.weight"),
    R(SDT_TK_BLOCK, "img_attn.norm.key_norm.scale", SDT_TK_SAME, "attn.norm_k.weight"),
    R(SDT_TK_BLOCK, "txt_attn.norm.query_norm.scale", SDT_TK_SAME, "attn.norm_added_q.weight"),
    R(SDT_TK_BLOCK, "txt_attn.norm.key_norm.scale", SDT_TK_SAME, "attn.norm_added_k.weight"),
    ALIAS(SDT_TK_BLOCK, "img_attn.norm.query_norm.weight", "attn.norm_q.weight"),
    ALIAS(SDT_TK_BLOCK, "img_attn.norm.key_norm.weight", "attn.norm_k.weight"),
    ALIAS(SDT_TK_BLOCK, "txt_attn.norm.query_norm.weight", "attn.norm_added_q.weight"),
    ALIAS(SDT_TK_BLOCK, "txt_attn.norm.key_norm.weight", "attn.norm_added_k.weight"),
    R(SDT_TK_BLOCK, "img_mlp.0.", SDT_TK_SAME, "ff.net.0.proj."),
    R(SDT_TK_BLOCK, "img_mlp.2.", SDT_TK_SAME, "ff.net.2."),
    R(SDT_TK_BLOCK, "txt_mlp.0.", SDT_TK_SAME, "ff_context.net.0.proj."),
    R(SDT_TK_BLOCK, "txt_mlp.2.", SDT_TK_SAME, "ff_context.net.2."),
    R(SDT_TK_BLOCK, "img_attn.proj.", SDT_TK_SAME, "attn.to_out.0."),
    R(SDT_TK_BLOCK, "txt_attn.proj.", SDT_TK_SAME, "attn.to_add_out."),
    R(SDT_TK_SINGLE, "modulation.lin.", SDT_TK_SAME, "norm.linear."),
    R(SDT_TK_SINGLE, "linear1.", SDT_TK_SPLIT_QKV_MLP, "attn.to_q.", "attn.to_k.", "attn.to_v.", "proj_mlp."),
    R(SDT_TK_SINGLE, "norm.query_norm.scale", SDT_TK_SAME, "attn.norm_q.weight"),
    R(SDT_TK_SINGLE, "norm.key_norm.scale", SDT_TK_SAME, "attn.norm_k.weight"),
    ALIAS(SDT_TK_SINGLE, "norm.query_norm.weight", "attn.norm_q.weight"),
    ALIAS(SDT_TK_SINGLE, "norm.key_norm.weight", "attn.norm_k.weight"),
    R(SDT_TK_SINGLE, "linear2.", SDT_TK_SAME, "proj_out."),
};

const sdt_tk_rule *sdt_tk_rules(sdt_tk_layout layout, int *n)
{
    switch (layout) {
        case SDT_TK_SAI_SD3:
            *n = (int)G_N_ELEMENTS(sd3_rules);
            return sd3_rules;
        case SDT_TK_BFL_FLUX:
            *n = (int)G_N_ELEMENTS(flux_rules);
            return flux_rules;
        default:
            *n = 0;
            return NULL;
    }
}

const char *sdt_tk_src_scope(sdt_tk_layout layout, sdt_tk_scope scope)
{
    if (scope == SDT_TK_TOP) return "";
    if (layout == SDT_TK_SAI_SD3) return "joint_blocks.";
    return scope == SDT_TK_BLOCK ? "double_blocks." : "single_blocks.";
}

const char *sdt_tk_dst_scope(sdt_tk_layout layout, sdt_tk_scope scope)
{
    (void)layout;
    if (scope == SDT_TK_TOP) return "";
    return scope == SDT_TK_BLOCK ? "transformer_blocks." : "single_transformer_blocks.";
}

void sdt_tk_context_init(sdt_tk_context *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->prefix = "";
}

/* "<prefix><int>." at the start of s: the index and the rest, or NULL (indices past a million are no block). */
static const char *block_index(const char *s, const char *prefix, int *idx)
{
    size_t n = strlen(prefix);
    if (strncmp(s, prefix, n) != 0) return NULL;
    s += n;
    if (*s < '0' || *s > '9') return NULL;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v > 1000000) return NULL;
    }
    if (*s != '.') return NULL;
    *idx = (int)v;
    return s + 1;
}

void sdt_tk_scan(sdt_tk_context *ctx, const char *name, int ndim, const int64_t *shape)
{
    static const char *const prefixes[] = {SDT_TK_TRANSFORMER_PREFIX, ""};
    for (size_t p = 0; p < G_N_ELEMENTS(prefixes); p++) {
        size_t n = strlen(prefixes[p]);
        if (strncmp(name, prefixes[p], n) != 0) continue;
        const char *rest = name + n;
        int idx;
        /* SAI's SD3 files always put the transformer under model.diffusion_model. */
        if (n && block_index(rest, "joint_blocks.", &idx) && ctx->layout != SDT_TK_BFL_FLUX) {
            ctx->layout = SDT_TK_SAI_SD3;
            ctx->prefix = prefixes[p];
            if (idx + 1 > ctx->blocks) ctx->blocks = idx + 1;
        } else if ((block_index(rest, "double_blocks.", &idx) || block_index(rest, "single_blocks.", &idx)) &&
                   ctx->layout != SDT_TK_SAI_SD3) {
            if (ctx->layout == SDT_TK_BFL_FLUX && strcmp(ctx->prefix, prefixes[p]) != 0) continue;
            ctx->layout = SDT_TK_BFL_FLUX;
            ctx->prefix = prefixes[p];
            int *count = rest[0] == 'd' ? &ctx->blocks : &ctx->single_blocks;
            if (idx + 1 > *count) *count = idx + 1;
        } else if (strcmp(rest, "img_in.weight") == 0 && ndim == 2) {
            ctx->hidden = shape[0];
        }
        return; /* a name counts under its longest prefix only */
    }
}

static const sdt_tk_rule *find_rule(sdt_tk_layout layout, sdt_tk_scope scope, const char *rest, const char **tail)
{
    int n;
    const sdt_tk_rule *rules = sdt_tk_rules(layout, &n);
    for (int i = 0; i < n; i++) {
        if (rules[i].scope != scope) continue;
        size_t len = strlen(rules[i].src);
        bool head = rules[i].src[len - 1] == '.';
        if (head ? strncmp(rest, rules[i].src, len) == 0 && rest[len] : strcmp(rest, rules[i].src) == 0) {
            *tail = rest + len;
            return &rules[i];
        }
    }
    return NULL;
}

int sdt_tk_map(const sdt_tk_context *ctx, const char *file, const char *name, int ndim, int64_t rows,
               sdt_tk_piece out[SDT_TK_MAX_PIECES], sdt_error *error)
{
    if (ctx->layout == SDT_TK_NONE) return 0;
    size_t plen = strlen(ctx->prefix);
    if (strncmp(name, ctx->prefix, plen) != 0) return 0;
    const char *rest = name + plen, *inner = rest, *tail = NULL;
    sdt_tk_scope scope = SDT_TK_TOP;
    int idx = -1;
    const char *r;
    if ((r = block_index(rest, sdt_tk_src_scope(ctx->layout, SDT_TK_BLOCK), &idx))) {
        scope = SDT_TK_BLOCK;
        inner = r;
    } else if (ctx->layout == SDT_TK_BFL_FLUX && (r = block_index(rest, "single_blocks.", &idx))) {
        scope = SDT_TK_SINGLE;
        inner = r;
    }
    const sdt_tk_rule *rule = find_rule(ctx->layout, scope, inner, &tail);
    if (!rule) return 0; /* not a name the layout renames: kept as it is, as diffusers' converter leaves it */
    char block[32] = "";
    if (scope != SDT_TK_TOP) g_snprintf(block, sizeof block, "%s%d.", sdt_tk_dst_scope(ctx->layout, scope), idx);
    int pieces = 1;
    int64_t sizes[SDT_TK_MAX_PIECES] = {rows};
    bool swap = false;
    const char *layout_name = ctx->layout == SDT_TK_SAI_SD3 ? "SD3" : "Flux";
    switch (rule->form) {
        case SDT_TK_SAME:
            break;
        case SDT_TK_SPLIT3:
            if (ndim < 1 || rows % 3)
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: tensor '%s' is a fused q, k, v projection but has %lld rows, not a multiple of 3; "
                                "the file is not a %s checkpoint or is damaged: re-download it",
                                file, name, (long long)rows, layout_name),
                       -1;
            pieces = 3;
            sizes[0] = sizes[1] = sizes[2] = rows / 3;
            break;
        case SDT_TK_SPLIT_QKV_MLP:
            if (ndim < 1 || ctx->hidden <= 0 || rows <= 3 * ctx->hidden)
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: tensor '%s' (%lld rows) cannot be split into q, k, v of the hidden width "
                                "(img_in.weight's %lld rows) and the MLP; the file is not a Flux.1 checkpoint or is "
                                "damaged: re-download it",
                                file, name, (long long)rows, (long long)ctx->hidden),
                       -1;
            pieces = 4;
            sizes[0] = sizes[1] = sizes[2] = ctx->hidden;
            sizes[3] = rows - 3 * ctx->hidden;
            break;
        case SDT_TK_SWAP_IF_LAST: /* the last block's context_pre_only adaLN stores shift, scale */
        case SDT_TK_SWAP:
            if (rule->form == SDT_TK_SWAP_IF_LAST && idx != ctx->blocks - 1) break;
            if (ndim < 1 || rows % 2)
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: tensor '%s' is an adaLN projection (shift, scale) but has %lld rows, an odd "
                                "number; the file is not a %s checkpoint or is damaged: re-download it",
                                file, name, (long long)rows, layout_name),
                       -1;
            swap = true;
            break;
    }
    int64_t begin = 0;
    for (int i = 0; i < pieces; i++) {
        out[i].key = g_strconcat(SDT_TK_TRANSFORMER_PREFIX, block, rule->dst[i], tail, NULL);
        out[i].row_begin = begin;
        out[i].rows = sizes[i];
        out[i].swap = swap;
        begin += sizes[i];
    }
    return pieces;
}

void sdt_tk_pieces_free(sdt_tk_piece *pieces, int n)
{
    for (int i = 0; i < n; i++) {
        g_free(pieces[i].key);
        pieces[i].key = NULL;
    }
}

const char *sdt_tk_vae_prefix(const sdt_tk_context *ctx)
{
    return ctx->layout == SDT_TK_BFL_FLUX && *ctx->prefix ? "vae." : NULL;
}
