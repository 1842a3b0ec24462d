/* cuda_ops.h - the CUDA backend's op implementations (internal to kernels/cuda).
 * One function per sdt_backend field, named cuda_<field>, with the field's exact
 * signature; backend_cuda.cu puts them in the table. Semantics live in ops.h. */
#ifndef SDT_KERNELS_CUDA_OPS_H
#define SDT_KERNELS_CUDA_OPS_H

#include "cuda_common.cuh"

void *cuda_alloc(sdt_backend *be, size_t bytes);
void cuda_free(sdt_backend *be, void *ptr);
int cuda_upload(sdt_backend *be, void *dst, const void *host_src, size_t bytes);
int cuda_download(sdt_backend *be, void *host_dst, const void *src, size_t bytes);
int cuda_zero(sdt_backend *be, sdt_tensor *t);
int cuda_synchronize(sdt_backend *be);
void cuda_destroy(sdt_backend *be);
int cuda_convert(sdt_backend *be, sdt_tensor *dst, const sdt_tensor *src);
int cuda_axpy(sdt_backend *be, sdt_tensor *dst, float alpha, const sdt_tensor *src);
int cuda_scale(sdt_backend *be, sdt_tensor *x, float alpha);
int cuda_transpose_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cuda_transpose_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout);
int cuda_count_nonfinite(sdt_backend *be, const sdt_tensor *x, int64_t *count);
int cuda_embedding_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *tokens, const sdt_tensor *table, const sdt_tensor *pos);
int cuda_embedding_backward(sdt_backend *be, sdt_tensor *dtable, sdt_tensor *dpos, const sdt_tensor *dout, const sdt_tensor *tokens);
int cuda_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, float eps);
int cuda_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd);
int cuda_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps);
int cuda_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd, int groups);
int cuda_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b);
int cuda_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w);
int cuda_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b, int stride, int pad);
int cuda_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w, int stride, int pad);
/* At create: whether attention's tensor-core kernels have sm_80+ code on this card. */
bool cuda_attention_tc_available(int device_major);
int cuda_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, int heads, bool causal);
int cuda_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse, int heads, bool causal);
int cuda_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cuda_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out);
int cuda_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act);
int cuda_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x, sdt_activation act);
int cuda_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cuda_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x);
int cuda_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b);
int cuda_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v);
int cuda_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout);
int cuda_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b);
int cuda_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout);
int cuda_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x);
int cuda_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout);
int cuda_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed);
int cuda_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask);
int cuda_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos, float downscale_freq_shift, float max_period);
int cuda_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight);
int cuda_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, const sdt_tensor *target, const sdt_tensor *weight);
int cuda_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count);
int cuda_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf);
int cuda_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale);

/* Row softmax helpers shared with attention (norm.cu): scale multiplies x first;
 * causal_T > 0 masks columns past (row % causal_T); out2 (may be NULL) gets a second copy. */
int cuda_softmax_rows(sdt_backend *be, void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t rows, int64_t C,
                      int64_t causal_T, float scale);
int cuda_softmax_rows_backward(sdt_backend *be, void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt, int64_t rows,
                               int64_t C, float scale, bool accumulate);

#endif
