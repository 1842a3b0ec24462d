/* norm_stats.cuh - block and warp reductions shared by the normalisations and softmax
 * (internal to kernels/cuda; each including file gets its own copy). */
#ifndef SDT_KERNELS_CUDA_NORM_STATS_CUH
#define SDT_KERNELS_CUDA_NORM_STATS_CUH

#include "cuda_ops.h"
#include "shared_math.h"

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

/* Count, mean and sum of squared deviations (M2) of a set of values: Welford/Chan statistics,
 * accurate in one pass where sum and sum of squares would cancel. */
struct mstat {
    float n, mean, m2;
};
/* Chan's combination of two disjoint sets (an empty one leaves the other as it is). Not
 * symmetric in its bits, so every caller combines in an order the shapes alone fix. */
static __device__ __forceinline__ mstat mstat_combine(mstat a, mstat b)
{
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    float n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
    return mstat{n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}
/* The statistics of V values (two passes over registers). */
template <int V> static __device__ __forceinline__ mstat mstat_of(const float (&f)[V])
{
    float s = 0, q = 0;
#pragma unroll
    for (int k = 0; k < V; k++) s += f[k];
    float mu = s / (float)V;
#pragma unroll
    for (int k = 0; k < V; k++) q += (f[k] - mu) * (f[k] - mu);
    return mstat{(float)V, mu, q};
}
/* The warp's combination in a fixed tree (lane l takes lane l + o); every lane gets lane 0's. */
static __device__ __forceinline__ mstat warp_mstat(mstat m)
{
    for (int o = 16; o > 0; o >>= 1) {
        mstat t{__shfl_down_sync(0xffffffffu, m.n, o), __shfl_down_sync(0xffffffffu, m.mean, o),
                __shfl_down_sync(0xffffffffu, m.m2, o)};
        m = mstat_combine(m, t);
    }
    return mstat{__shfl_sync(0xffffffffu, m.n, 0), __shfl_sync(0xffffffffu, m.mean, 0),
                 __shfl_sync(0xffffffffu, m.m2, 0)};
}
/* Sums in a fixed tree; every lane gets lane 0's. */
static __device__ __forceinline__ float2 warp_sum2(float2 v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_down_sync(0xffffffffu, v.x, o);
        v.y += __shfl_down_sync(0xffffffffu, v.y, o);
    }
    return make_float2(__shfl_sync(0xffffffffu, v.x, 0), __shfl_sync(0xffffffffu, v.y, 0));
}
/* The block's combination (blockDim.x a multiple of 32, at most NT), warps in order; thread 0
 * gets it. Once per kernel (one shared array per function). */
static __device__ mstat block_mstat(mstat m)
{
    __shared__ mstat w[NT / 32];
    m = warp_mstat(m);
    if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 1; i < (int)blockDim.x / 32; i++) m = mstat_combine(m, w[i]);
    return m;
}
static __device__ float2 block_sum2(float2 v)
{
    __shared__ float2 w[NT / 32];
    v = warp_sum2(v);
    if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 1; i < (int)blockDim.x / 32; i++) v = make_float2(v.x + w[i].x, v.y + w[i].y);
    return v;
}

/* ---- GroupNorm's pieces shared by its NCHW and channels-last kernels (groupnorm*.cu) ---- */
#define GN_SCRATCH_SLOT 7 /* groupnorm's per-chunk statistics */

/* The gradient at the norm's output: dy through the activation at the normalised value n. */
static __device__ __forceinline__ float gn_out_grad(sdt_activation act, float dy, float n)
{
    return act == SDT_ACT_IDENTITY ? dy : dy * act_derivative(act, n);
}

/* An optional tensor's data and dtype (NULL and 0 when absent). */
static inline const void *dat(const sdt_tensor *t)
{
    return t ? t->data : NULL;
}
static inline int dty(const sdt_tensor *t)
{
    return t ? t->dtype : 0;
}

#endif
