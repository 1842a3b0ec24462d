/* unet.h - the Stable Diffusion UNet (LDM openaimodel layout), forward and
 * backward to the text context, on the kernel dispatch table.
 *
 * Architecture as published (ldm/modules/diffusionmodules/openaimodel.py with
 * SpatialTransformer from ldm/modules/attention.py), sized by a config:
 *   time_embed (linear, SiLU, linear) -> conv_in -> input blocks (ResBlock
 *   [+ SpatialTransformer] per res block, Downsample between levels) ->
 *   middle (ResBlock, SpatialTransformer, ResBlock) -> output blocks
 *   (concat skip, ResBlock [+ SpatialTransformer], Upsample between levels) ->
 *   GroupNorm, SiLU, conv_out.
 * SDXL is the same blocks configured (sgm's openaimodel): a transformer depth
 * per level and for the middle, and the addition embedding label_emb (LDM's
 * num_classes "sequential": linear, SiLU, linear from the vector y) added to
 * the time embedding.
 * Parameters are looked up under canonical LDM keys
 * ("model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight").
 *
 * Training here never updates UNet weights (TI and hypernetworks keep it
 * frozen), so backward produces only d(context) (and the hook gradients):
 * no weight gradients, and no backward through blocks that cannot reach the
 * context (conv_in, the time embedding, the first ResBlocks). On SDXL the
 * pooled text embedding inside y depends on a trained embedding too; asked
 * for d(y), backward also goes through every ResBlock's time-embedding
 * projection and label_emb (and so through the first ResBlocks).
 *
 * One sdt_unet runs one forward/backward pair at a time (it keeps the
 * forward's saved state); use one per worker thread.
 *
 * Memory: every activation comes from an sdt_arena. Run forward (+ backward)
 * once on a measuring arena (sdt_arena_init_measure) with the real batch and
 * latent size, read arena.peak, and allocate that; the same calls then fit.
 */
#ifndef SDT_MODELS_UNET_H
#define SDT_MODELS_UNET_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define SDT_UNET_MAX_LEVELS 6
#define SDT_UNET_KEY_PREFIX "model.diffusion_model."

typedef struct sdt_unet_config {
    int in_channels;                            /* latent channels, 4 */
    int out_channels;                           /* 4 */
    int model_channels;                         /* 320 */
    int num_levels;                             /* 4 */
    int channel_mult[SDT_UNET_MAX_LEVELS];      /* 1, 2, 4, 4 */
    bool attention[SDT_UNET_MAX_LEVELS];        /* SpatialTransformers at this level: SD 1/2 levels 0..2 */
    int num_res_blocks;                         /* 2 */
    int transformer_depth[SDT_UNET_MAX_LEVELS]; /* transformer blocks per SpatialTransformer at a level with
                                             * attention: SD 1/2 all 1, SDXL 1, 2, 10 (level 0 has none) */
    int middle_depth;                           /* the middle SpatialTransformer's: SD 1/2 1, SDXL 10 */
    int adm_in_channels;                        /* width of y, the label_emb input (SDXL 2816); 0: no label_emb */
    int addition_time_embed_dim;                /* with label_emb: the sinusoidal width of each of y's six size
                                             * numbers (SDXL 256; diffusers' name); y = pooled text
                                             * embedding (adm_in - 6 x this wide), then the six */
    int num_heads;                              /* > 0: fixed head count (SD1: 8) ... */
    int head_dim;                               /* ... or > 0: fixed head width (SD2: 64); exactly one is set */
    int context_dim;                            /* 768 (SD1), 1024 (SD2) */
    int time_embed_dim;                         /* 4 * model_channels = 1280 */
    int norm_groups;                            /* 32 for every GroupNorm */
    float norm_eps;                             /* ResBlock / output GroupNorm: 1e-5 */
    float transformer_norm_eps;                 /* SpatialTransformer GroupNorm: 1e-6 */
    float layernorm_eps;                        /* transformer block LayerNorms: 1e-5 */
    int ff_mult;                                /* GEGLU inner width = ff_mult * channels: 4 */
    bool linear_proj;                           /* SD2: proj_in/proj_out are Linear, not 1x1 conv */
    bool v_prediction;                          /* SD2 768-v: the output is v, not eps (not detectable from weights) */
    bool flip_sin_to_cos;                       /* timestep embedding [cos, sin]: true for LDM */
    float freq_shift;                           /* 0 for LDM */
    bool upcast_attention;                      /* diffusers' flag (SD 2.1): attention scores in fp32 under
                                             * fp16/bf16. Both backends always form the scores and the
                                             * softmax in fp32 (kernels/ops.h), so it changes nothing
                                             * here; it is read and written for diffusers. */
} sdt_unet_config;

