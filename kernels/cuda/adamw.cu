/* adamw.cu - the AdamW update on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

__global__ void adamw_k(float *p, const void *g, int gdt, float *m, float *v, int64_t n, float lr, float b1, float b2,
                        float eps, float wd, float step_size, float bc2_sqrt, float gscale)
{
    GRID_STRIDE(i, n)
    {
        float grad = ld(g, gdt, i) * gscale;
        float pi = p[i] * (1.0f - lr * wd);
        float mi = b1 * m[i] + (1.0f - b1) * grad;
        float vi = b2 * v[i] + (1.0f - b2) * grad * grad;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

int cuda_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v,
                      float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale)
{
    int64_t n = sdt_tensor_numel(param);
    double bc1 = 1.0 - pow((double)beta1, (double)step), bc2 = 1.0 - pow((double)beta2, (double)step);
    adamw_k<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(
        (float *)param->data, grad->data, grad->dtype, (float *)m->data, (float *)v->data, n, lr, beta1, beta2, eps,
        weight_decay, (float)(lr / bc1), (float)sqrt(bc2), grad_scale);
    CUDA_LAUNCHED(be);
    return 0;
}
