/* robust_loss.c - the L1 and Huber losses, mean(w * rho(pred - target)), and their gradient;
 * rho and rho' are kernels/shared_math.h's, so both backends compute the same numbers. Summed in
 * double like mse_loss.c. */
#include "shared_math.h"
#include "cpu_context.h"

int cpu_robust_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                            const sdt_tensor *weight, sdt_robust_loss kind, float delta)
{
    int64_t n = sdt_tensor_numel(pred);
    const float *p = cpu_read_f32(be, pred, 0);
    const float *y = cpu_read_f32(be, target, 1);
    const float *w = cpu_read_f32(be, weight, 2);
    if (!p || !y || (weight && !w)) return -1;
    double sum = 0;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static) reduction(+ : sum)
    for (int64_t i = 0; i < n; i++)
        sum += (w ? (double)w[i] : 1.0) * (double)robust_loss_value(kind, p[i] - y[i], delta);
    *loss = sum / (double)n;
    return 0;
}

int cpu_robust_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred,
                             const sdt_tensor *target, const sdt_tensor *weight, sdt_robust_loss kind, float delta)
{
    if (!dpred) return 0;
    int64_t n = sdt_tensor_numel(pred);
    if (n == 0) return 0;
    const float *p = cpu_read_f32(be, pred, 0);
    const float *y = cpu_read_f32(be, target, 1);
    const float *w = cpu_read_f32(be, weight, 2);
    float *g = cpu_write_begin(be, dpred, 3, true);
    if (!p || !y || (weight && !w) || !g) return -1;
    float coef = (float)((double)dloss / (double)n);
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) g[i] += coef * (w ? w[i] : 1.0f) * robust_loss_grad(kind, p[i] - y[i], delta);
    cpu_write_end(be, dpred, g);
    return 0;
}
