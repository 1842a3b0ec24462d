/* vec_erfcf.h - erfc over an array, 4 lanes at a time where the CPU has AVX2 and FMA, with exactly the
 * bits of shared_math.h's shared_erfcf (internal to kernels/cpu).
 *
 * Why: GELU's Phi(x) = erfc(-x / sqrt 2) / 2 (GEGLU forward and backward, the GELU activation) called
 * the erfc per element, ~7% of the demo-sized CPU step (bench/NOTES.md run 34). The erfc is
 * shared_math.h's own (t e^(-z^2 + P(t)) in double, within 1 ulp), the one both backends' GELU
 * computes; this is the same operations in the same order with the same fusions 4 lanes at a time, so
 * every lane has shared_erfcf's bits: a GEGLU on the CPU equals act_gelu, an input gives the same value
 * wherever it sits in the array (the tail runs through the vector code too), and results never depend on
 * the batch, the thread count or the split. It is used only after a check at first use finds it equal
 * to the scalar shared_erfcf on a spread of inputs (a libm whose fma() were not fused would fail it);
 * otherwise, and without AVX2 + FMA, the scalar shared_erfcf itself (the same bits, slower). */
#ifndef SDT_KERNELS_CPU_VEC_ERFCF_H
#define SDT_KERNELS_CPU_VEC_ERFCF_H

#include <stdint.h>

/* y[i] = shared_erfcf(x[i]) for i < n; y may be x. */
void cpu_erfcf_array(const float *x, float *y, int64_t n);

/* Whether cpu_erfcf_array takes the vector path in this process (tests). */
int cpu_erfcf_array_is_vectorized(void);

/* GELU's normal CDF and derivative over an array, for the GELU activation (activation.c) and GEGLU (geglu.c):
 * cdf[i] = act_normal_cdf(x[i]), Phi = shared_erfcf(-x / sqrt 2) / 2 with the erfc from cpu_erfcf_array, and where
 * grad is not NULL grad[i] = act_gelu_grad(x[i]), Phi + x / sqrt(2 pi) * e^(-x^2 / 2) with the density's expf from
 * cpu_expf_array: the scalar expressions' operations in their order, so shared_math.h's bits (expf's for the
 * density). x, cdf and grad are distinct. */
void cpu_normal_cdf_array(const float *x, float *cdf, float *grad, int64_t n);

#endif
