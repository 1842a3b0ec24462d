/* norm_stats.cuh - block and warp reductions shared by the normalisations and softmax
 * (internal to kernels/cuda; each including file gets its own copy). */
#ifndef SDT_KERNELS_CUDA_NORM_STATS_CUH
#define SDT_KERNELS_CUDA_NORM_STATS_CUH

#include "cuda_ops.h"

#define NT 256 /* threads per block of every normalisation kernel */

/* Sum over the block; every thread gets the result. */
static __device__ float block_sum(float v)
{
    __shared__ float s[NT];
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    return s[0];
}
static __device__ float block_max(float v)
{
    __shared__ float s[NT];
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + w]);
        __syncthreads();
    }
    return s[0];
}

/* Sum over the warp; every lane gets the result. */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* An optional tensor's data and dtype (NULL and 0 when absent). */
static inline const void *dat(const sdt_tensor *t) { return t ? t->data : NULL; }
static inline int dty(const sdt_tensor *t) { return t ? t->dtype : 0; }

#endif
