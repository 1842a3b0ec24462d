/* flux.h - the Flux.1 transformer (diffusers FluxTransformer2DModel), forward and backward to its conditioning
 * inputs with the weights frozen.
 *
 * Image: the latent [B, C, h, w] (C 16, h and w even) is packed as diffusers' pipeline _pack_latents does, 2 x 2
 * patches to tokens of 4C features in the order (c, py, px), row-major over the h/2 x w/2 grid, and projected by
 * `x_embedder` Linear(4C -> H); the output is unpacked the same way, so callers hand and get [B, C, h, w].
 * Conditioning: temb = MLP(sinusoid_256(1000 t)) [+ MLP(sinusoid_256(1000 guidance)), dev] + MLP(pooled) (each
 * Linear, SiLU, Linear; the sinusoid [cos, sin], shift 0) and every modulation reads SiLU(temb). Text:
 * `context_embedder` Linear(4096 -> H). Positions: 3-axis RoPE (axes_dim (16, 56, 56) of head_dim 128, theta
 * 10000), text ids (0, 0, 0), image ids (0, row, col) of the packed grid, applied to q and k after their RMS norm
 * (diffusers' apply_rotary_emb, use_real, pairs interleaved).
 * Double-stream blocks (FluxTransformerBlock): the joint block of dit_blocks.h (adaLN-Zero 6H per stream, RMS norm
 * of q and k per head, eps 1e-6, GELU-tanh MLP 4H) with attention over [text; image] (text FIRST, unlike SD3).
 * Single-stream blocks (FluxSingleTransformerBlock) over the concatenated [text; image] tokens: adaLN-Zero 3H
 * (shift, scale, gate), modulated LN, q/k/v with RMS norm and RoPE, attention, proj_mlp H -> 4H GELU-tanh,
 * proj_out over concat(attention, mlp) 5H -> H, gated residual. Output: the image tokens through the continuous
 * adaLN (`norm_out.linear`, scale then shift) and `proj_out` H -> 4C.
 *
 * Keys (diffusers' transformer, under a prefix: "" for transformer/diffusion_pytorch_model.safetensors), every
 * linear with a bias:
 *   x_embedder [H, 4C], context_embedder [H, 4096]
 *   time_text_embed.{timestep_embedder, guidance_embedder (dev)}.linear_{1 [H, 256], 2 [H, H]}
 *   time_text_embed.text_embedder.linear_{1 [H, 768], 2 [H, H]}
 *   transformer_blocks.N.{norm1.linear, norm1_context.linear} [6H, H]
 *   transformer_blocks.N.attn.{to_q, to_k, to_v, add_q_proj, add_k_proj, add_v_proj, to_out.0, to_add_out} [H, H]
 *   transformer_blocks.N.attn.norm_{q, k, added_q, added_k}.weight [head_dim]
 *   transformer_blocks.N.{ff, ff_context}.net.{0.proj [4H, H], 2 [H, 4H]}
 *   single_transformer_blocks.N.{norm.linear [3H, H], attn.to_q, attn.to_k, attn.to_v [H, H],
 *     attn.norm_q, attn.norm_k [head_dim], proj_mlp [4H, H], proj_out [H, 5H]}
 *   norm_out.linear [2H, H], proj_out [4C, H]
 * BFL's original layout (flux1-dev.safetensors: double_blocks.N.img_attn.qkv ..., at the top or under
 * model.diffusion_model.) reaches it in these names under "model.diffusion_model." (models/weights/transformer_keys.h
 * maps it when the file is opened).
 *
 * Activations are in flux_inputs.act_dtype (the run's: f32, f16 or bf16), with the same f32 exceptions as the
 * MMDiT's (mmdit.h). Without checkpointing every block's are kept: at 1024 x 1024 (a 128 x 128 latent, 4096 image
 * tokens) with 512 text tokens, batch 1, Flux dev's forward peaks at 20.1 GiB and forward and backward at
 * 20.8 GiB in bf16 (40.2 and 41.4 GiB in f32; the measuring arena: sdt-flux-io measure [--bf16]), on top of the
 * weights (23.8 GB in bf16). With gradient checkpointing (flux_inputs.checkpointing) the forward keeps each
 * double block's two stream outputs, the single blocks' joined input and each single block's output (every
 * block's input) and one work set of each kind (3.8 GiB forward and backward at the size above in bf16, 7.5 GiB
 * in f32); backward runs each block's forward again into its work set, then its backward. Nothing else is kept
 * per block: the modulation is one linear of silu(temb), which stays with the acts, and the RoPE tables are the
 * model's; the recompute is the same ops on the same inputs, so the gradients are bit-identical.
 */