/* The published configurations, and a tiny one of the same architecture for tests:
 * 32 channels, mult 1,2, attention at level 0 (and the middle), 1 res block,
 * 2 heads, context 32, 32 groups, time embedding 128. */
sdt_unet_config sdt_unet_config_sd1(void);
sdt_unet_config sdt_unet_config_sd2(bool v_prediction);
sdt_unet_config sdt_unet_config_tiny(void);
/* SDXL base 1.0 (sd_xl_base.yaml): 320 channels, mult 1,2,4, 2 res blocks, attention
 * at levels 1 and 2 with depths 2 and 10, middle depth 10, head width 64, linear
 * projections, context 2048 (CLIP-L 768 + OpenCLIP bigG 1280), y 2816. */
sdt_unet_config sdt_unet_config_sdxl(void);
/* The tiny model of SDXL's architecture for tests: 32 channels, mult 1,2,2, 1 res
 * block, attention at levels 1 and 2 with depths 1 and 2, middle depth 2, 2 heads,
 * linear projections, context 80 (32 + 48, two encoders), y 96 (pooled 48 +
 * 6 x 8), time embedding 128. */
sdt_unet_config sdt_unet_config_tiny_sdxl(void);
/* Heads of a SpatialTransformer of `channels` width under this config. */
int sdt_unet_config_heads(const sdt_unet_config *c, int channels);

/* The hypernetwork sizes the model takes: the K/V input widths of its attentions, each once, the
 * text context's (cross-attention) first, then the self-attentions' channels by level, as A1111
 * lists them (SD 1.x: 768, 320, 640, 1280). Returns the count (at most SDT_UNET_MAX_KV_WIDTHS). */
#define SDT_UNET_MAX_KV_WIDTHS (SDT_UNET_MAX_LEVELS + 1)
int sdt_unet_config_kv_widths(const sdt_unet_config *c, int widths[SDT_UNET_MAX_KV_WIDTHS]);
/* The most tokens an attention whose K/V input is `width` wide sees for a latent of h x w: a
 * self-attention's level's H x W (the levels halve the latent as the UNet's stride-2 convolutions
 * do), context_tokens for the cross-attention's context; 0 when no attention takes that width. The
 * hook's workspace is sized by it per width (SDXL's first level has no attention). */
int64_t sdt_unet_config_kv_tokens(const sdt_unet_config *c, int width, int64_t h, int64_t w, int64_t context_tokens);
/* The same for a sentence: "128 (cross-attention context 128) and 64". */
void sdt_unet_config_describe_kv_widths(const sdt_unet_config *c, char *buf, size_t size);
bool sdt_unet_config_validate(const sdt_unet_config *c, sdt_error *error);
/* Reads the config from tensor names and shapes only (depths per level and of
 * the middle from transformer_blocks keys, label_emb and its widths). Two
 * things are not in the weights: the head split (model_channels 320: linear
 * projections or context 1024 (SD2) or 2048 (SDXL) -> head_dim 64, else SD1,
 * 8 heads; any other size -> 2 heads, the tiny convention) and v-prediction
 * (false; the caller sets it from the user's choice or the checkpoint's
 * companion config). With a label_emb the size embedding's width is taken as
 * SDXL's 256 for 320 channels, else 8 (the tiny convention). */
bool sdt_unet_config_detect(const sdt_weights *w, sdt_unet_config *out, sdt_error *error);

