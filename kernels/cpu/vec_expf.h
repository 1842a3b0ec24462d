/* vec_expf.h - expf over an array, 4 lanes at a time where the CPU has AVX2 and FMA, with exactly
 * the bits glibc's expf returns (internal to kernels/cpu).
 *
 * Why: the CPU step called libm's scalar expf per element (attention's softmax forward and its
 * recomputation in backward, SiLU), 12% of the demo-sized step (bench/NOTES.md run 33). The vector
 * code is glibc's own algorithm (sysdeps/ieee754/flt-32/e_expf.c: a 32-entry table of 2^(i/32) and a
 * cubic in double) with the fused multiply-adds of the variant glibc runs on such a CPU
 * (__expf_fma), so every result is bit for bit expf's; lanes at |x| >= 88, inf and NaN go to expf
 * itself. It is used only after a check at first use finds it equal to this process's expf on a
 * spread of inputs (another libm: the scalar loop, the same bits as before). */
#ifndef SDT_KERNELS_CPU_VEC_EXPF_H
#define SDT_KERNELS_CPU_VEC_EXPF_H

#include <stdint.h>

/* y[i] = expf(x[i]) for i < n; y may be x. */
void cpu_expf_array(const float *x, float *y, int64_t n);

/* Whether cpu_expf_array takes the vector path in this process (tests). */
int cpu_expf_array_is_vectorized(void);

#endif
