/* cudnn_plan.cuh - what the ops built on cuDNN's graph (backend) API share: descriptors made
 * while building a graph and destroyed together, tensor descriptors with explicit strides, the
 * choice of an execution plan (heuristics' order, deterministic engines only) and its execution.
 * Internal to kernels/cuda (conv2d.cu, attention_cudnn.cu). */
#ifndef SDT_KERNELS_CUDA_CUDNN_PLAN_CUH
#define SDT_KERNELS_CUDA_CUDNN_PLAN_CUH

#include "cuda_common.cuh"

typedef cudnnBackendDescriptor_t dnn_desc;

/* Descriptors of one graph under construction; a finalized execution plan outlives them. */
#define DNN_POOL_MAX 96
typedef struct dnn_pool {
    dnn_desc d[DNN_POOL_MAX];
    int n;
    int64_t next_virtual; /* virtual tensors' ids count up from 1000 (zero-initialise the pool) */
} dnn_pool;

cudnnStatus_t dnn_pool_new(dnn_pool *p, cudnnBackendDescriptorType_t type, dnn_desc *out);
void dnn_pool_free(dnn_pool *p);

/* A finalized tensor descriptor of ndim dims and strides (elements). uid 0 takes the pool's next
 * virtual id; is_virtual: an intermediate no pointer names; by_value: a host scalar. */
cudnnStatus_t dnn_tensor(dnn_pool *p, dnn_desc *out, int64_t uid, cudnnDataType_t dt, int ndim, const int64_t *dims,
                         const int64_t *strides, int64_t align, bool is_virtual, bool by_value);

/* The first plan for graph (heuristics mode A's order, then the fallback list) whose engine is
 * deterministic (a replayed step gives the same bits) and accumulates in fp32, with exact fp32 math
 * too when exact_f32 (no tensor cores: parity with the CPU reference), that finalizes and whose
 * workspace is at most cap bytes. */
cudnnStatus_t dnn_choose_plan(cudnnHandle_t h, dnn_desc graph, bool exact_f32, size_t cap, dnn_desc *plan,
                              size_t *workspace);

/* Builds the operation graph of n ops and chooses its plan (above). */
cudnnStatus_t dnn_plan_for_ops(dnn_pool *p, cudnnHandle_t h, dnn_desc *ops, int n, bool exact_f32, size_t cap,
                               dnn_desc *plan, size_t *workspace);

/* Runs plan with n tensors named by uid (a by-value scalar's pointer is to its host value). */
cudnnStatus_t dnn_execute(cudnnHandle_t h, dnn_desc plan, int n, const int64_t *uids, void *const *ptrs,
                          void *workspace);

#endif
