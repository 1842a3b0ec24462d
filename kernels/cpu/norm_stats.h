/* norm_stats.h - mean and reciprocal standard deviation shared by layernorm and groupnorm. */
#ifndef SDT_KERNELS_CPU_NORM_STATS_H
#define SDT_KERNELS_CPU_NORM_STATS_H

#include <stdint.h>

/* Biased variance (as PyTorch's norms use) in two passes with double sums,
 * so a large mean does not cancel the variance away. rstd = 1/sqrt(var + eps). */
void cpu_norm_stats(const float *x, int64_t n, float eps, float *mean, float *rstd);

#endif
