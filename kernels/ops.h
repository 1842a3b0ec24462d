/* ops.h - the one dispatch interface every backend implements.
 *
 * Models call sdt_ops functions through a backend table and never know whether
 * the CPU or the CUDA backend runs them. Every op is a pair of plain functions,
 * forward and backward (llm.c style); backward reads what forward saved.
 *
 * Conventions, shared by all ops and both backends:
 *  - All tensors of one call live on the backend's device.
 *  - Compute is fp32; inputs of any float dtype are read, outputs are rounded
 *    to the output tensor's dtype at storage (so f16 overflows to inf for real).
 *  - Saved statistics (mean, rstd, attention logsumexp) are f32 tensors.
 *  - Backward ACCUMULATES (+=) into every gradient tensor it is given, inputs
 *    and weights alike; the caller zeroes them. A NULL gradient is skipped.
 *    This makes residual branches and gradient accumulation free. The exceptions
 *    say so where they are declared: linear_input_grad, conv2d_input_grad,
 *    attention_backward, attention_bias_backward, geglu_backward and
 *    gated_activation_backward WRITE their gradients.
 *  - Layouts mirror PyTorch: linear weight [OC, C]; conv weight [OC, C, KH, KW];
 *    images NCHW; sequences [B, T, C]; attention q/k/v [B, T, heads*head_dim].
 *  - A 4-D tensor may be channels-last (tensor.h: NHWC memory, the shape still [N, C, H, W]).
 *    The convolutional ops take it (conv2d: x, w and the output each in either layout, a
 *    gradient in its tensor's; groupnorm, add_channel, concat_channels, upsample_nearest2x:
 *    every image operand in one layout), and so do the elementwise ops, whose operands
 *    must share it. Every other op refuses it (kernels/op_checks.c).
 *  - Every function returns 0 on success; nonzero means the backend failed and be->error
 *    holds the error value: its code decided where the failure happened (a bad argument is
 *    SDT_ERR_INVALID_ARGUMENT, a failed allocation of host or device memory, cuBLAS/cuDNN
 *    workspace included, SDT_ERR_OUT_OF_MEMORY, any other CUDA failure SDT_ERR_DEVICE) and the
 *    sentence. Callers pass it on (code as it is, adding context), never pick a status.
 *  - Arguments are checked before a backend runs (kernels/op_checks.c, the same checks and
 *    sentences on both backends); a backend refuses on its own only what it alone cannot do.
 */
#ifndef SDT_KERNELS_OPS_H
#define SDT_KERNELS_OPS_H

#include "sdt_error.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sdt_activation {
    SDT_ACT_IDENTITY = 0,
    SDT_ACT_RELU,
    SDT_ACT_LEAKY_RELU, /* slope 0.01, torch.nn.LeakyReLU default */
    SDT_ACT_ELU,        /* alpha 1 */
    SDT_ACT_GELU,       /* exact erf form, torch.nn.GELU() */
    SDT_ACT_QUICK_GELU, /* x * sigmoid(1.702 x), CLIP's activation */
    SDT_ACT_SILU,       /* x * sigmoid(x), a.k.a. swish */
    SDT_ACT_TANH,
    SDT_ACT_SIGMOID,
    SDT_ACT_MISH, /* x * tanh(softplus(x)) */
    /* the rest of torch.nn's parameter-free elementwise activations, at their defaults
     * (A1111 hypernetworks accept any of them by lower-case class name) */
    SDT_ACT_HARDSWISH,   /* x * relu6(x + 3) / 6; A1111's "swish" */
    SDT_ACT_HARDSIGMOID, /* relu6(x + 3) / 6 */
    SDT_ACT_HARDTANH,    /* clamp(x, -1, 1) */
    SDT_ACT_RELU6,       /* clamp(x, 0, 6) */
    SDT_ACT_SELU,        /* scale * elu(x, alpha), torch's fixed constants */
    SDT_ACT_SOFTPLUS,    /* log(1 + e^x), beta 1, linear above threshold 20 */
    SDT_ACT_SOFTSIGN,    /* x / (1 + |x|) */
    SDT_ACT_TANHSHRINK,  /* x - tanh(x) */
    SDT_ACT_LOGSIGMOID,  /* log(sigmoid(x)) */
    SDT_ACT_HARDSHRINK,  /* x where |x| > 0.5, else 0 */
    SDT_ACT_SOFTSHRINK,  /* x - 0.5 sign(x) where |x| > 0.5, else 0 */
    SDT_ACT_GELU_TANH,   /* GELU's tanh approximation, torch.nn.GELU(approximate="tanh"): T5 v1.1's gelu_new,
                         * the MLPs of SD3 and Flux (not an A1111 hypernetwork activation) */
    SDT_ACT_COUNT
} sdt_activation;

