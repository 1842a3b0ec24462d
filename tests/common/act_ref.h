/* act_ref.h - float64 references of every sdt_activation (PyTorch definitions and
 * backward conventions at the kinks), for the activation op test and the
 * hypernetwork module test (header only). */
#ifndef SDT_TEST_ACT_REF_H
#define SDT_TEST_ACT_REF_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "ops.h"

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

static inline double act_ref_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static inline double act_ref_value(sdt_activation act, double x)
{
    switch (act) {
        case SDT_ACT_RELU:
            return x > 0 ? x : 0;
        case SDT_ACT_LEAKY_RELU:
            return x > 0 ? x : 0.01 * x;
        case SDT_ACT_ELU:
            return x > 0 ? x : exp(x) - 1;
        case SDT_ACT_GELU:
            return 0.5 * x * (1 + erf(x / sqrt(2.0)));
        case SDT_ACT_QUICK_GELU:
            return x * act_ref_sigmoid(1.702 * x);
        case SDT_ACT_SILU:
            return x * act_ref_sigmoid(x);
        case SDT_ACT_TANH:
            return tanh(x);
        case SDT_ACT_SIGMOID:
            return act_ref_sigmoid(x);
        case SDT_ACT_MISH:
            return x * tanh(log1p(exp(x)));
        case SDT_ACT_HARDSWISH:
            return x * fmin(fmax(x + 3, 0), 6) / 6;
        case SDT_ACT_HARDSIGMOID:
            return fmin(fmax(x + 3, 0), 6) / 6;
        case SDT_ACT_HARDTANH:
            return fmin(fmax(x, -1), 1);
        case SDT_ACT_RELU6:
            return fmin(fmax(x, 0), 6);
        case SDT_ACT_SELU:
            return SELU_SCALE * (x > 0 ? x : SELU_ALPHA * (exp(x) - 1));
        case SDT_ACT_SOFTPLUS:
            return x > 20 ? x : log1p(exp(x));
        case SDT_ACT_SOFTSIGN:
            return x / (1 + fabs(x));
        case SDT_ACT_TANHSHRINK:
            return x - tanh(x);
        case SDT_ACT_LOGSIGMOID:
            return -log1p(exp(-x));
        case SDT_ACT_HARDSHRINK:
            return fabs(x) > 0.5 ? x : 0;
        case SDT_ACT_SOFTSHRINK:
            return x > 0.5 ? x - 0.5 : x < -0.5 ? x + 0.5 : 0;
        /* 0.5 x (1 + tanh(u)) = x sigmoid(2u): the form without cancellation in the left tail */
        case SDT_ACT_GELU_TANH:
            return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        default:
            return x;
    }
}

static inline double act_ref_derivative(sdt_activation act, double x)
{
    switch (act) {
        case SDT_ACT_RELU:
            return x > 0 ? 1 : 0;
        case SDT_ACT_LEAKY_RELU:
            return x > 0 ? 1 : 0.01;
        case SDT_ACT_ELU:
            return x > 0 ? 1 : exp(x);
        case SDT_ACT_GELU:
            return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
        case SDT_ACT_QUICK_GELU:
            return act_ref_sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - act_ref_sigmoid(1.702 * x)));
        case SDT_ACT_SILU:
            return act_ref_sigmoid(x) * (1 + x * (1 - act_ref_sigmoid(x)));
        case SDT_ACT_TANH:
            return 1 / (cosh(x) * cosh(x)); /* 1 - tanh^2 without cancellation */
        case SDT_ACT_SIGMOID:
            return act_ref_sigmoid(x) * act_ref_sigmoid(-x);
        case SDT_ACT_MISH: {
            double t = tanh(log1p(exp(x)));
            return t + x * (1 - t * t) * act_ref_sigmoid(x);
        }
        case SDT_ACT_HARDSWISH:
            return x < -3 ? 0 : x <= 3 ? x / 3 + 0.5 : 1;
        case SDT_ACT_HARDSIGMOID:
            return x > -3 && x < 3 ? 1.0 / 6 : 0;
        case SDT_ACT_HARDTANH:
            return x > -1 && x < 1 ? 1 : 0;
        case SDT_ACT_RELU6:
            return x > 0 && x < 6 ? 1 : 0;
        case SDT_ACT_SELU:
            return x > 0 ? SELU_SCALE : SELU_SCALE * SELU_ALPHA * exp(x);
        case SDT_ACT_SOFTPLUS:
            return x > 20 ? 1 : act_ref_sigmoid(x);
        case SDT_ACT_SOFTSIGN:
            return 1 / ((1 + fabs(x)) * (1 + fabs(x)));
        case SDT_ACT_TANHSHRINK:
            return tanh(x) * tanh(x);
        case SDT_ACT_LOGSIGMOID:
            return act_ref_sigmoid(-x);
        case SDT_ACT_HARDSHRINK:
        case SDT_ACT_SOFTSHRINK:
            return fabs(x) > 0.5 ? 1 : 0;
        case SDT_ACT_GELU_TANH: {
            double u = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
            double s = 1 / (1 + exp(-2 * u)), s_neg = 1 / (1 + exp(2 * u)); /* sigmoid(2u), 1 - sigmoid(2u) */
            return s + 2 * x * s * s_neg * sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
        }
        default:
            return 1;
    }
}

/* Points where an activation (or its derivative) jumps: finite differences across them
 * measure the jump, not the gradient, so test inputs keep 1e-3 away from them. */
static inline bool act_ref_near_kink(float x)
{
    static const float kinks[] = {0.0f, -0.5f, 0.5f, -1.0f, 1.0f, -3.0f, 3.0f, 6.0f, 20.0f};
    for (size_t k = 0; k < sizeof(kinks) / sizeof(kinks[0]); k++)
        if (fabsf(x - kinks[k]) < 1e-3f) return true;
    return false;
}

#endif
