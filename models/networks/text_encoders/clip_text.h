/* clip_text.h - the CLIP text encoder of Stable Diffusion (conditioning for the UNet).
 *
 * SD 1.x: OpenAI CLIP ViT-L/14 text model (width 768, 12 layers, 12 heads,
 * quick-GELU, final layernorm). SD 2.x: OpenCLIP ViT-H/14 text model (width
 * 1024, 24 layers of which 23 run - the "penultimate" output - exact GELU, then
 * the final layernorm). Both are pre-LN transformers with a causal mask over 77
 * positions, so one computation serves both; only the checkpoint layout differs:
 *   HF layout:       cond_stage_model.transformer.text_model.* (separate q/k/v)
 *   OpenCLIP layout: cond_stage_model.model.* (fused attn.in_proj_weight [3C, C])
 * Fused q/k/v are used as row views of in_proj_weight, never copied.
 *
 * SDXL has two of them under conditioner.embedders.N. (the slot): CLIP ViT-L
 * (embedders.0, HF layout) and OpenCLIP ViT-bigG/14 (embedders.1, OpenCLIP
 * layout; a diffusers folder's text_encoder_2 gives it in the HF layout). Both
 * condition on the penultimate layer without the final layernorm, and bigG adds
 * the pooled output: ln_final of the last layer at the end-of-text position
 * (the first largest token id, as OpenCLIP's text.argmax(dim=-1) and
 * transformers' eos lookup pick it) times text_projection.
 *
 * Forward runs on the backend table, activations from an arena (a measuring
 * arena gives the memory without computing). Per-position embedding overrides
 * replace token-embedding rows before the position embedding is added (how
 * textual-inversion vectors enter the prompt), and backward gives the gradient
 * with respect to those rows only: the encoder's own weights are frozen.
 */
#ifndef SDT_MODELS_CLIP_TEXT_H
#define SDT_MODELS_CLIP_TEXT_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define CLIP_MAX_LAYERS 48

typedef enum clip_layout {
    CLIP_LAYOUT_HF = 0, /* <slot>transformer.text_model.* (projection: <slot>transformer.text_projection.weight) */
    CLIP_LAYOUT_OPENCLIP = 1, /* <slot>model.* (projection: <slot>model.text_projection, stored [in, out]) */
} clip_layout;

/* Where the encoder's keys live in the canonical key space. */
typedef enum clip_slot {
    CLIP_SLOT_COND_STAGE = 0, /* cond_stage_model.: SD 1.x/2.x's one text encoder */
    CLIP_SLOT_SDXL_L = 1,     /* conditioner.embedders.0.: SDXL's CLIP ViT-L/14 */
    CLIP_SLOT_SDXL_G = 2,     /* conditioner.embedders.1.: SDXL's OpenCLIP ViT-bigG/14 */
    CLIP_SLOT_SD3_L = 3,      /* text_encoders.clip_l.transformer.: SD3's CLIP-L (CLIPTextModelWithProjection) */
    CLIP_SLOT_SD3_G = 4,      /* text_encoders.clip_g.transformer.: SD3's bigG (transformers' names) */
} clip_slot;

typedef struct clip_config {
    int vocab;          /* token embedding rows */
    int width;          /* model width C */
    int layers;         /* transformer layers stored in the checkpoint */
    int heads;          /* width / 64 for every released CLIP text model */
    int positions;      /* max sequence length (77) */
    int mlp_width;      /* 4 * width */
    sdt_activation act; /* SDT_ACT_QUICK_GELU (OpenAI CLIP) or SDT_ACT_GELU (OpenCLIP) */
    int default_skip;   /* 1: last layer's output; 2: penultimate (SD 2.x) */
    float ln_eps;       /* 1e-5 */
    clip_layout layout;
    clip_slot slot;
    bool context_without_final_norm; /* SDXL: the context is the hidden state itself, no final layernorm */
    int projection_dim;             /* > 0: the pooled output [B, projection_dim] exists (SDXL's bigG: 1280); 0: none */
    bool pad_zero;                  /* OpenCLIP's tokenizer (SD 2.x ViT-H, SDXL bigG) pads with 0 after the end token;
                         * OpenAI's CLIP (SD 1.x, SDXL's CLIP-L) pads with the end token */
    bool pooled_without_projection; /* projection_dim 0 and a pooled output all the same: transformers'
                                     * CLIPTextModel pooler_output, ln_final at the end token (Flux's CLIP-L) */
} clip_config;

