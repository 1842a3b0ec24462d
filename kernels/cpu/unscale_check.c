/* unscale_check.c - the GradScaler's fused unscale, as torch._amp_foreach_non_finite_check_and_unscale_:
 * every grad is multiplied by inv_scale (even when a non-finite value is found, as torch does),
 * and *found_inf is set when any value is non-finite. It is only ever set, never cleared,
 * so one flag collects a whole parameter group. Beyond torch, a value that becomes
 * non-finite by the multiplication also counts (ops.h's contract). */
#include "cpu_context.h"

#include <math.h>

int cpu_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf)
{
    int any = 0;
    for (int k = 0; k < count; k++) {
        sdt_tensor *t = grads[k];
        if (!t) continue;
        if (cpu_check_tensor(be, "unscale_check", "grads[k]", t)) return -1;
        int64_t n = sdt_tensor_numel(t);
        if (n == 0) continue;
        float *g = cpu_write_begin(be, t, 0, true);
        if (!g) return -1;
        int bad = 0;
        #pragma omp parallel for num_threads(cpu_threads(be)) schedule(static) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            float v = g[i];
            float scaled = inv_scale == 1.0f ? v : v * inv_scale; /* torch skips the multiply at 1 */
            bad |= !isfinite(v) || !isfinite(scaled);
            g[i] = scaled;
        }
        cpu_write_end(be, t, g);
        any |= bad;
    }
    if (any) *found_inf = true;
    return 0;
}
