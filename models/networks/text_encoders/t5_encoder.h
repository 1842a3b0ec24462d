/* t5_encoder.h - the T5 v1.1 encoder as SD3/SD3.5 and Flux.1 use T5-XXL (conditioning for the transformer).
 *
 * transformers' T5EncoderModel: token embeddings (`shared.weight`, not scaled, no position embedding),
 * then pre-norm blocks x += o(Attn(RMSNorm(x))); x += wo(gelu_tanh(wi_0 h) * wi_1 h), h = RMSNorm(x);
 * then a final RMSNorm. RMSNorm is T5LayerNorm (no mean, no bias, eps 1e-6, statistics in f32); no
 * linear has a bias; attention logits are not scaled by 1/sqrt(d_kv) (T5's init folds it in); the
 * relative position bias (bidirectional buckets, 32 of them, max distance 128) lives in block 0's
 * attention and is shared by every block. The inner attention width is heads * d_kv, which need not be
 * d_model (T5 v1.1 small: 512 wide, 6 x 64).
 *
 * Keys, under a prefix (empty for a standalone file such as ComfyUI's t5xxl_fp16.safetensors,
 * "text_encoders.t5xxl.transformer." inside an SD3.5 all-in-one file):
 *   shared.weight (or encoder.embed_tokens.weight)                     [vocab, d_model]
 *   encoder.block.N.layer.0.layer_norm.weight                          [d_model]
 *   encoder.block.N.layer.0.SelfAttention.{q,k,v}.weight               [heads * d_kv, d_model]
 *   encoder.block.N.layer.0.SelfAttention.o.weight                     [d_model, heads * d_kv]
 *   encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight [buckets, heads]
 *   encoder.block.N.layer.1.layer_norm.weight                          [d_model]
 *   encoder.block.N.layer.1.DenseReluDense.{wi_0,wi_1}.weight          [d_ff, d_model]
 *   encoder.block.N.layer.1.DenseReluDense.wo.weight                   [d_model, d_ff]
 *   encoder.final_layer_norm.weight                                    [d_model]
 *
 * Padding: diffusers runs T5 without an attention mask (pads attended), as SD3 and Flux were trained;
 * kohya has an opt-in mask. t5_inputs.lengths gives the mask when wanted: keys past a sequence's length
 * get -inf added to the position bias, as transformers' extended attention mask does.
 *
 * Forward runs on the backend table, activations from an arena (a measuring arena gives the memory
 * without computing). Per-position embedding overrides replace token-embedding rows (how
 * textual-inversion vectors enter the prompt), and backward gives the gradient with respect to those
 * rows only: the encoder's weights are frozen.
 */
#ifndef SDT_MODELS_T5_ENCODER_H
#define SDT_MODELS_T5_ENCODER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"
#include "weights.h"

#define T5_MAX_LAYERS 48
#define T5_PREFIX_MAX 96

typedef struct t5_config {
    int vocab; /* embedding rows (32128 for T5-XXL; the tokenizer's ids end at 32099) */
    int d_model;
    int layers;
    int heads;
    int d_kv; /* per head (64); the attention's inner width is heads * d_kv */
    int d_ff;
    int rel_buckets;            /* 32 */
    int rel_max_distance;       /* 128 */
    float ln_eps;               /* 1e-6 */
    char prefix[T5_PREFIX_MAX]; /* key prefix, "" for a standalone T5 file */
} t5_config;

/* T5-XXL as SD3 and Flux use it: 24 layers, 4096 wide, 64 heads of 64, d_ff 10240, vocab 32128. */
t5_config t5_config_xxl(void);
/* A small model for tests: vocab 96, d_model 32, 3 layers, 4 heads of d_kv 6 (inner 24 != d_model),
 * d_ff 40, 32 buckets, max distance 128 (what t5_config_detect reads: the file does not store it). */
t5_config t5_config_tiny(void);

/* Sizes positive, layers <= T5_MAX_LAYERS, buckets even and >= 4, max distance > buckets / 4. */
bool t5_config_check(const t5_config *cfg, sdt_error *error);
/* Reads the config from tensor names and shapes under prefix (never data): vocab and d_model from the
 * embedding, heads from the relative bias, d_kv from q, d_ff from wi_0, layers by counting; max distance
 * 128 (the checkpoint does not store it). A T5 v1.0 checkpoint (one ReLU `wi`) is refused by name. */
bool t5_config_detect(const sdt_weights *w, const char *prefix, t5_config *cfg, sdt_error *error);