clip_config clip_config_sd1(void);
clip_config clip_config_sd2(void);
/* A small model of the SD1 architecture for tests: vocab 1000, width 128, 2 heads, 3 layers. */
clip_config clip_config_tiny(void);
/* SDXL's encoders: CLIP ViT-L/14 (768, 12 layers, quick GELU) and OpenCLIP ViT-bigG/14 (1280, 32 layers,
 * 20 heads, MLP 5120, GELU, projection 1280), both on the penultimate layer without the final layernorm. */
clip_config clip_config_sdxl_l(void);
clip_config clip_config_sdxl_g(void);
/* Their tiny versions for tests: vocab 1000, 3 layers, one head (width / 64 rounded up to 1, as detection
 * reads it), widths 32 and 48, bigG's projection 48: the tiny SDXL UNet's context 80 and pooled 48. */
clip_config clip_config_tiny_sdxl_l(void);
clip_config clip_config_tiny_sdxl_g(void);

/* The pooled output's width: projection_dim, the width for pooled_without_projection, 0 without a pooled output. */
int clip_pooled_dim(const clip_config *cfg);

/* The key prefix of the encoder's tensors, e.g. "conditioner.embedders.1.model." (static string). */
const char *clip_key_prefix(const clip_config *cfg);
/* The id that fills a 77-token chunk after its first end token for this encoder (pad_zero: 0). */
int32_t clip_pad_id(const clip_config *cfg, int32_t end_id);

/* Reads the config from tensor names and shapes (never data): the layout from the
 * key prefix, width/vocab/positions from the embeddings, layers by counting,
 * heads = width / 64, activation and default skip from the layout (HF layout with
 * width 1024 is diffusers' SD 2.x text encoder: GELU, 23 stored layers). */
bool clip_config_detect(const sdt_weights *w, clip_config *cfg, sdt_error *error);
/* The same for the encoder in slot (clip_config_detect is CLIP_SLOT_COND_STAGE). The SDXL slots set what
 * SDXL's conditioning uses: default skip 2 without the final layernorm; ViT-L's quick GELU and bigG's
 * GELU, zero padding and projection (its width read from text_projection's shape). The SD3 slots are the
 * same two encoders as SD3's all-in-one files keep them (transformers' names only), each with its
 * projection (SD3's pooled vector is both projected outputs). */
bool clip_config_detect_at(const sdt_weights *w, clip_slot slot, clip_config *cfg, sdt_error *error);
/* A CLIPTextModel whose pooler_output alone conditions (Flux.1's CLIP-L): every layer, the final norm, quick GELU,
 * no projection (a text_projection a file carries is not read). */
void clip_config_as_pooler(clip_config *cfg);
/* clip_config_detect_at for such an encoder in slot (CLIP_SLOT_SD3_L: Flux's files keep CLIP-L where SD3's do). */
bool clip_config_detect_pooler(const sdt_weights *w, clip_slot slot, clip_config *cfg, sdt_error *error);
/* Sanity of a config (positive sizes, width divisible by heads, layers <= CLIP_MAX_LAYERS). */
bool clip_config_check(const clip_config *cfg, sdt_error *error);

/* Enumerates every parameter the checkpoint holds for this config under its
 * canonical key (for the OpenCLIP layout also text_projection and logit_scale,
 * which SD 2.x checkpoints store but do not use; SDXL's bigG uses text_projection). */
bool clip_params(const clip_config *cfg, sdt_param_visitor visit, void *user);

typedef struct clip_layer_weights {
    sdt_tensor ln1_w, ln1_b;
    sdt_tensor q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b;
    sdt_tensor ln2_w, ln2_b;
    sdt_tensor fc1_w, fc1_b, fc2_w, fc2_b;
} clip_layer_weights;

/* Views into an sdt_weights; owns nothing, valid while the weights are open. */
typedef struct clip_text_model {
    clip_config cfg;
    sdt_tensor tok_emb; /* [vocab, width]: the trainer reads init rows from here */
    sdt_tensor pos_emb; /* [positions, width] */
    sdt_tensor lnf_w, lnf_b;
    sdt_tensor proj; /* projection_dim > 0: text_projection, [width, P] (OpenCLIP) or [P, width] (HF) */
    clip_layer_weights layer[CLIP_MAX_LAYERS];
} clip_text_model;

