/* dit_blocks.h - the pieces the diffusion transformers share (SD3's MMDiT, Flux): adaLN modulation, the
 * joint-attention block's two streams, and their backwards to the conditioning with the weights frozen.
 *
 * A stream (image or text) of a joint block: adaLN-Zero modulation (Linear(SiLU(temb)) -> 6H chunks shift,
 * scale, gate for the attention, then for the MLP), LayerNorm without affine (eps 1e-6) modulated
 * LN(x)(1 + scale) + shift, q/k/v with an optional per-head RMS norm, written into the joint Q/K/V at the
 * stream's token offset; after the joint attention its output projection, gated residual, modulated LN,
 * GELU-tanh MLP, gated residual. SD3's context_pre_only text stream (2 chunks, no output) and SD3.5 Medium's
 * MMDiT-X attn2 (9 chunks) are variants. Per-batch vectors reach every token through the existing ops: the
 * modulated LayerNorm is layernorm_forward per batch element with gamma = 1 + scale and beta = shift, a gate is
 * broadcast by a linear layer of a ones column and multiplied by gated_activation (identity).
 */
#ifndef SDT_MODELS_DIT_BLOCKS_H
#define SDT_MODELS_DIT_BLOCKS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "ops.h"
#include "param_list.h"

#define DIT_LN_EPS 1e-6f /* every LayerNorm and RMS norm of SD3 and Flux */

/* A Linear's parameters for a parameter list: "<prefix><name>.weight" [out, in], normal with std 1/sqrt(in),
 * and "<prefix><name>.bias" [out], zeros (name formatted from fmt). Returns the visitor's answer. */
