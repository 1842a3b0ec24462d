/* vec_erfcf.h - erfcf over an array, 4 lanes at a time where the CPU has AVX2 and FMA (internal to
 * kernels/cpu).
 *
 * Why: GEGLU's exact GELU (Phi(x) = erfc(-x / sqrt 2) / 2, forward and backward) called libm's scalar
 * erfcf per element, ~7% of the demo-sized CPU step (bench/NOTES.md run 34). glibc's erfcf is a
 * five-range rational code that does not vectorize bit for bit the way expf did, so this is its own
 * function with an accuracy contract instead of libm's bits:
 *   erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2) for z >= 0, and 2 - erfc(-z) for z < 0,
 * with P a degree-12 polynomial fitted here (|error| < 2e-10 over z in [0, 10.1]; erfc(z) rounds to 0
 * in float beyond), all in double, exp by glibc expf's table method in double (vec_expf.h), one
 * rounding to float at the end: every result within 1 ulp of the exact erfc (tests/kernels/
 * test_vec_erfcf.c checks every 251st bit pattern). The same value for an input wherever it sits in
 * the array (the tail runs through the vector code too), so results never depend on the batch,
 * the thread count or the split; without AVX2 + FMA it is libm's erfcf (other bits, same contract). */
#ifndef SDT_KERNELS_CPU_VEC_ERFCF_H
#define SDT_KERNELS_CPU_VEC_ERFCF_H

#include <stdint.h>

/* y[i] = erfc(x[i]) for i < n (within 1 ulp); y may be x. */
void cpu_erfcf_array(const float *x, float *y, int64_t n);

/* Whether cpu_erfcf_array takes the vector path in this process (tests). */
int cpu_erfcf_array_is_vectorized(void);

#endif
