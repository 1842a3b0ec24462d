/* cpu_ops.h - the CPU backend's op implementations (internal to kernels/cpu).
 *
 * One function per sdt_backend field, named cpu_<field>, with the field's exact
 * signature; backend_cpu.c puts them in the table. Semantics are documented once,
 * in ops.h. Helpers for dtype handling are at the bottom.
 */
#ifndef SDT_KERNELS_CPU_OPS_H
#define SDT_KERNELS_CPU_OPS_H

#include "../ops.h"

void *cpu_alloc(sdt_backend *be, size_t bytes);
void cpu_free(sdt_backend *be, void *ptr);
int cpu_upload(sdt_backend *be, void *dst, const void *host_src, size_t bytes);
int cpu_download(sdt_backend *be, void *host_dst, const void *src, size_t bytes);
int cpu_zero(sdt_backend *be, sdt_tensor *t);
int cpu_synchronize(sdt_backend *be);
void cpu_destroy(sdt_backend *be);
int cpu_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src);
int cpu_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src);
int cpu_scale(sdt_backend *be, sdt_tensor *x, float alpha);
int cpu_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cpu_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout);
int cpu_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count);
int cpu_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table, const sdt_tensor *pos);
int cpu_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout, const sdt_tensor *tokens);
int cpu_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, float eps);
int cpu_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd);
int cpu_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps);
int cpu_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd, int groups);
int cpu_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b);
int cpu_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w);
int cpu_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b, int stride, int pad);
int cpu_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w, int stride, int pad);
int cpu_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal);
int cpu_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse, int heads, bool causal);
int cpu_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cpu_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out);
int cpu_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act);
int cpu_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x, sdt_activation act);
int cpu_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cpu_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x);
int cpu_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b);
int cpu_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v);
int cpu_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout);
int cpu_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b);
int cpu_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout);
int cpu_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cpu_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout);
int cpu_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed);
int cpu_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask);
int cpu_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos, float downscale_freq_shift, float max_period);
int cpu_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight);
int cpu_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight);
int cpu_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count);
int cpu_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf);
int cpu_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale);

/* ---- dtype handling shared by every CPU op ----
 * Ops compute on float arrays. A tensor stored as f16/bf16 is converted into a
 * per-backend scratch slot on read and rounded back on write, so the ops
 * themselves only ever see float. Slots are independent growable buffers;
 * an op uses distinct slots for tensors it needs at the same time. */
#define SDT_CPU_SCRATCH_SLOTS 12
/* A float view of t: t's own data when f32, else a converted copy in scratch[slot]. NULL if t is NULL. */
const float *cpu_read_f32(sdt_backend *be, const sdt_tensor *t, int slot);
/* A float buffer for writing t: t's data when f32, else scratch[slot] (filled with t's
 * current values when load_existing, for accumulating backward ops). NULL if t is NULL. */
float *cpu_write_begin(sdt_backend *be, sdt_tensor *t, int slot, bool load_existing);
/* Rounds buf into t when t is not f32 (no-op for f32 or NULL). */
void cpu_write_end(sdt_backend *be, sdt_tensor *t, float *buf);
/* Sets be->error to a formatted sentence and returns -1. */
int cpu_fail(sdt_backend *be, const char *fmt, ...);

#endif