/* The per-element losses besides the squared error (robust_loss_forward/backward). */
typedef enum sdt_robust_loss {
    SDT_ROBUST_LOSS_L1 = 0,    /* |d| */
    SDT_ROBUST_LOSS_HUBER = 1, /* torch.nn.functional.huber_loss(delta) */
    SDT_ROBUST_LOSS_COUNT
} sdt_robust_loss;

typedef struct sdt_backend sdt_backend;

/* What a backend has allocated (its alloc() and its own scratch) and, for a GPU, what the
 * device reports: the numbers behind the peak-memory line at the end of a training run. */
typedef struct sdt_memory_stats {
    bool tracked;                /* false: this backend does not count its allocations */
    size_t allocated_bytes;      /* held now */
    size_t peak_allocated_bytes; /* most held at once since the backend was made or the last reset */
    size_t device_free_bytes;    /* cudaMemGetInfo; 0 on the CPU */
    size_t device_total_bytes;
    size_t scratch_bytes;        /* of allocated_bytes: the kernels' own grow-on-demand scratch */
    size_t conv_workspace_bytes; /* of scratch_bytes: the largest workspace cuDNN's convolutions asked for */
} sdt_memory_stats;

/* The op list: every entry of the table that returns a status, as
 * X(name, (parameters), (arguments)). One list gives the table's fields (below), each
 * backend's prototypes and table fill (kernels/cpu/cpu_ops.h, kernels/cuda/cuda_ops.h)
 * and the benchmarks' per-op timing wrapper, so a signature is written once. */