/* Visits every parameter of the config (canonical key, shape, init for the
 * random checkpoint generator: weights N(0, 1/sqrt(fan_in)), biases zero,
 * norm weights one). Returns false if the config is invalid or the visitor stopped. */
bool sdt_unet_enumerate_params(const sdt_unet_config *c, sdt_param_visitor visit, void *user, sdt_error *error);

typedef struct sdt_unet sdt_unet;

/* Binds every parameter from w (shape-checked, errors name the key). The
 * weights must outlive the UNet and live on the device of the backend used. */
sdt_unet *sdt_unet_load(const sdt_unet_config *c, const sdt_weights *w, sdt_error *error);
/* The same network without weights: only for measuring (sdt_unet_measure or
 * a measuring arena) before a checkpoint is loaded; running it is an error. */
sdt_unet *sdt_unet_create_unbound(const sdt_unet_config *c, sdt_error *error);
void sdt_unet_free(sdt_unet *u);
const sdt_unet_config *sdt_unet_get_config(const sdt_unet *u);

/* ---- hypernetwork hook at every attention K and V input ----
 * Attention layers are numbered 0.. in forward order: attn1 (self-attention,
 * K/V input = the normed hidden states, width = block channels 320/640/1280),
 * then attn2 (cross-attention, K/V input = the text context, width 768/1024),
 * for each transformer block of input, middle and output blocks.
 * A1111 hooks both kinds and picks its module by width, so a hypernetwork
 * with modules 768 and 320/640/1280 acts on cross- and self-attention alike;
 * a hook that wants only cross-attention answers false in `wants` for the rest.
 * Without a hook (or when `wants` says no) the K/V input passes unchanged. */
typedef enum sdt_unet_kv {
    SDT_UNET_K = 0,
    SDT_UNET_V = 1,
} sdt_unet_kv;

typedef struct sdt_unet_hook_site {
    int layer; /* attention index in forward order */
    sdt_unet_kv kind;
    int width;  /* last dim of the K/V input */
    bool cross; /* attn2 (text context) vs attn1 (hidden states) */
} sdt_unet_hook_site;

/* A UNet pass, as the hook's `pass` callback sees it: one forward, or one forward with
 * for_backward and then its backward (whose checkpointing recompute belongs to it). */
typedef enum sdt_unet_pass_event {
    SDT_UNET_PASS_FORWARD_BEGIN = 0, /* before the forward's first site */
    SDT_UNET_PASS_FORWARD_END,       /* after its last site; without for_backward the pass is over */
    SDT_UNET_PASS_BACKWARD_BEGIN,    /* before the backward's first site (recompute included) */
    SDT_UNET_PASS_BACKWARD_END,      /* after its last site, before sdt_unet_backward returns */
} sdt_unet_pass_event;

typedef struct sdt_unet_hook_pass {
    sdt_unet_pass_event event;
    bool for_backward;         /* the forward saves for a backward, which will end the pass */
    sdt_dtype act_dtype;       /* the activations' dtype (every self-attention K/V input's) */
    const sdt_tensor *context; /* the cross-attention K/V input: the `in` of every cross site */
    sdt_tensor *d_context;     /* backward: where d(context) accumulates (the cross sites' d_in) */
} sdt_unet_hook_pass;

