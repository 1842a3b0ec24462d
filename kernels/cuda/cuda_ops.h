/* cuda_ops.h - the CUDA backend's op implementations (internal to kernels/cuda).
 * One function per sdt_backend field, named cuda_<field>, with the field's exact
 * signature, declared from the one op list (ops.h); backend_cuda.cu puts them in the table. Semantics live in ops.h. */
#ifndef SDT_KERNELS_CUDA_OPS_H
#define SDT_KERNELS_CUDA_OPS_H

#include "cuda_common.cuh"

void *cuda_alloc(sdt_backend *be, size_t bytes);
void cuda_free(sdt_backend *be, void *ptr);
void cuda_destroy(sdt_backend *be);
void cuda_release_scratch(sdt_backend *be);
#define SDT_CUDA_OP_PROTOTYPE(name, params, args) int cuda_##name params;
SDT_BACKEND_OPS(SDT_CUDA_OP_PROTOTYPE)
#undef SDT_CUDA_OP_PROTOTYPE

/* attention_cudnn.cu: attention through cuDNN's fused attention where it has a plan for the case: 0 done,
 * -1 failed (be->error), 1 not taken (attention.cu's kernels run it). Same arguments as the ops. */
int cuda_sdpa_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k,
                      const sdt_tensor *v, int heads, bool causal);
int cuda_sdpa_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                       const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out,
                       const sdt_tensor *lse, int heads, bool causal);

/* At create: whether attention's tensor-core kernels have sm_80+ code on this card. */
bool cuda_attention_tc_available(int device_major);

/* Row softmax helpers shared with attention (softmax.cu): scale multiplies x first;
 * causal_T > 0 masks columns past (row % causal_T); out2 (may be NULL) gets a second copy. */
int cuda_softmax_rows(sdt_backend *be, void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t rows,
                      int64_t C, int64_t causal_T, float scale);
int cuda_softmax_rows_backward(sdt_backend *be, void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt,
                               int64_t rows, int64_t C, float scale, bool accumulate);

/* GroupNorm on channels-last x (groupnorm_nhwc.cu); cuda_groupnorm_forward/backward hand such x here. */
int cuda_groupnorm_nhwc_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd,
                                const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups,
                                float eps, sdt_activation act);
int cuda_groupnorm_nhwc_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                 const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                 const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                                 sdt_activation act);

#endif
