/* sum_squares.cu - the sum of squares of many tensors (the gradient norm) on the GPU.
 * Semantics: kernels/ops.h.
 *
 * A hypernetwork's gradients are dozens of small tensors: one launch takes up to SUMSQ_BATCH of
 * them (by value), every block's threads walk each tensor in turn and the block adds its sum to
 * its partial; one final sum and one download for the whole call, not one per tensor. Each
 * thread's, block's and the final order are fixed, so the result is deterministic. */
#include "reduce.cuh"

#define SUMSQ_BATCH 32

struct sumsq_batch {
    const void *data[SUMSQ_BATCH];
    int64_t n[SUMSQ_BATCH];
    int dtype[SUMSQ_BATCH];
    int count;
};

/* partial[block] = (first ? 0 : partial[block]) + this block's sum over the batch. */
__global__ void sumsq_partial_k(sumsq_batch batch, double *partial, int first)
{
    double s = 0;
    for (int k = 0; k < batch.count; k++) {
        const void *x = batch.data[k];
        int dt = batch.dtype[k];
        GRID_STRIDE(i, batch.n[k])
        {
            double v = ld(x, dt, i);
            s += v * v;
        }
    }
    __shared__ double sh[RED_THREADS];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = (first ? 0.0 : partial[blockIdx.x]) + sh[0];
}

int cuda_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    sumsq_batch batch;
    batch.count = 0;
    bool first = true;
    for (int k = 0; k <= count; k++) {
        bool last = k == count;
        if (!last && tensors[k] && sdt_tensor_numel(tensors[k]) > 0) {
            batch.data[batch.count] = tensors[k]->data;
            batch.n[batch.count] = sdt_tensor_numel(tensors[k]);
            batch.dtype[batch.count] = tensors[k]->dtype;
            batch.count++;
        }
        if (batch.count == SUMSQ_BATCH || (last && batch.count > 0)) {
            sumsq_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(batch, partial, first ? 1 : 0);
            CUDA_LAUNCHED(be);
            first = false;
            batch.count = 0;
        }
    }
    if (first) return 0; /* nothing to add */
    double s;
    if (cuda_finish_sum(be, partial, &s)) return -1;
    *sumsq += s;
    return 0;
}
