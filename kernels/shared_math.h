/* shared_math.h - the math both backends must compute identically, written once.
 *
 * kernels/cpu (C) and kernels/cuda (nvcc) both include this header: every function is
 * SDT_HOST_DEVICE, empty in C and __host__ __device__ under nvcc, so a run can move between
 * backends and get the same activations and the same dropout mask.
 *
 * Activations: value and derivative of every sdt_activation, PyTorch semantics, float in and
 * float out. Where two formulas are equal in exact arithmetic the one without cancellation is
 * used, so every value is accurate to a few float ulps of itself, tails included:
 *  - GELU's Phi(x) is 0.5 * erfc(-x / sqrt 2), not 0.5 * (1 + erf(x / sqrt 2)): for x << 0,
 *    1 + erf loses every bit (gelu(-6) would be 0 or off by 100%), erfc keeps them;
 *  - 1 - tanh(x)^2 is sech(x)^2: 1 - t*t cancels as |x| grows and is 0 from |x| ~ 9 on;
 *  - 1 - sigmoid(z) is sigmoid(-z), which stays accurate where sigmoid(z) rounds to 1;
 *  - softplus is linear above 20 (also inside Mish), so e^x never overflows.
 *
 * Dropout: the keep decision for element i is a pure function of (seed, i): u_i is the
 * (i+1)-th output of a splitmix64 stream started at seed, top 24 bits as a float in [0, 1);
 * element i is dropped when u_i < p. Counter-based, so masks do not depend on thread counts,
 * launch shapes or the backend. */
#ifndef SDT_KERNELS_SHARED_MATH_H
#define SDT_KERNELS_SHARED_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops.h"

#ifdef __CUDACC__
#define SDT_HOST_DEVICE __host__ __device__
#else
#define SDT_HOST_DEVICE
#endif

#define ACT_LEAKY_SLOPE 0.01f                             /* torch.nn.LeakyReLU default negative_slope */
#define ACT_ELU_ALPHA 1.0f                                /* torch.nn.ELU default alpha */
#define ACT_QUICK_GELU_K 1.702f                           /* CLIP's QuickGELU */
#define ACT_SELU_ALPHA 1.6732632423543772848170429916717f /* torch.nn.SELU */
#define ACT_SELU_SCALE 1.0507009873554804934193349852946f
#define ACT_SHRINK_LAMBDA 0.5f /* torch.nn.Hardshrink / Softshrink default lambd */
#define ACT_INV_SQRT2 0.70710678118654752f
#define ACT_INV_SQRT_2PI 0.39894228040143268f

/* Double arithmetic that nvcc must not fuse: a product that feeds a sum is contracted into an fma on
 * the device (nvcc --fmad=true) but not by the C compiler (ISO C11, no FMA), which would give the
 * backends different bits. The fused steps are written as fma() on both. */
#ifdef __CUDA_ARCH__
#define SHARED_DMUL(a, b) __dmul_rn((a), (b))
#else
#define SHARED_DMUL(a, b) ((a) * (b))
#endif

static inline SDT_HOST_DEVICE uint64_t shared_double_bits(double d)
{
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
#endif
}

static inline SDT_HOST_DEVICE double shared_bits_double(uint64_t u)
{
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)u);
#else
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
#endif
}

/* e^x in double by glibc expf's method (sysdeps/ieee754/flt-32/e_expf.c, the fused variant __expf_fma):
 * x = (k + r) ln2 / 32, 2^(k/32) from a 32-entry table of 2^(i/32) with the exponent added in its bits,
 * e^r by a cubic. Its error is the method's (a relative ~2^-33, not double precision), valid for
 * |x| < 1400; a float x rounded to float after gives expf's own bits. The constants and table
 * (tab[i] = bits(2^(i/32)) - (i << 47)) are glibc's __exp2f_data; kernels/cpu/vec_expf.h runs the same
 * operations 4 lanes at a time. */