/* One X-macro list, laid out by hand (clang-format would staircase it). */
// clang-format off
#define SDT_BACKEND_OPS(X) \
    /* ---- memory ---- */ \
    X(upload, (sdt_backend *be, void *dst, const void *host_src, size_t bytes), (be, dst, host_src, bytes)) \
    X(download, (sdt_backend *be, void *host_dst, const void *src, size_t bytes), (be, host_dst, src, bytes)) \
    X(zero, (sdt_backend *be, sdt_tensor *t), (be, t)) \
    X(synchronize, (sdt_backend *be), (be)) \
    /* fills *stats; reset_peak starts a new peak from what is held now */ \
    X(memory_stats, (sdt_backend *be, sdt_memory_stats *stats, bool reset_peak), (be, stats, reset_peak)) \
    /* ---- tensor utilities ---- */ \
    /* dst = src with dtype conversion; same numel. */ \
    X(convert, (sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src), (be, dst, src)) \
    /* dst += alpha * src; same numel. */ \
    X(axpy, (sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src), (be, dst, alpha, src)) \
    /* x *= alpha in place. */ \
    X(scale, (sdt_backend *be, sdt_tensor *x, float alpha), (be, x, alpha)) \
    /* out[b, j, i] = x[b, i, j] for x [B, M, N] (NCHW <-> NLC). Its own backward \
     * is the transpose of dout, accumulated. */ \
    X(transpose_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x), (be, out, x)) \
    X(transpose_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout), (be, dx, dout)) \
    /* Counts non-finite values (for anomaly mode and the NaN fallback). */ \
    X(count_nonfinite, (sdt_backend *be, const sdt_tensor *x, int64_t *count), (be, x, count)) \
    /* ---- embedding: torch.nn.Embedding + learned position embedding ---- */ \
    /* out [B, T, C] = table[tokens[b, t]] + (pos ? pos[t] : 0); tokens i32 [B, T]. */ \
    X(embedding_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table, \
                          const sdt_tensor *pos), (be, out, tokens, table, pos)) \
    X(embedding_backward, (sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout, \
                           const sdt_tensor *tokens), (be, dtable, dpos, dout, tokens)) \
    /* ---- normalisation ---- */ \
    /* torch.nn.LayerNorm over the last dim C of x [N, C]; mean/rstd [N] f32. */ \
    X(layernorm_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, \
                          const sdt_tensor *gamma, const sdt_tensor *beta, float eps), \
      (be, out, mean, rstd, x, gamma, beta, eps)) \
    X(layernorm_backward, (sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, \
                           const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd), \
      (be, dx, dgamma, dbeta, dout, x, gamma, mean, rstd)) \
    /* out = act(torch.nn.GroupNorm(x)) on x [B, C, spatial...]; mean/rstd [B, groups] f32. act is \
     * SDT_ACT_IDENTITY for the plain norm, SDT_ACT_SILU for the UNet's and VAE's GroupNorm + SiLU: one \
     * pass, and the normalised values are never stored (backward recomputes them from x and the stats). */ \
    X(groupnorm_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, \
                          const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act), \
      (be, out, mean, rstd, x, gamma, beta, groups, eps, act)) \
    /* The gradients of act(GroupNorm(x)) for dout, accumulated; beta is read only when act is not identity. */ \
    X(groupnorm_backward, (sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, \
                           const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, const sdt_tensor *mean, \
                           const sdt_tensor *rstd, int groups, sdt_activation act), \
      (be, dx, dgamma, dbeta, dout, x, gamma, beta, mean, rstd, groups, act)) \
    /* T5LayerNorm (RMS norm; SD3.5's and Flux's QK norm too) over the last dim C of x [N, C]: \
     * out = x * rstd * gamma, rstd [N] f32 = 1 / sqrt(mean(x^2) + eps); no mean, no bias; gamma may \
     * be NULL (ones). Backward accumulates dx and dgamma (either may be NULL). */ \
    X(rmsnorm_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *rstd, const sdt_tensor *x, \
                        const sdt_tensor *gamma, float eps), (be, out, rstd, x, gamma, eps)) \
    X(rmsnorm_backward, (sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, const sdt_tensor *dout, \
                         const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *rstd), \
      (be, dx, dgamma, dout, x, gamma, rstd)) \
    /* Rotary position embedding as diffusers' apply_rotary_emb(use_real=True, use_real_unbind_dim=-1) \
     * (Flux): x [..., S, heads*D] in pairs (x[2i], x[2i+1]) per head, cos and sin [S, D] (any float); \
     * out[2i] = x[2i] cos[2i] - x[2i+1] sin[2i], out[2i+1] = x[2i+1] cos[2i+1] + x[2i] sin[2i+1]. \
     * out may alias x. Backward is the transposed rotation, accumulated into dx (dx must not alias dout). */ \
    X(rope_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos, \
                     const sdt_tensor *sin), (be, out, x, cos, sin)) \
    X(rope_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *cos, \
                      const sdt_tensor *sin), (be, dx, dout, cos, sin)) \
    /* ---- matmul-shaped ops ---- */ \
    /* torch.nn.functional.linear: out [..., OC] = x [..., C] w[OC, C]^T + b. b may be NULL. \
     * Backward reads x's values only for dw: without dw, x describes the shape and dtype and its \
     * data may be NULL (a frozen layer's input need not be kept for backward). The same holds \
     * for conv2d_backward. */ \
    X(linear_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b), \
      (be, out, x, w, b)) \
    /* out = x w^T + b + residual: a linear layer whose output joins a residual stream (a transformer's \
     * attention and feed-forward outputs). residual is shaped like out and must not share its memory. \
     * The values of linear_forward then add_forward(out, out, residual), up to rounding: CUDA adds the \
     * bias and the residual in the GEMM's epilogue and rounds once; the CPU runs the two ops. */ \
    X(linear_residual_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, \
                                const sdt_tensor *b, const sdt_tensor *residual), (be, out, x, w, b, residual)) \
    X(linear_backward, (sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, \
                        const sdt_tensor *x, const sdt_tensor *w), (be, dx, dw, db, dout, x, w)) \
    /* A frozen layer's input gradient, written rather than accumulated: dx [..., C] = dout [..., OC] w. \
     * The same values as zeroing dx and calling linear_backward without dw and db, without the \
     * zeroing pass and the read of the zeros. The same holds for conv2d_input_grad. */ \
    X(linear_input_grad, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w), (be, dx, dout, w)) \
    /* torch.nn.functional.conv2d, square stride and padding, dilation 1, groups 1; x, w and out each NCHW \
     * or channels-last (dx in x's layout, dw in w's). */ \
    X(conv2d_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b, \
                       int stride, int pad), (be, out, x, w, b, stride, pad)) \
    X(conv2d_backward, (sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, \
                        const sdt_tensor *x, const sdt_tensor *w, int stride, int pad), \
      (be, dx, dw, db, dout, x, w, stride, pad)) \
    X(conv2d_input_grad, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride, \
                          int pad), (be, dx, dout, w, stride, pad)) \
    /* torch.nn.functional.scaled_dot_product_attention with scale 1/sqrt(head_dim): \
     * q [B, Tq, H*D], k and v [B, Tk, H*D], out [B, Tq, H*D]. causal masks j > i. \
     * Memory stays linear in the sequence length: no backend builds a [Tq, Tk] buffer \
     * (flash-attention style tiles with an online softmax). \
     * lse [B, H, Tq] f32 saves each row's logsumexp of the scaled, masked logits, all \
     * backward needs besides out; when lse is NULL forward saves nothing. */ \
    X(attention_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k, \
                          const sdt_tensor *v, int heads, bool causal), (be, out, lse, q, k, v, heads, causal)) \
    /* out and lse are forward's; with lse NULL backward recomputes both (out may then be NULL). \
     * dq, dk, dv are WRITTEN, not accumulated (each may be NULL: not wanted): the values zeroing them \
     * and accumulating would give, without the zeroing pass and the read; callers need not zero them. */ \
    X(attention_backward, (sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout, \
                           const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out, \
                           const sdt_tensor *lse, int heads, bool causal), \
      (be, dq, dk, dv, dout, q, k, v, out, lse, heads, causal)) \
    /* Attention with an additive logit bias and an explicit scale, never causal: T5's relative \
     * position bias (and its padding mask), softmax(scale q k^T + bias) v per head. q, k, v, out, lse \
     * as attention_forward's; bias f32 [Bb, H, Tq, Tk] with Bb 1 (shared by the batch) or B, may be \
     * NULL; -inf entries mask a key, and a row whose every key is masked gives zeros (lse -inf). T5 \
     * passes scale 1 (its init folds 1/sqrt(d) in). Backward WRITES dq, dk, dv as attention_backward \
     * does; the bias is frozen (no gradient). Memory linear in the sequence length besides the bias. */ \
    X(attention_bias_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, \
                               const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *bias, int heads, float scale), \
      (be, out, lse, q, k, v, bias, heads, scale)) \
    X(attention_bias_backward, (sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout, \
                                const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out, \
                                const sdt_tensor *lse, const sdt_tensor *bias, int heads, float scale), \
      (be, dq, dk, dv, dout, q, k, v, out, lse, bias, heads, scale)) \
    /* Numerically stable softmax over the last dim. Backward reads the forward output. */ \
    X(softmax_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x), (be, out, x)) \
    X(softmax_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out), \
      (be, dx, dout, out)) \
    /* ---- elementwise ---- */ \
    X(activation_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act), (be, out, x, act)) \
    X(activation_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x, \
                            sdt_activation act), (be, dx, dout, x, act)) \
    /* diffusers GEGLU: x [..., 2C] -> value, gate = chunk(2, -1); out [..., C] = value * gelu(gate). */ \
    X(geglu_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x), (be, out, x)) \
    /* Backward WRITES dx (not accumulated): the values zeroing dx and accumulating would give. */ \
    X(geglu_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x), (be, dx, dout, x)) \
    /* A gated feed-forward's product (T5 v1.1's gated GELU: wo(gelu_tanh(wi_0 h) * wi_1 h)): \
     * out = act(gate) * up, all one shape. Backward WRITES dgate and dup (either may be NULL). */ \
    X(gated_activation_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *gate, const sdt_tensor *up, \
                                 sdt_activation act), (be, out, gate, up, act)) \
    X(gated_activation_backward, (sdt_backend *be, sdt_tensor *dgate, sdt_tensor *dup, const sdt_tensor *dout, \
                                  const sdt_tensor *gate, const sdt_tensor *up, sdt_activation act), \
      (be, dgate, dup, dout, gate, up, act)) \
    /* out = a + b (same shape; out may alias a or b). Backward is axpy of dout into each. */ \
    X(add_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b), (be, out, a, b)) \
    /* x [B, C, spatial...] += v [B, C] broadcast over spatial (ResBlock time embedding). \
     * Backward: dv[b, c] += sum over spatial of dout. */ \
    X(add_channel_forward, (sdt_backend *be, sdt_tensor *x, const sdt_tensor *v), (be, x, v)) \
    X(add_channel_backward, (sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout), (be, dv, dout)) \
    /* torch.cat([a, b], dim=1), NCHW or channels-last (all three alike). */ \
    X(concat_channels_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b), \
      (be, out, a, b)) \
    X(concat_channels_backward, (sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout), \
      (be, da, db, dout)) \
    /* torch.nn.functional.interpolate(scale_factor=2, mode="nearest"), NCHW or channels-last (x and out alike). */ \
    X(upsample_nearest2x_forward, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *x), (be, out, x)) \
    X(upsample_nearest2x_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout), (be, dx, dout)) \
    /* Inverted dropout (torch.nn.Dropout in training): mask [same shape] f32 holds \
     * 0 or 1/(1-p), drawn from a counter-based RNG keyed by seed, so it is reproducible. */ \
    X(dropout_forward, (sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed), \
      (be, out, mask, x, p, seed)) \
    X(dropout_backward, (sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask), \
      (be, dx, dout, mask)) \
    /* ---- diffusion-specific ---- */ \
    /* diffusers get_timestep_embedding: t [B] f32 -> out [B, dim]; \
     * half = dim/2, freq_i = exp(-ln(max_period) * i / (half - shift)); emb = [sin, cos] \
     * (or [cos, sin] when flip_sin_to_cos). SD 1.x: flip_sin_to_cos=true, shift=0. */ \
    X(timestep_embedding, (sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos, \
                           float downscale_freq_shift, float max_period), \
      (be, out, t, flip_sin_to_cos, downscale_freq_shift, max_period)) \
    /* loss = mean over all elements of w * (pred - target)^2 (w = 1 when weight is NULL), \
     * written to host *loss as a double. */ \
    X(mse_loss_forward, (sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target, \
                         const sdt_tensor *weight), (be, loss, pred, target, weight)) \
    /* dpred += dloss * d(loss)/d(pred). */ \
    X(mse_loss_backward, (sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, \
                          const sdt_tensor *target, const sdt_tensor *weight), (be, dpred, dloss, pred, target, weight)) \
    /* loss = mean over all elements of w * rho(pred - target) (w = 1 when weight is NULL), rho \
     * (kernels/shared_math.h) L1: |d|; HUBER, F.huber_loss(delta): 0.5 d^2 where |d| < delta, else \
     * delta (|d| - 0.5 delta). Host *loss as a double; L2 is mse_loss_forward. */ \
    X(robust_loss_forward, (sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target, \
                            const sdt_tensor *weight, sdt_robust_loss kind, float delta), \
      (be, loss, pred, target, weight, kind, delta)) \
    /* dpred += dloss * d(loss)/d(pred): rho' is sign(d) (0 at 0) for L1, clamp(d, -delta, delta) for HUBER. */ \
    X(robust_loss_backward, (sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, \
                             const sdt_tensor *target, const sdt_tensor *weight, sdt_robust_loss kind, float delta), \
      (be, dpred, dloss, pred, target, weight, kind, delta)) \
    /* ---- optimisation ---- */ \
    /* *sumsq += sum of squares of every element of each tensor (double accumulation). */ \
    X(sum_squares, (sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count), \
      (be, sumsq, tensors, count)) \
    /* The scaler's fused pass, torch._amp_foreach_non_finite_check_and_unscale_: each \
     * grad *= inv_scale (done even for non-finite values); *found_inf is set true if any \
     * element is not finite BEFORE scaling (as torch, the product is not tested), and \
     * never cleared, so one flag can collect several calls, as torch's found_inf tensor does. */ \
    X(unscale_check, (sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf), \
      (be, grads, count, inv_scale, found_inf)) \
    /* torch.optim.AdamW step (decoupled weight decay, bias correction with step >= 1): \
     * param, m, v f32; grad f32 multiplied by grad_scale first (clipping folded in). */ \
    X(adamw_update, (sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr, \
                     float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale), \
      (be, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, grad_scale))