/* Looks every parameter up (shape-checked) in w. */
bool clip_text_load(clip_text_model *m, const clip_config *cfg, const sdt_weights *w, sdt_error *error);

/* out [n, width] (any float dtype, on the backend's device) = the token-embedding rows
 * of ids (host array): what a new embedding is initialised from. */
bool clip_text_token_rows(const clip_text_model *m, sdt_backend *be, const int32_t *ids, int n, sdt_tensor *out,
                          sdt_error *error);

/* One overridden position: token embedding of (batch, position) := rows[row]. */
typedef struct clip_override {
    int batch, position, row;
} clip_override;

typedef struct clip_text_inputs {
    const sdt_tensor *tokens;       /* I32 [B, T], T <= positions, on the backend's device */
    const sdt_tensor *rows;         /* [R, width] override rows, any float dtype; NULL when none */
    const clip_override *overrides; /* n_overrides entries; must stay valid until backward */
    int n_overrides;
    int clip_skip;       /* 0: the config's default_skip; N >= 1: run layers - (N - 1) layers */
    sdt_dtype act_dtype; /* activation storage dtype (SDT_F32, SDT_F16, SDT_BF16) */
    bool anomaly_check;  /* count non-finite values after every op in forward and after every
                                     * layer's input gradient in backward; the first one found is an
                                     * error "clip_text anomaly: ..." naming the op and layer (slow) */
} clip_text_inputs;

typedef struct clip_layer_acts {
    sdt_tensor ln1, ln1_mean, ln1_rstd;
    sdt_tensor q, k, v, lse, attn; /* lse [B, heads, T] f32: attention's saved softmax statistics */
    sdt_tensor x_mid;
    sdt_tensor ln2, ln2_mean, ln2_rstd;
    sdt_tensor fc1, act;
    sdt_tensor x_out;
} clip_layer_acts;

/* What forward saved for backward (arena tensors). */
typedef struct clip_text_acts {
    int batch, seq;
    int layers_run;     /* layers computed: all of them when there is a pooled output */
    int context_layers; /* layers under the context (out) */
    sdt_dtype act_dtype;
    bool anomaly_check;
    sdt_tensor rows;
    const clip_override *overrides;
    int n_overrides;
    sdt_tensor x0; /* embeddings (after overrides and position embedding) */
    clip_layer_acts layer[CLIP_MAX_LAYERS];
    sdt_tensor lnf_mean, lnf_rstd;
    sdt_tensor out; /* [B, T, width]: the conditioning */
    /* clip_pooled_dim > 0: the pooled output and what it was made from */
    sdt_tensor end_index;                  /* I32 [B, 1]: b * T + the end-of-text position of row b */
    sdt_tensor end_x;                      /* [B, 1, width]: the last layer's output there */
    sdt_tensor end_ln, end_mean, end_rstd; /* ln_final of it ([B, width]; [B] f32) */
    sdt_tensor pooled;                     /* [B, clip_pooled_dim]; end_ln itself without a projection */
} clip_text_acts;

/* Runs the encoder; acts->out is the result. With a measuring arena nothing is
 * computed and arena->peak afterwards is the memory forward needs. */
bool clip_text_forward(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_inputs *in,
                       clip_text_acts *acts, sdt_error *error);
/* From d(out) [B, T, width] to the override rows: drows [R, width] += gradient
 * (accumulates, like every backward op). Scratch is taken from the arena and given
 * back before returning. */
bool clip_text_backward(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_acts *acts,
                        const sdt_tensor *dout, sdt_tensor *drows, sdt_error *error);
/* The same from d(out) and d(pooled) [B, clip_pooled_dim] together (either may be NULL): SDXL's bigG,
 * whose pooled output reaches the UNet through y (and SD3's and Flux's encoders, whose pooled outputs
 * reach the transformer's modulation). */
bool clip_text_backward_pooled(const clip_text_model *m, sdt_backend *be, sdt_arena *arena, const clip_text_acts *acts,
                               const sdt_tensor *dout, const sdt_tensor *dpooled, sdt_tensor *drows, sdt_error *error);

#endif
