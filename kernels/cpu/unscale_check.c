/* unscale_check.c - the GradScaler's fused unscale, exactly torch._amp_foreach_non_finite_check_and_unscale_:
 * *found_inf is set when any grad value is non-finite BEFORE scaling (the product is not tested,
 * as in torch), every grad is multiplied by inv_scale even when non-finite values are found,
 * and the multiply is skipped bit-exactly when inv_scale == 1. The flag is only ever set,
 * never cleared, so one flag collects a whole parameter group. */
#include "cpu_context.h"

#include <math.h>

int cpu_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf)
{
    int any = 0;
    for (int k = 0; k < count; k++) {
        sdt_tensor *t = grads[k];
        if (!t) continue;
        int64_t n = sdt_tensor_numel(t);
        if (n == 0) continue;
        float *g = cpu_write_begin(be, t, 0, true);
        if (!g) return -1;
        int bad = 0;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            float v = g[i];
            bad |= !isfinite(v);
            g[i] = inv_scale == 1.0f ? v : v * inv_scale;
        }
        cpu_write_end(be, t, g);
        any |= bad;
    }
    if (any) *found_inf = true;
    return 0;
}
