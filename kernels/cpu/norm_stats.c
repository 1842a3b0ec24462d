/* norm_stats.c - per-group statistics for the normalisation ops. */
#include "norm_stats.h"

#include <math.h>

void cpu_norm_stats(const float *x, int64_t n, float eps, float *mean, float *rstd)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    const double mu = sum / (double)n;
    double sq = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = x[i] - mu;
        sq += d * d;
    }
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(sq / (double)n + eps));
}