// clang-format on

/* How many captured graphs a backend keeps at once (capture_end's slots). */
#define SDT_CAPTURE_SLOTS 4

/* One table field of the op list. */
#define SDT_OP_FIELD(name, params, args) int(*name) params;

/* A backend's own implementations of the op list. They trust their arguments: shapes,
 * dtypes, the tensors' device and the scalars are checked before they run
 * (kernels/op_checks.h), once for both backends. */
typedef struct sdt_backend_ops {
    SDT_BACKEND_OPS(SDT_OP_FIELD)
} sdt_backend_ops;

struct sdt_backend {
    const char *name; /* "cpu" or "cuda" */
    sdt_device device;
    bool native_bf16;           /* bf16 math runs at full speed here (CUDA compute capability >= 8.0; the CPU
                         * backend stores bf16 for real and always says true) */
    bool deterministic;         /* [true] every op gives the same bits when run again on the same inputs. The training
                         * job sets it from its `deterministic` option; false lets the CUDA backend take faster
                         * kernels that sum in a varying order (cuDNN's fused attention backward: its dQ). */
    bool prefers_channels_last; /* the UNet keeps its activations channels-last here and its conv filters
                                 * are stored so (CUDA: cuDNN's NHWC kernels are faster). The CPU says
                                 * false; tests set it to run that path on the CPU. */
    bool blas_gemm_only;        /* [false] CPU: every GEMM goes to BLAS, even where the backend's own AVX-512
                                 * kernel would run it. Tests set it (through the plugin's test build) to check
                                 * BLAS's kernels, what a CPU without AVX-512F runs, on a machine that has it. */
    void *ctx;                  /* backend-private state: scratch, handles, stream */
    sdt_error error;            /* the last failure: its code and sentence (read only after a failed call) */

