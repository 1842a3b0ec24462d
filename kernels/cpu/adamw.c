/* adamw.c - one torch.optim.AdamW step (amsgrad=False, maximize=False, the default
 * single-tensor/foreach path), in the same operation order so float results match torch:
 *   p *= 1 - lr*wd
 *   m = m.lerp(g, 1 - beta1)          (m + (1-beta1)*(g - m))
 *   v = v*beta2 + (1-beta2)*g*g
 *   denom = sqrt(v) / sqrt(1 - beta2^step) + eps
 *   p += -(lr / (1 - beta1^step)) * m / denom
 * The scalars are computed in double as Python does, then used as float like torch's kernels.
 * g is grad * grad_scale (unscaling and clipping folded into one factor). */
#include "cpu_context.h"

#include <math.h>

int cpu_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale)
{
    int64_t n = sdt_tensor_numel(param);
    if (n == 0) return 0;
    const float *g = cpu_read_f32(be, grad, 0);
    if (!g) return -1;
    float *p = param->data, *ms = m->data, *vs = v->data;

    double bias1 = 1.0 - pow((double)beta1, (double)step);
    double bias2 = 1.0 - pow((double)beta2, (double)step);
    float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    float lerp_weight = (float)(1.0 - (double)beta1);
    float sq_weight = (float)(1.0 - (double)beta2);
    float neg_step_size = (float)(-((double)lr / bias1));
    float bias2_sqrt = (float)sqrt(bias2);

#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        p[i] *= decay;
        ms[i] += lerp_weight * (gi - ms[i]);
        vs[i] = vs[i] * beta2 + sq_weight * gi * gi;
        float denom = sqrtf(vs[i]) / bias2_sqrt + eps;
        p[i] += neg_step_size * ms[i] / denom;
    }
    return 0;
}
