/* mmdit.h - the SD3 / SD3.5 MMDiT transformer (diffusers SD3Transformer2DModel), forward and backward to its
 * conditioning inputs with the weights frozen.
 *
 * Image: Conv2d(C, H, kernel p, stride p) (`pos_embed.proj`), plus the stored position table
 * `pos_embed.pos_embed` [1, P*P, H] cropped at the centre to the h/p x w/p grid (PatchEmbed.cropped_pos_embed).
 * Conditioning: temb = MLP(sinusoid_256(t)) + MLP(pooled) (each Linear, SiLU, Linear; the sinusoid [cos, sin],
 * t = 1000 sigma), and every modulation reads SiLU(temb). Text: `context_embedder` Linear(4096 -> H).
 * Joint blocks (JointTransformerBlock): per stream adaLN-Zero (Linear -> 6H: shift, scale, gate for the
 * attention, then for the MLP), LayerNorm without affine (eps 1e-6), modulate LN(x)(1 + scale) + shift; q, k, v
 * per stream (image to_q/to_k/to_v, text add_{q,k,v}_proj), optional per-head RMS norm of q and k (SD3.5,
 * eps 1e-6), one attention over [image; text] tokens (heads of head_dim, scale 1/sqrt(head_dim), no mask),
 * split back to `to_out.0` / `to_add_out`; gated residuals; MLP H -> 4H GELU-tanh -> H per stream. The last
 * block's text stream is context_pre_only: a continuous adaLN (Linear -> 2H, chunks scale, shift), q/k/v only,
 * its output dropped. Output: continuous adaLN (`norm_out.linear`, scale then shift), `proj_out` H -> p*p*C,
 * unpatchified with per-token order (py, px, c).
 *
 * Keys (diffusers' transformer, under a prefix: "" for transformer/diffusion_pytorch_model.safetensors):
 *   pos_embed.proj.{weight [H, C, p, p], bias}, pos_embed.pos_embed [1, P*P, H]
 *   time_text_embed.timestep_embedder.linear_{1 [H, 256], 2 [H, H]}.{weight, bias}
 *   time_text_embed.text_embedder.linear_{1 [H, 2048], 2 [H, H]}.{weight, bias}
 *   context_embedder.{weight [H, 4096], bias}
 *   transformer_blocks.N.norm1.linear [6H, H], norm1_context.linear [6H or 2H, H]
 *   transformer_blocks.N.attn.{to_q, to_k, to_v, add_q_proj, add_k_proj, add_v_proj, to_out.0, to_add_out}
 *   transformer_blocks.N.attn.norm_{q, k, added_q, added_k}.weight [head_dim]   (qk_norm rms_norm)
 *   transformer_blocks.N.ff.net.{0.proj [4H, H], 2 [H, 4H]}, ff_context.net.{0.proj, 2}
 *   norm_out.linear [2H, H], proj_out [p*p*C, H]
 * SD3.5 Medium's MMDiT-X blocks (the first dual_layers): norm1.linear [9H, H] (the 6 chunks, then shift2,
 * scale2, gate2) and attn2.{to_q, to_k, to_v, to_out.0, norm_q, norm_k}: self-attention over the image tokens on
 * LN(x)(1 + scale2) + shift2 (x the block's input), gated and added after the joint attention's residual, before
 * the MLP (diffusers SD35AdaLayerNormZeroX, JointTransformerBlock use_dual_attention).
 * Every linear has a bias. SAI's all-in-one layout (model.diffusion_model.joint_blocks.N.x_block.attn.qkv ...,
 * fused qkv, final adaLN stored shift-then-scale) reaches it in these names under "model.diffusion_model."
 * (models/weights/transformer_keys.h maps it when the file is opened).
 *
 * Activations are in mmdit_inputs.act_dtype (the run's: f32, f16 or bf16): every per-token tensor and the
 * modulation; the norms' statistics, the attention's logsumexp, the conditioning MLPs' [B, H] vectors and the
 * prediction are f32, and so are backward's residual and modulation gradients (sums over branches and tokens).
 * Without checkpointing every block's are kept: at 1024 x 1024 (a 128 x 128 latent) with 77 + 256 text tokens,
 * batch 1, forward and backward peak at 4.9 GiB for SD3 Medium, 6.2 GiB for SD3.5 Medium and 12.0 GiB for SD3.5
 * Large in bf16 (9.7, 12.2 and 23.8 GiB in f32; the measuring arena: sdt-mmdit-io measure [--bf16]). With
 * gradient checkpointing (mmdit_inputs.checkpointing) the forward keeps each block's two stream outputs (the next
 * block's inputs) and one block's work set (forward and backward then peak at 0.9, 1.0 and 1.6 GiB in bf16, 1.7,
 * 2.0 and 3.2 GiB in f32, for the three at the size above);
 * backward runs each block's forward again into the work set, then its backward. Nothing else is kept per block:
 * the modulation is one linear of silu(temb), which stays with the acts, and everything else of a block is
 * recomputed from its inputs by the same ops, so the gradients are bit-identical.
 */
#ifndef SDT_MODELS_MMDIT_H
#define SDT_MODELS_MMDIT_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "dit_blocks.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define MMDIT_MAX_LAYERS 64
#define MMDIT_PREFIX_MAX 96
#define MMDIT_TIME_DIM 256 /* the timestep sinusoid's width (diffusers Timesteps(256)) */