    /* The three entries that return no status; every other entry comes from the op list. */
    void *(*alloc)(sdt_backend *be, size_t bytes); /* NULL on failure, be->error set (OUT_OF_MEMORY) */
    void (*free)(sdt_backend *be, void *ptr);
    void (*destroy)(sdt_backend *be);
    /* Frees the ops' scratch buffers, which grow to the largest call and are kept for the next one:
     * after a phase whose sizes the next does not need (the VAE's encode at full resolution before
     * training). Scratch grows again on demand. */
    void (*release_scratch)(sdt_backend *be);
    /* Captured steps (CUDA graphs, kernels/cuda/step_graph.cu; docs/gpu-notes.md "What a captured step
     * needs"): up to SDT_CAPTURE_SLOTS graphs, one per slot. NULL where the backend has none (the CPU).
     * capture_begin: from here until capture_end the ops called on this backend are recorded, not run; an op
     * that needs the host meanwhile (a read-back, an upload, a synchronisation, a new allocation or a grown
     * scratch buffer, a new cuDNN/cuBLASLt plan) fails with a sentence and spoils the recording. capture_end:
     * *captured true when the recording holds: it becomes slot's graph (replacing the slot's old one); false
     * when it was spoiled: nothing recorded ran, be->error is cleared and the caller runs the same work
     * uncaptured. replay: runs slot's graph once on the backend's stream, on the device addresses and scalars it
     * was recorded with (-1 and be->error when the slot holds none). drop_capture: forgets slot's graph (-1:
     * every slot). The backend also forgets every graph whenever it frees device memory (any buffer, scratch
     * included), so a replay never reads a freed buffer. [the thread that runs the backend's ops] */
    int (*capture_begin)(sdt_backend *be);
    int (*capture_end)(sdt_backend *be, int slot, bool *captured);
    int (*replay)(sdt_backend *be, int slot);
    void (*drop_capture)(sdt_backend *be, int slot);
    /* The op list's entries: each checks its arguments (kernels/op_checks.c), then runs impl's. */
    SDT_BACKEND_OPS(SDT_OP_FIELD)
    sdt_backend_ops impl; /* the backend's implementations the entries call */
};

/* Fills be's op entries from a backend's implementations, each behind its argument checker
 * (kernels/checked_ops.c). Every backend fills its table with this, so no op runs unchecked. */
void sdt_backend_set_ops(sdt_backend *be, const sdt_backend_ops *impl);

/* Creates the CPU backend (always available). threads <= 0 means OpenMP's default. */
sdt_backend *sdt_backend_cpu_create(int threads);

#ifdef __cplusplus
}
#endif

#endif
