/* transformer_keys.h - the transformer families' single-file layouts in diffusers' names: one table per
 * layout, read in either direction (weights.c maps a file's names to diffusers' when it opens it; the
 * test-file writer, transformer_file_gen.c, runs the table backwards).
 *
 * Layouts, as diffusers' loaders/single_file_utils.py converts them:
 *   SAI's SD3/SD3.5 (convert_sd3_transformer_checkpoint_to_diffusers): model.diffusion_model.joint_blocks.N.
 *     {x_block, context_block}.{attn.qkv, attn.proj, attn.ln_q, attn.ln_k, adaLN_modulation.1, mlp.fc1, mlp.fc2},
 *     x_block.attn2.* (SD3.5 Medium), x_embedder.proj, pos_embed, t_embedder.mlp.{0,2}, y_embedder.mlp.{0,2},
 *     context_embedder, final_layer.{linear, adaLN_modulation.1};
 *   BFL's Flux.1 (convert_flux_transformer_checkpoint_to_diffusers), at the top or under
 *     model.diffusion_model. (ComfyUI, Forge): double_blocks.N.{img,txt}_{attn.qkv, attn.proj,
 *     attn.norm.{query,key}_norm.scale, mod.lin, mlp.{0,2}}, single_blocks.N.{linear1, linear2, modulation.lin,
 *     norm.{query,key}_norm.scale}, img_in, txt_in, time_in, vector_in, guidance_in (dev), final_layer.
 * Fused projections become row blocks (views: no bytes are copied); the final adaLN (and SD3's last
 * context_pre_only block's) stores shift then scale where diffusers reads scale then shift: those halves
 * are swapped (a small owned copy).
 * The canonical key space of these families: the transformer's diffusers names under
 * SDT_TK_TRANSFORMER_PREFIX; the encoders where SAI's and ComfyUI's all-in-one files put them
 * (text_encoders.{clip_l, clip_g, t5xxl}.transformer., transformers' names inside), the VAE as
 * first_stage_model. (LDM names). */
#ifndef SDT_MODELS_TRANSFORMER_KEYS_H
#define SDT_MODELS_TRANSFORMER_KEYS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#define SDT_TK_TRANSFORMER_PREFIX "model.diffusion_model."
#define SDT_TK_CLIP_L_PREFIX "text_encoders.clip_l.transformer."
#define SDT_TK_CLIP_G_PREFIX "text_encoders.clip_g.transformer."
#define SDT_TK_T5XXL_PREFIX "text_encoders.t5xxl.transformer."
#define SDT_TK_MAX_PIECES 4

typedef enum sdt_tk_layout { SDT_TK_NONE = 0, SDT_TK_SAI_SD3, SDT_TK_BFL_FLUX } sdt_tk_layout;

/* Where a rule applies: the model's top, SD3's joint_blocks.N / Flux's double_blocks.N, Flux's
 * single_blocks.N. */
typedef enum sdt_tk_scope { SDT_TK_TOP = 0, SDT_TK_BLOCK, SDT_TK_SINGLE } sdt_tk_scope;

typedef enum sdt_tk_form {
    SDT_TK_SAME = 0,      /* renamed, same bytes */
    SDT_TK_SPLIT3,        /* [3X, ...] rows: three equal blocks (fused q, k, v) */
    SDT_TK_SPLIT_QKV_MLP, /* Flux's linear1 [3H + M, ...]: q, k, v of H rows each, then the MLP's M */
    SDT_TK_SWAP,          /* [2X, ...]: shift, scale stored; scale, shift read */
    SDT_TK_SWAP_IF_LAST,  /* SD3's context adaLN: swapped in the last block only (context_pre_only) */
} sdt_tk_form;

typedef struct sdt_tk_rule {
    sdt_tk_scope scope;
    const char *src; /* the file's name after the block prefix; ending in '.': a head ("weight"/"bias" follow) */
    sdt_tk_form form;
    const char *dst[SDT_TK_MAX_PIECES]; /* diffusers' names after the block prefix (heads when src is one) */
    bool alias;                         /* another spelling of an earlier rule's src: read, never written */
} sdt_tk_rule;

/* The table of a layout (n rules). */
const sdt_tk_rule *sdt_tk_rules(sdt_tk_layout layout, int *n);
/* "model.diffusion_model.joint_blocks." / "double_blocks." ...: a scope's block prefix in the file, and in
 * diffusers' names ("transformer_blocks.", "single_transformer_blocks."); "" for the top. */
const char *sdt_tk_src_scope(sdt_tk_layout layout, sdt_tk_scope scope);
const char *sdt_tk_dst_scope(sdt_tk_layout layout, sdt_tk_scope scope);

/* What a file's names say, gathered one tensor at a time (sdt_tk_scan). */
typedef struct sdt_tk_context {
    sdt_tk_layout layout;
    const char *prefix; /* the transformer's prefix in the file: "model.diffusion_model." or "" (BFL) */
    int blocks;         /* joint / double blocks: the largest index + 1 */
    int single_blocks;  /* Flux's single blocks */
    int64_t hidden;     /* the hidden width (Flux: img_in's rows), linear1's split */
} sdt_tk_context;

void sdt_tk_context_init(sdt_tk_context *ctx);
void sdt_tk_scan(sdt_tk_context *ctx, const char *name, int ndim, const int64_t *shape);

/* One tensor's part under a diffusers name: rows [row_begin, row_begin + rows) of the file's tensor,
 * or (swap) the whole tensor with its two row halves exchanged. */
typedef struct sdt_tk_piece {
    char *key; /* canonical (SDT_TK_TRANSFORMER_PREFIX + diffusers name), malloc'd */
    int64_t row_begin, rows;
    bool swap;
} sdt_tk_piece;

/* Maps one of the file's names (rows: its first dimension). Returns the number of pieces; 0 when the name is
 * not the transformer's (kept as it is); -1 with a sentence naming file, key and fix when its rows cannot be
 * split as the layout says. */
int sdt_tk_map(const sdt_tk_context *ctx, const char *file, const char *name, int ndim, int64_t rows,
               sdt_tk_piece out[SDT_TK_MAX_PIECES], sdt_error *error);
void sdt_tk_pieces_free(sdt_tk_piece *pieces, int n);

/* Where a layout's all-in-one file keeps the VAE when it is not first_stage_model.: ComfyUI's Flux checkpoints
 * use "vae." (comfy/supported_models.py, Flux.vae_key_prefix); NULL for none. */
const char *sdt_tk_vae_prefix(const sdt_tk_context *ctx);

#endif