typedef struct mmdit_config {
    int layers;          /* joint blocks */
    int heads, head_dim; /* hidden H = heads * head_dim */
    int in_channels;     /* latent channels, also the output's (16) */
    int patch;           /* 2 */
    int pos_max;         /* pos_embed_max_size P: latent sides up to P * patch */
    int context_dim;     /* joint_attention_dim, 4096 */
    int pooled_dim;      /* pooled_projection_dim, 2048 */
    int mlp_ratio;       /* 4 */
    bool qk_norm;        /* SD3.5: rms_norm on q and k per head */
    int dual_layers;     /* MMDiT-X blocks 0..dual_layers-1 (SD3.5 Medium: 13) */
    char prefix[MMDIT_PREFIX_MAX];
} mmdit_config;

mmdit_config mmdit_config_sd35_large(void);  /* 38 blocks, 38 x 64, P 192, qk_norm */
mmdit_config mmdit_config_sd35_medium(void); /* 24 blocks, 24 x 64, P 384, qk_norm, 13 dual blocks */
mmdit_config mmdit_config_sd3_medium(void);  /* 24 blocks, 24 x 64, P 192 */
/* For tests: 3 blocks, 2 heads of 8 (H 16), 4 latent channels, patch 2, P 6, context 24, pooled 12, qk_norm. */
mmdit_config mmdit_config_tiny(void);

bool mmdit_config_check(const mmdit_config *cfg, sdt_error *error);
/* Reads the config from names and shapes under prefix: H from context_embedder, head_dim from attn.norm_q (64
 * without it), P from pos_embed.pos_embed, layers by counting, dual layers from attn2. */
bool mmdit_config_detect(const sdt_weights *w, const char *prefix, mmdit_config *cfg, sdt_error *error);
/* Every parameter under its diffusers key (linears N(0, fan_in^-1/2), biases zero, norms one, the position
 * table N(0, 1)). */
bool mmdit_params(const mmdit_config *cfg, sdt_param_visitor visit, void *user);

typedef dit_linear mmdit_linear;
typedef dit_stream_weights mmdit_stream_weights;

typedef struct mmdit_model {
    mmdit_config cfg;
    sdt_tensor patch_w, patch_b, pos_table;
    mmdit_linear t1, t2, p1, p2, ctx_in, norm_out, proj_out;
    mmdit_stream_weights img[MMDIT_MAX_LAYERS], ctx[MMDIT_MAX_LAYERS];
} mmdit_model;

/* Views into w (shape-checked; a missing or misshaped tensor is a sentence naming the file and the key). */
bool mmdit_load(mmdit_model *m, const mmdit_config *cfg, const sdt_weights *w, sdt_error *error);

typedef struct mmdit_inputs {
    const sdt_tensor *latent;  /* [B, C, h, w], any float dtype, sides multiples of patch, at most P * patch */
    const float *timesteps;    /* host [B]: 1000 sigma */
    const sdt_tensor *context; /* [B, T, context_dim] (encoder_hidden_states) */
    const sdt_tensor *pooled;  /* [B, pooled_dim] (pooled_projections) */
    bool checkpointing;        /* keep only the blocks' outputs; backward recomputes each block */
    sdt_dtype act_dtype;       /* the activations' dtype: SDT_F32 (0, the default), SDT_F16 or SDT_BF16 (the run's) */
} mmdit_inputs;

typedef dit_stream_acts mmdit_stream_acts;

typedef struct mmdit_acts {
    int batch, tokens, ctx_tokens, grid_h, grid_w;
    sdt_dtype act_dtype;           /* the inputs' act_dtype */
    sdt_tensor pooled_h, pooled_a; /* text_embedder's hidden before / after SiLU */
    sdt_tensor temb, silu_temb;    /* [B, H] */
    sdt_tensor ctx0, img0;         /* the streams entering block 0 */
    sdt_tensor context, pooled;    /* the inputs' shapes (for backward) */
    mmdit_stream_acts img[MMDIT_MAX_LAYERS], ctx[MMDIT_MAX_LAYERS];
    sdt_tensor joint[MMDIT_MAX_LAYERS][5]; /* Q, K, V, O [B, N + T, H] (image first) and lse of each block */
    bool checkpointing;                    /* of img[] and ctx[] only x_out was kept; joint[] is empty */
    mmdit_stream_acts work_img, work_ctx;  /* checkpointing: one block's activations, every block's in turn */
    sdt_tensor work_joint[5];
    sdt_tensor out_mod, out_gamma, out_mean, out_rstd;
    sdt_tensor ones; /* [max(N, T, H), 1] in act_dtype: broadcasts a per-batch vector over tokens */
    sdt_tensor out;  /* f32 [B, C, h, w]: the prediction */
} mmdit_acts;

/* Runs the transformer; acts->out is the result. With a measuring arena nothing is computed and arena->peak
 * gives the memory. */
bool mmdit_forward(const mmdit_model *m, sdt_backend *be, sdt_arena *arena, const mmdit_inputs *in, mmdit_acts *acts,
                   sdt_error *error);
/* From d(out) [B, C, h, w] (f32) to dcontext [B, T, context_dim] and dpooled [B, pooled_dim] (f32, accumulated;
 * either may be NULL). Scratch from the arena, given back before returning. */
bool mmdit_backward(const mmdit_model *m, sdt_backend *be, sdt_arena *arena, const mmdit_acts *acts,
                    const sdt_tensor *dout, sdt_tensor *dcontext, sdt_tensor *dpooled, sdt_error *error);

#endif