#ifndef SDT_MODELS_FLUX_H
#define SDT_MODELS_FLUX_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "dit_blocks.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define FLUX_MAX_LAYERS 64
#define FLUX_PREFIX_MAX 96
#define FLUX_TIME_DIM 256 /* the sinusoid's width (diffusers Timesteps(256)) */

typedef struct flux_config {
    int double_layers, single_layers; /* 19 and 38 */
    int heads, head_dim;              /* hidden H = heads * head_dim (24 x 128) */
    int in_channels;                  /* latent channels C (16); tokens carry 4C */
    int context_dim;                  /* joint_attention_dim, 4096 */
    int pooled_dim;                   /* pooled_projection_dim, 768 */
    int mlp_ratio;                    /* 4 */
    int axes_dim[3];                  /* RoPE widths per id axis, summing to head_dim: (16, 56, 56) */
    bool guidance;                    /* dev: guidance_embedder */
    char prefix[FLUX_PREFIX_MAX];
} flux_config;

flux_config flux_config_dev(void);     /* 19 + 38 blocks, 24 x 128, guidance */
flux_config flux_config_schnell(void); /* the same without guidance */
/* For tests: 2 + 2 blocks, 2 heads of 16 (H 32), axes (4, 6, 6), 4 latent channels (16 per token), context 24,
 * pooled 12, guidance. */
flux_config flux_config_tiny(void);

bool flux_config_check(const flux_config *cfg, sdt_error *error);
/* Reads the config from names and shapes under prefix: H and the context width from context_embedder, C from
 * x_embedder, head_dim from attn.norm_q, blocks by counting, guidance from guidance_embedder. The RoPE axes are
 * not stored: Flux's (16, 56, 56) for head_dim 128, else the two spatial axes 2 floor(7 head_dim / 32) each and
 * the rest to the first. */
bool flux_config_detect(const sdt_weights *w, const char *prefix, flux_config *cfg, sdt_error *error);
/* Every parameter under its diffusers key (linears N(0, fan_in^-1/2), biases zero, norms one). */
bool flux_params(const flux_config *cfg, sdt_param_visitor visit, void *user);

typedef struct flux_single_weights {
    dit_linear mod;            /* norm.linear [3H, H] */
    dit_linear q, k, v;        /* attn.to_{q,k,v} */
    sdt_tensor norm_q, norm_k; /* [head_dim] */
    dit_linear mlp, out;       /* proj_mlp [4H, H], proj_out [H, 5H] */
} flux_single_weights;

/* The RoPE tables depend only on the text length and the packed grid, so each shape's are built once, on the
 * backend of the first forward that needs them, and kept with the model: a training run's steps (one shape per
 * bucket) rebuild nothing. The forward's acts point at them (backward reads them there). */
#define FLUX_ROPE_SHAPES 16 /* shapes kept; past that a forward builds its tables in its arena, as uncached */

typedef struct flux_rope_entry {
    int ctx_tokens, grid_h, grid_w;
    sdt_tensor cos, sin; /* f32 [T + N, head_dim], memory from rope_cache.be->alloc */
} flux_rope_entry;

typedef struct flux_rope_cache {
    sdt_backend *be; /* the tables' backend; a forward on another one builds its own in its arena */
    int n;
    flux_rope_entry entry[FLUX_ROPE_SHAPES];
    int builds; /* tables built into the cache (a forward of a cached shape builds none) */
} flux_rope_cache;

typedef struct flux_model {
    flux_config cfg;
    dit_linear x_in, ctx_in, t1, t2, g1, g2, p1, p2, norm_out, proj_out;
    dit_stream_weights img[FLUX_MAX_LAYERS], ctx[FLUX_MAX_LAYERS];
    flux_single_weights single[FLUX_MAX_LAYERS];
    flux_rope_cache *rope; /* owned (flux_free); NULL (a model not from flux_load): tables built per forward */
} flux_model;

