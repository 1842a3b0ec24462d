/* activation_math.cuh - each activation's value and derivative in fp32, for the activation
 * op and GEGLU (internal to kernels/cuda; mirrors kernels/cpu/activation_math.h). */
#ifndef SDT_KERNELS_CUDA_ACTIVATION_MATH_CUH
#define SDT_KERNELS_CUDA_ACTIVATION_MATH_CUH

#include "cuda_ops.h"

static __device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* value and derivative of each activation, fp32 */
static __device__ float act_f(int act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0 ? x : 0;
    case SDT_ACT_LEAKY_RELU: return x > 0 ? x : 0.01f * x;
    case SDT_ACT_ELU: return x > 0 ? x : expm1f(x);
    case SDT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case SDT_ACT_QUICK_GELU: return x * sigmoidf_(1.702f * x);
    case SDT_ACT_SILU: return x * sigmoidf_(x);
    case SDT_ACT_TANH: return tanhf(x);
    case SDT_ACT_SIGMOID: return sigmoidf_(x);
    case SDT_ACT_MISH: return x * tanhf(log1pf(expf(x)));
    case SDT_ACT_HARDSWISH: return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
    case SDT_ACT_HARDSIGMOID: return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f;
    case SDT_ACT_HARDTANH: return fminf(fmaxf(x, -1.0f), 1.0f);
    case SDT_ACT_RELU6: return fminf(fmaxf(x, 0.0f), 6.0f);
    case SDT_ACT_SELU: return 1.0507009873554804934f * (x > 0 ? x : 1.6732632423543772848f * expm1f(x));
    case SDT_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    case SDT_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case SDT_ACT_TANHSHRINK: return (float)((double)x - tanh((double)x)); /* cancels in float near 0 */
    case SDT_ACT_LOGSIGMOID: return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
    case SDT_ACT_HARDSHRINK: return fabsf(x) > 0.5f ? x : 0.0f;
    case SDT_ACT_SOFTSHRINK: return x > 0.5f ? x - 0.5f : x < -0.5f ? x + 0.5f : 0.0f;
    default: return x;
    }
}

static __device__ float act_df(int act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case SDT_ACT_LEAKY_RELU: return x > 0 ? 1.0f : 0.01f;
    case SDT_ACT_ELU: return x > 0 ? 1.0f : expf(x);
    case SDT_ACT_GELU: {
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
        return cdf + x * pdf;
    }
    case SDT_ACT_QUICK_GELU: {
        float s = sigmoidf_(1.702f * x);
        return s + 1.702f * x * s * (1.0f - s);
    }
    case SDT_ACT_SILU: {
        float s = sigmoidf_(x);
        return s * (1.0f + x * (1.0f - s));
    }
    case SDT_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case SDT_ACT_SIGMOID: {
        float s = sigmoidf_(x);
        return s * (1.0f - s);
    }
    case SDT_ACT_MISH: {
        float sp = log1pf(expf(x)), t = tanhf(sp);
        return t + x * (1.0f - t * t) * sigmoidf_(x);
    }
    case SDT_ACT_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
    case SDT_ACT_HARDSIGMOID: return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
    case SDT_ACT_HARDTANH: return x > -1.0f && x < 1.0f ? 1.0f : 0.0f;
    case SDT_ACT_RELU6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case SDT_ACT_SELU: return x > 0 ? 1.0507009873554804934f : 1.0507009873554804934f * 1.6732632423543772848f * expf(x);
    case SDT_ACT_SOFTPLUS: return x > 20.0f ? 1.0f : sigmoidf_(x);
    case SDT_ACT_SOFTSIGN: {
        float d = 1.0f + fabsf(x);
        return 1.0f / (d * d);
    }
    case SDT_ACT_TANHSHRINK: {
        float t = tanhf(x);
        return t * t;
    }
    case SDT_ACT_LOGSIGMOID: return sigmoidf_(-x);
    case SDT_ACT_HARDSHRINK:
    case SDT_ACT_SOFTSHRINK: return fabsf(x) > 0.5f ? 1.0f : 0.0f;
    default: return 1.0f;
    }
}

#endif
