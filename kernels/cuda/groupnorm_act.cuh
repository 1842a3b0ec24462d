/* groupnorm_act.cuh - GroupNorm's activation (kernels/ops.h: act(GroupNorm(x))) and its gradient, shared by
 * the NCHW and channels-last kernels (groupnorm.cu, groupnorm_nhwc.cu; internal to kernels/cuda).
 * SiLU, the UNets' and the VAE's, takes one exp and one fast reciprocal a value, and its derivative comes
 * from the same sigmoid: s (1 + n (1 - s)) with s = sigmoid(n), where act_derivative (shared_math.h)
 * computes sigmoid(n) and sigmoid(-n), two exps and two IEEE divisions; the backward does it twice a value
 * (its two passes recompute n), which bound the NHWC backward by arithmetic (bench/NOTES.md run 32).
 * The kinds: GN_ACT_ID and GN_ACT_SILU known at compile time (the channels-last kernels are instantiated
 * per kind), GN_ACT_ANY decides at run time (SiLU's fast form there too, any other activation through
 * act_value / act_derivative). */
#ifndef SDT_KERNELS_CUDA_GROUPNORM_ACT_CUH
#define SDT_KERNELS_CUDA_GROUPNORM_ACT_CUH

#include "norm_stats.cuh"
#include "shared_math.h"

enum { GN_ACT_ID, GN_ACT_SILU, GN_ACT_ANY };

static __device__ __forceinline__ float gn_sigmoid(float n)
{
    /* expf overflows to inf for n < -88: the fast reciprocal then gives 0, the limit */
    return __fdividef(1.0f, 1.0f + expf(-n));
}
static __device__ __forceinline__ float gn_silu_grad(float dy, float n)
{
    float s = gn_sigmoid(n);
    return dy * (s * (1.0f + n * (1.0f - s))); /* sigmoid(-n) = 1 - s: one exp, not two */
}

/* act(n) */
template <int A> static __device__ __forceinline__ float gn_act(sdt_activation act, float n)
{
    if constexpr (A == GN_ACT_ID)
        return n;
    else if constexpr (A == GN_ACT_SILU)
        return n * gn_sigmoid(n);
    else
        return act == SDT_ACT_IDENTITY ? n : act == SDT_ACT_SILU ? n * gn_sigmoid(n) : act_value(act, n);
}
/* The gradient at the norm's output n for dy at the activation's output. */
template <int A> static __device__ __forceinline__ float gn_grad(sdt_activation act, float dy, float n)
{
    if constexpr (A == GN_ACT_ID)
        return dy;
    else if constexpr (A == GN_ACT_SILU)
        return gn_silu_grad(dy, n);
    else
        return act == SDT_ACT_SILU ? gn_silu_grad(dy, n) : gn_out_grad(act, dy, n);
}

/* Runs the body with constexpr int A the kind of act. */
#define GN_ACT_SWITCH(act, A, ...)                                                                                     \
    do {                                                                                                               \
        if ((act) == SDT_ACT_IDENTITY) {                                                                               \
            constexpr int A = GN_ACT_ID;                                                                               \
            __VA_ARGS__;                                                                                               \
        } else if ((act) == SDT_ACT_SILU) {                                                                            \
            constexpr int A = GN_ACT_SILU;                                                                             \
            __VA_ARGS__;                                                                                               \
        } else {                                                                                                       \
            constexpr int A = GN_ACT_ANY;                                                                              \
            __VA_ARGS__;                                                                                               \
        }                                                                                                              \
    } while (0)

#endif