/* Views into w (shape-checked; a missing or misshaped tensor is a sentence naming the file and the key), and an
 * empty RoPE cache. m is overwritten: flux_free a loaded model before loading into it again. */
bool flux_load(flux_model *m, const flux_config *cfg, const sdt_weights *w, sdt_error *error);
/* Frees the RoPE cache (its tables through the backend they were built on: call this before destroying that
 * backend). The weights are views and stay. m may be zeroed or already freed. */
void flux_free(flux_model *m);

typedef struct flux_inputs {
    const sdt_tensor *latent;  /* [B, C, h, w] unpacked, any float dtype, h and w even */
    const float *timesteps;    /* host [B]: sigma in [0, 1]; the model embeds 1000 sigma */
    const float *guidance;     /* host [B]: dev's distilled guidance scale (embeds 1000 g); ignored by schnell */
    const sdt_tensor *context; /* [B, T, context_dim] (T5's hidden states) */
    const sdt_tensor *pooled;  /* [B, pooled_dim] (CLIP-L's pooled output) */
    bool checkpointing;        /* keep only the blocks' outputs; backward recomputes each block */
    sdt_dtype act_dtype;       /* the activations' dtype: SDT_F32 (0, the default), SDT_F16 or SDT_BF16 (the run's) */
} flux_inputs;

typedef struct flux_single_acts {
    sdt_tensor mod, gamma, mean, rstd; /* [B, 3H], [B, H], [B*S] x 2 */
    sdt_tensor q, k, v, rstd_q, rstd_k;
    sdt_tensor Q, K, O, lse; /* normed, rotated q and k; attention output and logsumexp */
    sdt_tensor h;            /* proj_mlp's output before GELU [B, S, 4H] */
    sdt_tensor y, x_out;     /* proj_out's output, the block's output [B, S, H] */
} flux_single_acts;

typedef struct flux_acts {
    int batch, tokens, ctx_tokens, grid_h, grid_w; /* tokens = grid_h * grid_w (the packed grid) */
    sdt_dtype act_dtype;                           /* the inputs' act_dtype */
    sdt_tensor pooled_h, pooled_a, temb, silu_temb;
    sdt_tensor ctx0, img0;      /* the streams entering block 0 */
    sdt_tensor context, pooled; /* the inputs' shapes (for backward) */
    sdt_tensor cos, sin;        /* RoPE tables [T + N, head_dim]: the model's cached ones, or in the arena */
    bool rope_in_arena;         /* the tables were built in the forward's arena (not cached) */
    dit_stream_acts img[FLUX_MAX_LAYERS], ctx[FLUX_MAX_LAYERS];
    sdt_tensor joint[FLUX_MAX_LAYERS][5]; /* Q, K, V, O [B, T + N, H] (text first) and lse */
    sdt_tensor x_join;                    /* [B, T + N, H]: the single blocks' input */
    flux_single_acts single[FLUX_MAX_LAYERS];
    bool checkpointing;                 /* of img[], ctx[] and single[] only x_out was kept; joint[] is empty */
    dit_stream_acts work_img, work_ctx; /* checkpointing: one double block's activations, each in turn */
    sdt_tensor work_joint[5];
    flux_single_acts work_single; /* and one single block's */
    sdt_tensor x_img;             /* [B, N, H]: the image tokens leaving the last block */
    sdt_tensor out_mod, out_gamma, out_mean, out_rstd;
    sdt_tensor ones; /* [max(T + N, H), 1] in act_dtype */
    sdt_tensor out;  /* f32 [B, C, h, w]: the prediction (velocity) */
} flux_acts;

/* Runs the transformer; acts->out is the result. With a measuring arena nothing is computed and arena->peak
 * gives the memory (counting the RoPE tables, which a cached shape then does not take from the arena). */
bool flux_forward(const flux_model *m, sdt_backend *be, sdt_arena *arena, const flux_inputs *in, flux_acts *acts,
                  sdt_error *error);
/* From d(out) [B, C, h, w] (f32) to dcontext [B, T, context_dim] and dpooled [B, pooled_dim] (f32, accumulated;
 * either may be NULL). Scratch from the arena, given back before returning. */
bool flux_backward(const flux_model *m, sdt_backend *be, sdt_arena *arena, const flux_acts *acts,
                   const sdt_tensor *dout, sdt_tensor *dcontext, sdt_tensor *dpooled, sdt_error *error);

#endif
