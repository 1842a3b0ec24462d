/* sum_squares.c - the global gradient norm's sum of squares (torch.nn.utils.clip_grad_norm_
 * with norm_type 2 takes its sqrt), accumulated in double across all tensors. */
#include "cpu_context.h"

int cpu_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    for (int k = 0; k < count; k++) {
        const sdt_tensor *t = tensors[k];
        if (!t) continue;
        int64_t n = sdt_tensor_numel(t);
        if (n == 0) continue;
        const float *x = cpu_read_f32(be, t, 0);
        if (!x) return -1;
        double sum = 0;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static) reduction(+ : sum)
        for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
        *sumsq += sum;
    }
    return 0;
}