#define SHARED_EXPF_INVLN2N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define SHARED_EXPF_SHIFT 0x1.8p+52
#define SHARED_EXPF_C0 0x1.c6af84b912394p-20
#define SHARED_EXPF_C1 0x1.ebfce50fac4f3p-13
#define SHARED_EXPF_C2 0x1.62e42ff0c52d6p-6
#define SHARED_EXP2F_TABLE_INIT                                                                                        \
    {                                                                                                                  \
        0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,                    \
            0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,                \
            0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,                \
            0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,                \
            0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,                \
            0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,                \
            0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,                \
            0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL                 \
    }

/* The table once per translation unit for the host, once more in device memory for nvcc's device code. */
static const uint64_t shared_exp2f_table[32] = SHARED_EXP2F_TABLE_INIT;
#ifdef __CUDACC__
static __device__ const uint64_t shared_exp2f_table_device[32] = SHARED_EXP2F_TABLE_INIT;
#endif

static inline SDT_HOST_DEVICE double shared_exp_tabled(double x)
{
#ifdef __CUDA_ARCH__
    const uint64_t *table = shared_exp2f_table_device;
#else
    const uint64_t *table = shared_exp2f_table;
#endif
    const double kd_shifted = fma(SHARED_EXPF_INVLN2N, x, SHARED_EXPF_SHIFT);
    const uint64_t ki = shared_double_bits(kd_shifted);
    const double kd = kd_shifted - SHARED_EXPF_SHIFT;
    const double r = fma(SHARED_EXPF_INVLN2N, x, -kd);
    const double s = shared_bits_double(table[ki & 31] + (ki << 47));
    const double z = fma(SHARED_EXPF_C0, r, SHARED_EXPF_C1);
    const double r2 = SHARED_DMUL(r, r);
    double p = fma(r, SHARED_EXPF_C2, 1.0);
    p = fma(z, r2, p);
    return SHARED_DMUL(p, s);
}

/* erfc for GELU's Phi, one algorithm for both backends (libm's erfcf and CUDA's differ in their last
 * bits, and glibc's five-range rational code does not vectorize):
 *   erfc(z) = t e^(-z^2 + P(t)), t = 1 / (1 + z/2), for 0 <= z < 10.1; 2 - erfc(-z) for z < 0,
 * P a degree-12 polynomial in t (a Chebyshev fit of log(erfc(z)) + z^2 - log(t) over [0, 10.1] in
 * 40-digit arithmetic, written in powers of t, |error| < 1.8e-10), all in double with the fused steps
 * written as fma, e^ by shared_exp_tabled, one rounding to float at the end: within 1 ulp of the exact
 * erfc for every float (tests/kernels/test_vec_erfcf.c). Past 10.1 erfc(z) < 2^-150 rounds to +0 (and
 * to 2 for z < -10.1). kernels/cpu/vec_erfcf.c computes the same operations in the same order 4 lanes
 * at a time, so its bits are these. */
#define SHARED_ERFC_ZMAX 10.1
#define SHARED_ERFC_P0 -1.26550500693142
#define SHARED_ERFC_P1 0.9997496174400674
#define SHARED_ERFC_P2 0.37893021440096725
#define SHARED_ERFC_P3 0.04694636887575912
#define SHARED_ERFC_P4 0.13526588951579818
#define SHARED_ERFC_P5 -1.072909061160392
#define SHARED_ERFC_P6 2.6656883731792234
#define SHARED_ERFC_P7 -5.759291416304022
#define SHARED_ERFC_P8 8.547826685074751
#define SHARED_ERFC_P9 -7.890685057457067
#define SHARED_ERFC_P10 4.403927008689779
#define SHARED_ERFC_P11 -1.3763060109374339
#define SHARED_ERFC_P12 0.18636239579025465

/* P(t) by Horner's rule, highest power first (the order vec_erfcf.c evaluates too). */
static inline SDT_HOST_DEVICE double shared_erfc_poly(double t)
{
    double p = SHARED_ERFC_P12;
    p = fma(p, t, SHARED_ERFC_P11);
    p = fma(p, t, SHARED_ERFC_P10);
    p = fma(p, t, SHARED_ERFC_P9);
    p = fma(p, t, SHARED_ERFC_P8);
    p = fma(p, t, SHARED_ERFC_P7);
    p = fma(p, t, SHARED_ERFC_P6);
    p = fma(p, t, SHARED_ERFC_P5);
    p = fma(p, t, SHARED_ERFC_P4);
    p = fma(p, t, SHARED_ERFC_P3);
    p = fma(p, t, SHARED_ERFC_P2);
    p = fma(p, t, SHARED_ERFC_P1);
    return fma(p, t, SHARED_ERFC_P0);
}

