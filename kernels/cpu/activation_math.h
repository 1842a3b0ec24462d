/* activation_math.h - value and derivative of every sdt_activation, PyTorch semantics.
 * Shared by the activation op and GEGLU (which gates with GELU). Float in, float out:
 * the CPU backend computes in fp32 like PyTorch's CPU kernels. */
#ifndef SDT_KERNELS_CPU_ACTIVATION_MATH_H
#define SDT_KERNELS_CPU_ACTIVATION_MATH_H

#include <math.h>

#include "../ops.h"

#define ACT_LEAKY_SLOPE 0.01f   /* torch.nn.LeakyReLU default negative_slope */
#define ACT_ELU_ALPHA 1.0f      /* torch.nn.ELU default alpha */
#define ACT_QUICK_GELU_K 1.702f /* CLIP's QuickGELU */
#define ACT_INV_SQRT2 0.70710678118654752f
#define ACT_INV_SQRT_2PI 0.39894228040143268f

static inline float act_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* log(1 + e^x) without overflow; for x > 20 the correction is below float precision. */
static inline float act_softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

static inline float act_gelu(float x)
{
    return 0.5f * x * (1.0f + erff(x * ACT_INV_SQRT2));
}

static inline float act_gelu_grad(float x)
{
    return 0.5f * (1.0f + erff(x * ACT_INV_SQRT2)) + x * ACT_INV_SQRT_2PI * expf(-0.5f * x * x);
}

static inline float act_value(sdt_activation act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case SDT_ACT_LEAKY_RELU: return x > 0.0f ? x : ACT_LEAKY_SLOPE * x;
    case SDT_ACT_ELU: return x > 0.0f ? x : ACT_ELU_ALPHA * expm1f(x);
    case SDT_ACT_GELU: return act_gelu(x);
    case SDT_ACT_QUICK_GELU: return x * act_sigmoid(ACT_QUICK_GELU_K * x);
    case SDT_ACT_SILU: return x * act_sigmoid(x);
    case SDT_ACT_TANH: return tanhf(x);
    case SDT_ACT_SIGMOID: return act_sigmoid(x);
    case SDT_ACT_MISH: return x * tanhf(act_softplus(x));
    default: return x; /* identity */
    }
}

/* d act / dx at x; at the ReLU-family kink x = 0 the derivative is the left one, as in torch. */
static inline float act_derivative(sdt_activation act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case SDT_ACT_LEAKY_RELU: return x > 0.0f ? 1.0f : ACT_LEAKY_SLOPE;
    case SDT_ACT_ELU: return x > 0.0f ? 1.0f : ACT_ELU_ALPHA * expf(x);
    case SDT_ACT_GELU: return act_gelu_grad(x);
    case SDT_ACT_QUICK_GELU: {
        float s = act_sigmoid(ACT_QUICK_GELU_K * x);
        return s + ACT_QUICK_GELU_K * x * s * (1.0f - s);
    }
    case SDT_ACT_SILU: {
        float s = act_sigmoid(x);
        return s * (1.0f + x * (1.0f - s));
    }
    case SDT_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case SDT_ACT_SIGMOID: {
        float s = act_sigmoid(x);
        return s * (1.0f - s);
    }
    case SDT_ACT_MISH: {
        float t = tanhf(act_softplus(x));
        return t + x * (1.0f - t * t) * act_sigmoid(x);
    }
    default: return 1.0f;
    }
}

#endif