typedef struct sdt_unet_kv_hook {
    void *user;
    /* NULL means every site. Must answer the same for the same site within a step. */
    bool (*wants)(void *user, const sdt_unet_hook_site *site);
    /* out [B, T, width] = f(in); out is UNet arena memory in act_dtype (in is the
     * context tensor as given for cross-attention, arena memory for self-attention),
     * and must be written fully.
     * recompute is true when gradient checkpointing runs the block again in
     * backward: the hook must return the same values (same dropout masks).
     * Inside a pass (`pass` below) the hook may instead point out->data at memory
     * of its own holding the values in out's dtype and shape, unchanged until the
     * pass ends: the UNet only reads it (the K/V projection's input).
     * Returns true, or false with its own sentence and status in *error (out of
     * workspace, a backend failure); the UNet puts the layer in front of it. */
    bool (*forward)(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, sdt_tensor *out, bool recompute,
                    sdt_error *error);
    /* d_in += d(out)/d(in)^T d_out (accumulate, as every backward op); the hook
     * may also accumulate its own parameter gradients here. Errors as forward. */
    bool (*backward)(void *user, const sdt_unet_hook_site *site, const sdt_tensor *in, const sdt_tensor *d_out,
                     sdt_tensor *d_in, sdt_error *error);
    /* NULL: not told. The UNet calls it at each sdt_unet_pass_event of a real (not
     * measuring) sdt_unet_forward / sdt_unet_backward. Between FORWARD_BEGIN and the
     * pass's end nothing the hook reads changes (its parameters, the context: the
     * optimizer runs between passes), so it may compute once what every cross-attention
     * shares (their K/V input is the one context), keep converted copies of its weights,
     * and sum the cross sites' d_out to take them back once at BACKWARD_END, into the
     * d_in the sites passed (d_context); it must forget all of it at the next
     * FORWARD_BEGIN (a backward that failed never sends its END). Errors as forward; the
     * UNet names the pass in front of the hook's sentence. */
    bool (*pass)(void *user, const sdt_unet_hook_pass *pass, sdt_error *error);
} sdt_unet_kv_hook;

int sdt_unet_attention_count(const sdt_unet *u);
/* Fills a site (kind K) for attention layer `layer`; false when out of range. */
bool sdt_unet_attention_site(const sdt_unet *u, int layer, sdt_unet_hook_site *site);

typedef struct sdt_unet_options {
    sdt_dtype act_dtype;          /* activations and their gradients: SDT_F32, SDT_F16, SDT_BF16 */
    bool for_backward;            /* save what backward needs; false = inference (keeps less) */
    bool checkpointing;           /* save block outputs only; recompute each block in backward */
    const sdt_unet_kv_hook *hook; /* NULL: identity */
    bool anomaly_check;           /* count non-finite values after every layer (and every unit's
                                   * input gradient in backward); the first one found is an error
                                   * naming the layer. Costs a pass over each output. */
} sdt_unet_options;

sdt_unet_options sdt_unet_options_default(void); /* f32, for_backward, no checkpointing, no hook */

/* latents [B, in, H, W] (H, W divisible by 2^(levels-1)), timesteps [B] (f32,
 * fractional allowed), context [B, T, context_dim], y [B, adm_in_channels] (SDXL's
 * vector conditioning, sdxl_cond.h; NULL when the config has no label_emb)
 * -> *out [B, out, H, W] (eps or v), a view into the arena. Inputs must stay
 * alive and unchanged until backward. On a measuring arena nothing runs and
 * arena->peak grows. */
bool sdt_unet_forward(sdt_unet *u, sdt_backend *be, sdt_arena *arena, const sdt_unet_options *opt,
                      const sdt_tensor *latents, const sdt_tensor *timesteps, const sdt_tensor *context,
                      const sdt_tensor *y, sdt_tensor *out, sdt_error *error);
/* Arena bytes that forward (and backward) need for this batch, latent size
 * and token count, without running anything (inputs are not needed). The
 * context (and y) are taken to be in opt->act_dtype; with a label_emb the
 * backward measured is the one that also gives d(y), the larger. */
bool sdt_unet_measure(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, int64_t batch, int64_t height,
                      int64_t width, int64_t tokens, bool with_backward, size_t *bytes, sdt_error *error);
/* After sdt_unet_forward with for_backward: d_context [B, T, context_dim]
 * += d(out)/d(context)^T d_out, through every attn2 K/V projection and every
 * hook; d_y (NULL: not wanted; only with a y) [B, adm_in_channels] += the same
 * for y, through every ResBlock's emb_layers and label_emb. Uses arena space
 * above the forward's and gives it back on return. */
bool sdt_unet_backward(sdt_unet *u, sdt_backend *be, sdt_arena *arena, const sdt_tensor *d_out, sdt_tensor *d_context,
                       sdt_tensor *d_y, sdt_error *error);

#endif