static inline SDT_HOST_DEVICE float shared_erfcf(float x)
{
    if (isnan(x)) return x;
    const double z = (double)x, a = fabs(z);
    if (!(a < SHARED_ERFC_ZMAX)) return signbit(z) ? 2.0f : 0.0f;
    const double t = 1.0 / fma(0.5, a, 1.0);
    /* -a^2 is exact in double (a has 24 bits), so the fma rounds once, before e^ */
    const double e = SHARED_DMUL(t, shared_exp_tabled(fma(-a, a, shared_erfc_poly(t))));
    return (float)(signbit(z) ? 2.0 - e : e); /* -0 too: 2 - erfc(0) = 1 */
}

static inline SDT_HOST_DEVICE float act_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* log(1 + e^x) without overflow; for x > 20 the correction is below float precision. */
static inline SDT_HOST_DEVICE float act_softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

/* Phi(x), the standard normal CDF: 0.5 * (1 + erf(x / sqrt 2)) written with erfc (shared_erfcf, the
 * same bits on both backends and in the CPU's vector GEGLU). */
static inline SDT_HOST_DEVICE float act_normal_cdf(float x)
{
    return 0.5f * shared_erfcf(-x * ACT_INV_SQRT2);
}

static inline SDT_HOST_DEVICE float act_gelu(float x)
{
    return x * act_normal_cdf(x);
}

static inline SDT_HOST_DEVICE float act_gelu_grad(float x)
{
    return act_normal_cdf(x) + x * ACT_INV_SQRT_2PI * expf(-0.5f * x * x);
}

/* 1 - tanh(x)^2 = sech(x)^2; coshf overflows to inf for |x| > 89 and the result is 0, as it should. */
static inline SDT_HOST_DEVICE float act_sech2(float x)
{
    float c = coshf(x);
    return 1.0f / (c * c);
}

#define ACT_SQRT_2_OVER_PI 0.79788456080286536f
#define ACT_GELU_TANH_CUBIC 0.044715f

/* GELU's tanh approximation 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as
 * x * sigmoid(2u): 1 + tanh(u) = 2 sigmoid(2u) without the cancellation of 1 + tanh for x << 0. */
static inline SDT_HOST_DEVICE float act_gelu_tanh(float x)
{
    float u = ACT_SQRT_2_OVER_PI * (x + ACT_GELU_TANH_CUBIC * x * x * x);
    return x * act_sigmoid(2.0f * u);
}

static inline SDT_HOST_DEVICE float act_gelu_tanh_grad(float x)
{
    float u = ACT_SQRT_2_OVER_PI * (x + ACT_GELU_TANH_CUBIC * x * x * x);
    float du = ACT_SQRT_2_OVER_PI * (1.0f + 3.0f * ACT_GELU_TANH_CUBIC * x * x);
    float s = act_sigmoid(2.0f * u);
    return s + x * 2.0f * s * act_sigmoid(-2.0f * u) * du;
}

