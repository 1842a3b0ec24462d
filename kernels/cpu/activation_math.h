/* activation_math.h - value and derivative of every sdt_activation, PyTorch semantics.
 * Shared by the activation op and GEGLU (which gates with GELU). Float in, float out:
 * the CPU backend computes in fp32 like PyTorch's CPU kernels, but avoids their
 * cancellations (1 + erf(x) for x << 0, 1 - sigmoid, 1 - tanh^2 in the tails) so every
 * value is accurate to a few float ulps of itself: the CPU backend is the reference. */
#ifndef SDT_KERNELS_CPU_ACTIVATION_MATH_H
#define SDT_KERNELS_CPU_ACTIVATION_MATH_H

#include <math.h>

#include "../ops.h"

#define ACT_LEAKY_SLOPE 0.01f   /* torch.nn.LeakyReLU default negative_slope */
#define ACT_ELU_ALPHA 1.0f      /* torch.nn.ELU default alpha */
#define ACT_QUICK_GELU_K 1.702f /* CLIP's QuickGELU */
#define ACT_SELU_ALPHA 1.6732632423543772848170429916717f /* torch.nn.SELU */
#define ACT_SELU_SCALE 1.0507009873554804934193349852946f
#define ACT_SHRINK_LAMBDA 0.5f  /* torch.nn.Hardshrink / Softshrink default lambd */
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

/* Phi(x), the standard normal CDF: 0.5 * (1 + erf(x / sqrt 2)) written with erfc. */
static inline float act_normal_cdf(float x)
{
    return 0.5f * erfcf(-x * ACT_INV_SQRT2);
}

static inline float act_gelu(float x)
{
    return x * act_normal_cdf(x);
}

static inline float act_gelu_grad(float x)
{
    return act_normal_cdf(x) + x * ACT_INV_SQRT_2PI * expf(-0.5f * x * x);
}

/* 1 - tanh(x)^2 = sech(x)^2; coshf overflows to inf for |x| > 89 and the result is 0, as it should. */
static inline float act_sech2(float x)
{
    float c = coshf(x);
    return 1.0f / (c * c);
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
    case SDT_ACT_HARDSWISH: return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
    case SDT_ACT_HARDSIGMOID: return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f;
    case SDT_ACT_HARDTANH: return x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
    case SDT_ACT_RELU6: return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
    case SDT_ACT_SELU: return ACT_SELU_SCALE * (x > 0.0f ? x : ACT_SELU_ALPHA * expm1f(x));
    case SDT_ACT_SOFTPLUS: return act_softplus(x);
    case SDT_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    /* in double: x - tanh(x) ~ x^3/3 cancels almost every bit of a float near 0 */
    case SDT_ACT_TANHSHRINK: return (float)((double)x - tanh((double)x));
    /* min(x, 0) - log1p(e^-|x|): no overflow, no log of 0 */
    case SDT_ACT_LOGSIGMOID: return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
    case SDT_ACT_HARDSHRINK: return fabsf(x) > ACT_SHRINK_LAMBDA ? x : 0.0f;
    case SDT_ACT_SOFTSHRINK:
        return x > ACT_SHRINK_LAMBDA ? x - ACT_SHRINK_LAMBDA : x < -ACT_SHRINK_LAMBDA ? x + ACT_SHRINK_LAMBDA : 0.0f;
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
    /* 1 - sigmoid(z) is computed as sigmoid(-z) */
    case SDT_ACT_QUICK_GELU: {
        float kx = ACT_QUICK_GELU_K * x;
        return act_sigmoid(kx) * (1.0f + kx * act_sigmoid(-kx));
    }
    case SDT_ACT_SILU: return act_sigmoid(x) * (1.0f + x * act_sigmoid(-x));
    case SDT_ACT_TANH: return act_sech2(x);
    case SDT_ACT_SIGMOID: return act_sigmoid(x) * act_sigmoid(-x);
    case SDT_ACT_MISH: {
        float sp = act_softplus(x);
        return tanhf(sp) + x * act_sech2(sp) * act_sigmoid(x);
    }
    /* the clamp-shaped ones follow torch's backward at the corners: hardswish keeps the
     * inner slope at exactly +-3, the clamps give 0 at their limits */
    case SDT_ACT_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
    case SDT_ACT_HARDSIGMOID: return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
    case SDT_ACT_HARDTANH: return x > -1.0f && x < 1.0f ? 1.0f : 0.0f;
    case SDT_ACT_RELU6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case SDT_ACT_SELU: return x > 0.0f ? ACT_SELU_SCALE : ACT_SELU_SCALE * ACT_SELU_ALPHA * expf(x);
    case SDT_ACT_SOFTPLUS: return x > 20.0f ? 1.0f : act_sigmoid(x);
    case SDT_ACT_SOFTSIGN: {
        float d = 1.0f + fabsf(x);
        return 1.0f / (d * d);
    }
    case SDT_ACT_TANHSHRINK: {
        float t = tanhf(x);
        return t * t;
    }
    case SDT_ACT_LOGSIGMOID: return act_sigmoid(-x);
    case SDT_ACT_HARDSHRINK:
    case SDT_ACT_SOFTSHRINK: return fabsf(x) > ACT_SHRINK_LAMBDA ? 1.0f : 0.0f;
    default: return 1.0f;
    }
}

#endif
