/* reduce.cuh - the deterministic two-pass double sums of the loss and the gradient norm
 * (internal to kernels/cuda): RED_BLOCKS partial sums in a fixed order, then one final sum. */
#ifndef SDT_KERNELS_CUDA_REDUCE_CUH
#define SDT_KERNELS_CUDA_REDUCE_CUH

#include "cuda_ops.h"

#define RED_BLOCKS 256
#define RED_THREADS 256

/* Block-level double sum into partial[blockIdx.x]. */
static __device__ void block_sum_store(double v, double *partial)
{
    __shared__ double s[RED_THREADS];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

/* Sums partial[0..RED_BLOCKS) into *out on the host (one final kernel, then a download). */
int cuda_finish_sum(sdt_backend *be, double *partial, double *out);

#endif