bool dit_emit_linear(sdt_param_visitor v, void *u, int64_t out, int64_t in, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* What the block code reads of a model's config. */
typedef struct dit_dims {
    int heads, head_dim; /* hidden H = heads * head_dim */
    bool qk_norm;        /* per-head RMS norm on q and k */
    int mlp_ratio;
} dit_dims;

/* What every block reads of a forward's state. */
typedef struct dit_env {
    int batch;
    sdt_tensor silu_temb; /* [B, H]: every modulation's input */
    sdt_tensor ones;      /* [M, 1] in the activation dtype (exact), M >= any token count: broadcasts a per-batch
                           * vector over tokens */
} dit_env;

/* The joint Q, K, V, O [B, S, H] and the attention's logsumexp, in a block's joint[] array. */
enum { JQ, JK, JV, JO, JLSE };

typedef struct dit_linear {
    sdt_tensor w, b;
} dit_linear;

typedef struct dit_stream_weights {
    dit_linear mod;              /* norm1.linear / norm1_context.linear */
    dit_linear q, k, v, out;     /* out absent (data NULL) in a context_pre_only stream */
    sdt_tensor norm_q, norm_k;   /* [head_dim] when qk_norm */
    dit_linear ff1, ff2;         /* absent in a context_pre_only stream */
    bool dual;                   /* MMDiT-X image stream: norm1.linear has 9 chunks and attn2 runs */
    dit_linear q2, k2, v2, out2; /* attn2.{to_q, to_k, to_v, to_out.0} */
    sdt_tensor norm_q2, norm_k2; /* attn2.norm_{q,k}.weight when qk_norm */
} dit_stream_weights;

typedef struct dit_stream_acts {
    sdt_tensor mod;                        /* [B, k*H] modulation chunks */
    sdt_tensor gamma1, gamma2;             /* [B, H]: 1 + scale */
    sdt_tensor mean1, rstd1, mean2, rstd2; /* [B*N] */
    sdt_tensor q, k, v;                    /* raw projections [B, N, H] */
    sdt_tensor rstd_q, rstd_k;             /* [B*N*heads] */
    sdt_tensor y_attn, x_mid, h1, y_ff, x_out;
    /* MMDiT-X (dual) image streams: attn2 on LN(x)(1 + scale2) + shift2, added after the joint residual */
    sdt_tensor gamma3, mean3, rstd3, q2, k2, v2, rstd_q2, rstd_k2, Q2, K2, O2, lse2, y_attn2, x_mid1;
} dit_stream_acts;

typedef struct dit_fwd_tmp {
    sdt_tensor n_img, n_ctx, a_img, a_ctx, tmp, ones_h;
} dit_fwd_tmp;

typedef struct dit_bwd_scratch {
    sdt_tensor dX[2];     /* residual-stream gradients: image [B, N, H], text [B, T, H] */
    sdt_tensor dmod_flat; /* [B * kH], k the most chunks a block has (SD3 6, MMDiT-X 9) */
    sdt_tensor dgam;      /* [1, H] */
    sdt_tensor dy[2], da[2], dh[2], dn[2], dq[2], dk[2], dv[2];
    sdt_tensor dJ[4];                /* dQ, dK, dV, dO [B, S, H] */
    sdt_tensor tmp, tmp2;            /* [M, H] */
    sdt_tensor dst, dtemb, dpa, dph; /* [B, H] */
    sdt_tensor dtok;                 /* [B, N, p*p*C] */
    sdt_tensor d2[5];                /* MMDiT-X: d(y_attn2), dQ2, dK2, dV2, dO2 [B, N, H] */
} dit_bwd_scratch;

/* Row r of a [rows, n] tensor as a 1-D [n] vector. */
sdt_tensor dit_vec_row(const sdt_tensor *t2, int64_t r);

/* Chunk j of batch b of a modulation [B, k*H] (k chunks): a [H] vector. */
sdt_tensor dit_chunk(const sdt_tensor *mod, int64_t H, int b, int j);

/* Tokens of batch b of a [B, n, C] tensor: [n, C]. */
sdt_tensor dit_batch_rows(const sdt_tensor *t, int b);

/* Tokens [off, off + n) of batch b of a joint [B, S, C] tensor: [n, C]. */
sdt_tensor dit_joint_rows(const sdt_tensor *t, int b, int64_t off, int64_t n);

/* gamma[b] = 1 + dit_chunk(mod, scale_j)[b] for every b. */
bool dit_make_gamma(sdt_backend *be, sdt_tensor *gamma, const sdt_tensor *mod, int64_t H, int j,
                    const sdt_tensor *ones_h, sdt_error *error);

/* out = LN(x) * gamma[b] + shift[b] per batch element (LayerNorm without affine, then the modulation). */
bool dit_modulated_ln(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                      const sdt_tensor *gamma, const sdt_tensor *mod, int shift_j, sdt_error *error);

/* Backward of modulated_ln: dx += ..., d(scale chunk) and d(shift chunk) of dmod +=. dgam [1, H] scratch. */
bool dit_modulated_ln_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dmod, sdt_tensor *dgam,
                               const sdt_tensor *dn, const sdt_tensor *x, const sdt_tensor *gamma,
                               const sdt_tensor *mean, const sdt_tensor *rstd, int scale_j, int shift_j,
                               sdt_error *error);

/* The gate of batch b broadcast over n tokens: bc [n, H] = ones [n, 1] gate^T. */
bool dit_broadcast_gate(sdt_backend *be, sdt_tensor *bc, const sdt_tensor *ones, const sdt_tensor *gate,
                        sdt_error *error);

/* out = x + gate[b] * y per batch element; tmp [>= n, H] scratch. */
bool dit_gated_residual(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *y,
                        const sdt_tensor *mod, int gate_j, const sdt_tensor *ones, sdt_tensor *tmp, sdt_error *error);

/* Backward of gated_residual for d(out) = dx (which passes to x unchanged): dy written, d gate into dmod. */
bool dit_gated_residual_backward(sdt_backend *be, sdt_tensor *dy, sdt_tensor *dmod, const sdt_tensor *dx,
                                 const sdt_tensor *y, const sdt_tensor *mod, int gate_j, const sdt_tensor *ones,
                                 sdt_tensor *tmp, sdt_tensor *tmp2, sdt_error *error);