/* Enumerates every parameter under its key (shared.weight for the embedding), with T5's init scales
 * (q (d_model d_kv)^-1/2, k v wi d_model^-1/2, o inner^-1/2, wo d_ff^-1/2, embedding 1, bias 0.5). */
bool t5_params(const t5_config *cfg, sdt_param_visitor visit, void *user);

typedef struct t5_layer_weights {
    sdt_tensor ln1_w, q_w, k_w, v_w, o_w;
    sdt_tensor ln2_w, wi0_w, wi1_w, wo_w;
} t5_layer_weights;

/* Views into an sdt_weights; owns nothing, valid while the weights are open. */
typedef struct t5_encoder {
    t5_config cfg;
    sdt_tensor tok_emb;  /* [vocab, d_model]: the trainer reads init rows from here */
    sdt_tensor rel_bias; /* [buckets, heads] */
    sdt_tensor lnf_w;
    t5_layer_weights layer[T5_MAX_LAYERS];
} t5_encoder;

/* Looks every parameter up (shape-checked; a missing or misshaped tensor is a sentence naming the file
 * and the key) in w. */
bool t5_encoder_load(t5_encoder *m, const t5_config *cfg, const sdt_weights *w, sdt_error *error);

/* One overridden position: token embedding of (batch, position) := rows[row]. */
typedef struct t5_override {
    int batch, position, row;
} t5_override;

typedef struct t5_inputs {
    const sdt_tensor *tokens;     /* I32 [B, T] on the backend's device */
    const int32_t *lengths;       /* host [B]: mask keys at positions >= lengths[b]; NULL: no mask (diffusers) */
    const sdt_tensor *rows;       /* [R, d_model] override rows, any float dtype; NULL when none */
    const t5_override *overrides; /* n_overrides entries; must stay valid until backward */
    int n_overrides;
    sdt_dtype act_dtype; /* activation storage dtype (SDT_F32, SDT_F16, SDT_BF16). T5-XXL's residual
                                     * stream outgrows fp16 (transformers keeps wo in fp32 and clamps): use bf16 or
                                     * f32 for it; f16 is for small models and tests */
} t5_inputs;

typedef struct t5_layer_acts {
    sdt_tensor rstd1, q, k, v, lse, attn, x_mid, rstd2, gate, up, x_out;
} t5_layer_acts;

/* What forward saved for backward (arena tensors). */
typedef struct t5_acts {
    int batch, seq;
    sdt_dtype act_dtype;
    sdt_tensor rows;
    const t5_override *overrides;
    int n_overrides;
    sdt_tensor bias; /* f32 [1 or B, heads, T, T]: position bias (+ mask), shared by every layer */
    sdt_tensor norm; /* [B, T, d_model]: the RMS norms' outputs, a temporary every layer reuses */
    sdt_tensor prod; /* [B, T, d_ff]: the gated product, likewise */
    sdt_tensor x0;   /* embeddings (after overrides) */
    t5_layer_acts layer[T5_MAX_LAYERS];
    sdt_tensor rstd_f;
    sdt_tensor out; /* [B, T, d_model]: the last hidden state (after the final norm) */
} t5_acts;

/* out [n, d_model] (any float dtype, on the backend's device) = the embedding rows of ids (host array). */
bool t5_encoder_token_rows(const t5_encoder *m, sdt_backend *be, const int32_t *ids, int n, sdt_tensor *out,
                           sdt_error *error);
/* Runs the encoder; acts->out is the result. With a measuring arena nothing is computed and arena->peak
 * afterwards is the memory forward needs (T5-XXL, batch 1, 512 tokens: 2.2 GiB in f32, 1.1 GiB in bf16; the
 * backward adds 4%). Every layer's activations are kept (no recomputation yet). */
bool t5_encoder_forward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_inputs *in, t5_acts *acts,
                        sdt_error *error);
/* From d(out) [B, T, d_model] to the override rows: drows [R, d_model] += gradient (accumulates). Scratch
 * is taken from the arena and given back before returning. */
bool t5_encoder_backward(const t5_encoder *m, sdt_backend *be, sdt_arena *arena, const t5_acts *acts,
                         const sdt_tensor *dout, sdt_tensor *drows, sdt_error *error);

/* The bucket of every (query, key) pair of a T-token sequence: host out[i * T + j] =
 * t5_relative_bucket(j - i) (kernels/shared_math.h). */
void t5_relative_buckets(const t5_config *cfg, int T, int32_t *out);

#endif