static inline SDT_HOST_DEVICE float act_value(sdt_activation act, float x)
{
    switch (act) {
        case SDT_ACT_RELU:
            return x > 0.0f ? x : 0.0f;
        case SDT_ACT_LEAKY_RELU:
            return x > 0.0f ? x : ACT_LEAKY_SLOPE * x;
        case SDT_ACT_ELU:
            return x > 0.0f ? x : ACT_ELU_ALPHA * expm1f(x);
        case SDT_ACT_GELU:
            return act_gelu(x);
        case SDT_ACT_QUICK_GELU:
            return x * act_sigmoid(ACT_QUICK_GELU_K * x);
        case SDT_ACT_SILU:
            return x * act_sigmoid(x);
        case SDT_ACT_TANH:
            return tanhf(x);
        case SDT_ACT_SIGMOID:
            return act_sigmoid(x);
        case SDT_ACT_MISH:
            return x * tanhf(act_softplus(x));
        case SDT_ACT_HARDSWISH:
            return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
        case SDT_ACT_HARDSIGMOID:
            return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f;
        case SDT_ACT_HARDTANH:
            return x < -1.0f ? -1.0f : x > 1.0f ? 1.0f : x;
        case SDT_ACT_RELU6:
            return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
        case SDT_ACT_SELU:
            return ACT_SELU_SCALE * (x > 0.0f ? x : ACT_SELU_ALPHA * expm1f(x));
        case SDT_ACT_SOFTPLUS:
            return act_softplus(x);
        case SDT_ACT_SOFTSIGN:
            return x / (1.0f + fabsf(x));
        /* in double: x - tanh(x) ~ x^3/3 cancels almost every bit of a float near 0 */
        case SDT_ACT_TANHSHRINK:
            return (float)((double)x - tanh((double)x));
        /* min(x, 0) - log1p(e^-|x|): no overflow, no log of 0 */
        case SDT_ACT_LOGSIGMOID:
            return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
        case SDT_ACT_HARDSHRINK:
            return fabsf(x) > ACT_SHRINK_LAMBDA ? x : 0.0f;
        case SDT_ACT_SOFTSHRINK:
            return x > ACT_SHRINK_LAMBDA    ? x - ACT_SHRINK_LAMBDA
                   : x < -ACT_SHRINK_LAMBDA ? x + ACT_SHRINK_LAMBDA
                                            : 0.0f;
        case SDT_ACT_GELU_TANH:
            return act_gelu_tanh(x);
        default:
            return x; /* identity */
    }
}

/* d act / dx at x; at the ReLU-family kink x = 0 the derivative is the left one, as in torch. */
static inline SDT_HOST_DEVICE float act_derivative(sdt_activation act, float x)
{
    switch (act) {
        case SDT_ACT_RELU:
            return x > 0.0f ? 1.0f : 0.0f;
        case SDT_ACT_LEAKY_RELU:
            return x > 0.0f ? 1.0f : ACT_LEAKY_SLOPE;
        case SDT_ACT_ELU:
            return x > 0.0f ? 1.0f : ACT_ELU_ALPHA * expf(x);
        case SDT_ACT_GELU:
            return act_gelu_grad(x);
        case SDT_ACT_QUICK_GELU: {
            float kx = ACT_QUICK_GELU_K * x;
            return act_sigmoid(kx) * (1.0f + kx * act_sigmoid(-kx));
        }
        case SDT_ACT_SILU:
            return act_sigmoid(x) * (1.0f + x * act_sigmoid(-x));
        case SDT_ACT_TANH:
            return act_sech2(x);
        case SDT_ACT_SIGMOID:
            return act_sigmoid(x) * act_sigmoid(-x);
        case SDT_ACT_MISH: {
            float sp = act_softplus(x);
            return tanhf(sp) + x * act_sech2(sp) * act_sigmoid(x);
        }
        /* the clamp-shaped ones follow torch's backward at the corners: hardswish keeps the
     * inner slope at exactly +-3, the clamps give 0 at their limits */
        case SDT_ACT_HARDSWISH:
            return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
        case SDT_ACT_HARDSIGMOID:
            return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
        case SDT_ACT_HARDTANH:
            return x > -1.0f && x < 1.0f ? 1.0f : 0.0f;
        case SDT_ACT_RELU6:
            return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
        case SDT_ACT_SELU:
            return x > 0.0f ? ACT_SELU_SCALE : ACT_SELU_SCALE * ACT_SELU_ALPHA * expf(x);
        case SDT_ACT_SOFTPLUS:
            return x > 20.0f ? 1.0f : act_sigmoid(x);
        case SDT_ACT_SOFTSIGN: {
            float d = 1.0f + fabsf(x);
            return 1.0f / (d * d);
        }
        case SDT_ACT_TANHSHRINK: {
            float t = tanhf(x);
            return t * t;
        }
        case SDT_ACT_LOGSIGMOID:
            return act_sigmoid(-x);
        case SDT_ACT_HARDSHRINK:
        case SDT_ACT_SOFTSHRINK:
            return fabsf(x) > ACT_SHRINK_LAMBDA ? 1.0f : 0.0f;
        case SDT_ACT_GELU_TANH:
            return act_gelu_tanh_grad(x);
        default:
            return 1.0f;
    }
}