/* A stream's activations of n tokens from the arena (pre_only: SD3's last text stream, dual: MMDiT-X), in the
 * activation dtype dt but the f32 statistics (norms' mean and rstd, the attention's logsumexp). */
void dit_stream_alloc(dit_stream_acts *s, const dit_dims *c, sdt_arena *ar, int64_t B, int64_t n, bool pre_only,
                      bool dual, sdt_dtype dt);

/* Gradient checkpointing's work set: the block's activations over the memory of one set allocated for the
 * largest block (dual for MMDiT-X, 6 or 9 modulation chunks), its modulation viewed as [B, chunks * H]. */
dit_stream_acts dit_stream_work(const dit_stream_acts *work, int chunks, int64_t H);

/* The head-split view [tokens * heads, head_dim] of a [..., H] tensor. */
sdt_tensor dit_heads_view(const sdt_tensor *t, int head_dim);

/* q, k, v of one stream into the joint tensors at token offset off (per-head RMS norm on q and k). */
bool dit_stream_qkv_forward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, dit_stream_acts *s,
                            sdt_tensor *joint, int64_t off, sdt_error *error);

/* The part before the joint attention: modulation, modulated LN, q/k/v. */
bool dit_stream_pre(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                    dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, const sdt_tensor *ones_h,
                    sdt_tensor *joint, int64_t off, bool pre_only, sdt_error *error);

/* MMDiT-X: x_mid = x_mid1 + gate2 * attn2(LN(x_in)(1 + scale2) + shift2), self-attention over the image. */
bool dit_attn2_forward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                       dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, dit_fwd_tmp *t, sdt_error *error);

/* The part after it: output projection, gated residual, modulated LN, MLP, gated residual. */
bool dit_stream_post(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                     dit_stream_acts *s, const sdt_tensor *x_in, sdt_tensor *nbuf, sdt_tensor *abuf, dit_fwd_tmp *t,
                     const sdt_tensor *joint, int64_t off, sdt_error *error);

/* Host f32 into t, rounded to t's dtype. */
bool dit_upload_f32(sdt_backend *be, sdt_tensor *t, const float *host, sdt_error *error);

/* The two streams' backward scratch (image N tokens, text T) and the joint dQ, dK, dV, dO over S = N + T: the
 * residual-stream gradients in f32 (they sum every branch), the branches' in dt. From the arena, in this order. */
void dit_bwd_scratch_streams(dit_bwd_scratch *s, sdt_arena *arena, sdt_dtype dt, int64_t B, int64_t N, int64_t T,
                             int64_t H, int64_t F);

/* The first B * k * H values of s->dmod_flat as a [B, kH] modulation gradient. */
sdt_tensor dit_dmod_view(const dit_bwd_scratch *s, int64_t B, int k, int64_t H);

/* MMDiT-X, backward: d(y_attn2) in d2[0] to d(x_in) (dX +=) and the attn2 modulation chunks. */
bool dit_attn2_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_stream_acts *s,
                        const sdt_tensor *x_in, dit_bwd_scratch *S, sdt_tensor *dmod, sdt_error *error);

/* Steps after the attention, backward: from d(x_out) in dX to d(x_mid) in dX, then d(attention output) into
 * the joint dO (and, in an MMDiT-X block, attn2's whole backward, whose input gradient joins dX). */
bool dit_stream_post_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                              const dit_stream_acts *s, const sdt_tensor *x_in, dit_bwd_scratch *S, int st,
                              sdt_tensor *dmod, int64_t off, sdt_error *error);

/* Steps before the attention, backward: joint dQ/dK/dV to the stream's input gradient (dX +=) and the
 * modulation's, on into d(silu(temb)). */
bool dit_stream_pre_backward(const dit_stream_weights *W, const dit_dims *c, sdt_backend *be, const dit_env *a,
                             const dit_stream_acts *s, const sdt_tensor *x_in, dit_bwd_scratch *S, int st,
                             bool pre_only, int64_t off, sdt_error *error);

#endif