/* u_i: splitmix64's state after i+1 steps from seed, through its finaliser, as a float in [0, 1). */
static inline SDT_HOST_DEVICE float dropout_uniform(uint64_t seed, uint64_t index)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

/* What a kept element is multiplied by: 1/(1-p); p == 1 drops everything, and torch returns
 * zeros there rather than 0 * inf. */
static inline SDT_HOST_DEVICE float dropout_keep_scale(float p)
{
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

/* Mask entry i: keep_scale (dropout_keep_scale(p)) when u_i >= p, else 0. */
static inline SDT_HOST_DEVICE float dropout_mask_at(uint64_t seed, uint64_t index, float p, float keep_scale)
{
    return dropout_uniform(seed, index) >= p ? keep_scale : 0.0f;
}

/* The robust losses of one element d = pred - target (ops.h robust_loss_forward): the value and
 * its derivative. torch's forms: L1 |d| with sign(0) = 0; Huber (F.huber_loss) quadratic inside
 * delta, linear outside, the two meeting with equal value and slope at |d| = delta. */
static inline SDT_HOST_DEVICE float robust_loss_value(sdt_robust_loss kind, float d, float delta)
{
    float a = fabsf(d);
    if (kind == SDT_ROBUST_LOSS_L1) return a;
    return a < delta ? 0.5f * d * d : delta * (a - 0.5f * delta);
}

static inline SDT_HOST_DEVICE float robust_loss_grad(sdt_robust_loss kind, float d, float delta)
{
    if (kind == SDT_ROBUST_LOSS_L1) return d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    return d < -delta ? -delta : d > delta ? delta : d;
}

/* Timestep embedding (diffusers' get_timestep_embedding): column j of a timestep t's row of dim
 * columns, half = dim / 2: freq_k = exp(-log_period * k / (half - shift)), arg = t * freq_k,
 * [sin, cos] (or [cos, sin] when flip), an odd dim's last column 0. Formed in double on both
 * backends: t * freq reaches ~1000, where a float argument alone would carry ~3e-5 of error into
 * sin/cos. log_period is log((double)max_period), taken once by the caller. */
static inline SDT_HOST_DEVICE float timestep_embedding_at(float t, int64_t j, int64_t dim, bool flip, float shift,
                                                          double log_period)
{
    int64_t half = dim / 2;
    if (j >= 2 * half) return 0.0f;
    int64_t k = j % half;
    double arg = (double)t * exp(-log_period * (double)k / ((double)half - (double)shift));
    bool first = j < half;
    return (float)((first != flip) ? sin(arg) : cos(arg));
}

/* T5's bidirectional relative-position bucket (transformers' T5Attention._relative_position_bucket,
 * bidirectional) of rel = key position - query position: half the buckets per sign (rel > 0 offset
 * by half), |rel| below half / 2 exact, above it logarithmic up to max_distance, capped at half - 1.
 * The logarithm is taken in float as torch takes it (float32 tensor ops, the Python scalars cast
 * to float), so the buckets at the boundaries agree with transformers'. */
static inline SDT_HOST_DEVICE int t5_relative_bucket(int rel, int num_buckets, int max_distance)
{
    int half = num_buckets / 2, max_exact = half / 2;
    int bucket = rel > 0 ? half : 0;
    int n = rel < 0 ? -rel : rel;
    if (n < max_exact) return bucket + n;
    float f = logf((float)n / (float)max_exact) / (float)log((double)max_distance / (double)max_exact);
    int large = max_exact + (int)(f * (float)(half - max_exact));
    return bucket + (large < half - 1 ? large : half - 1);
}

#endif
