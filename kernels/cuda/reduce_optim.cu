/* reduce_optim.cu - loss, norms and the optimizer update on the GPU: the MSE
 * loss, sum of squares (grad norm), the scaler's fused unscale + inf check and
 * AdamW. Reductions are two-pass with a fixed order, so results are
 * deterministic run to run. */
#include "cuda_ops.h"

#define RED_BLOCKS 256
#define RED_THREADS 256

/* Block-level double sum into partial[blockIdx.x]. */
__device__ void block_sum_store(double v, double *partial)
{
    __shared__ double s[RED_THREADS];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void final_sum_k(const double *partial, int n, double *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < n; i++) s += partial[i];
        *out = s;
    }
}

__global__ void mse_partial_k(const void *p, int pdt, const void *t, int tdt, const void *w, int wdt, int64_t n, double *partial)
{
    double s = 0;
    GRID_STRIDE(i, n)
    {
        double d = (double)ld(p, pdt, i) - (double)ld(t, tdt, i);
        s += (w ? (double)ld(w, wdt, i) : 1.0) * d * d;
    }
    block_sum_store(s, partial);
}

/* Sums the partials of the last kernel into host *out. */
static int finish_sum(sdt_backend *be, double *partial, double *out)
{
    cuda_ctx *c = ctx_of(be);
    final_sum_k<<<1, 1, 0, c->stream>>>(partial, RED_BLOCKS, c->reduce_d);
    CUDA_LAUNCHED(be);
    return cuda_download(be, out, c->reduce_d, sizeof(double));
}

int cuda_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                          const sdt_tensor *weight)
{
    int64_t n = sdt_tensor_numel(pred);
    if (n != sdt_tensor_numel(target) || (weight && n != sdt_tensor_numel(weight)))
        return cuda_fail(be, "mse_loss: prediction, target and weight differ in size");
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    mse_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(pred->data, pred->dtype, target->data, target->dtype,
                                                                      weight ? weight->data : NULL, weight ? weight->dtype : 0, n,
                                                                      partial);
    CUDA_LAUNCHED(be);
    double sum;
    if (finish_sum(be, partial, &sum)) return -1;
    *loss = sum / (double)n;
    return 0;
}

__global__ void mse_bwd_k(void *dp, int dpt, const void *p, int pdt, const void *t, int tdt, const void *w, int wdt, float k,
                          int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float d = ld(p, pdt, i) - ld(t, tdt, i);
        acc(dp, dpt, i, k * (w ? ld(w, wdt, i) : 1.0f) * d);
    }
}

int cuda_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred, const sdt_tensor *target,
                           const sdt_tensor *weight)
{
    int64_t n = sdt_tensor_numel(pred);
    float k = 2.0f * dloss / (float)n;
    mse_bwd_k<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(dpred->data, dpred->dtype, pred->data, pred->dtype,
                                                                target->data, target->dtype, weight ? weight->data : NULL,
                                                                weight ? weight->dtype : 0, k, n);
    CUDA_LAUNCHED(be);
    return 0;
}

__global__ void sumsq_partial_k(const void *x, int dt, int64_t n, double *partial)
{
    double s = 0;
    GRID_STRIDE(i, n)
    {
        double v = ld(x, dt, i);
        s += v * v;
    }
    block_sum_store(s, partial);
}

int cuda_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    for (int k = 0; k < count; k++) {
        if (!tensors[k]) continue;
        sumsq_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(tensors[k]->data, tensors[k]->dtype,
                                                                            sdt_tensor_numel(tensors[k]), partial);
        CUDA_LAUNCHED(be);
        double s;
        if (finish_sum(be, partial, &s)) return -1;
        *sumsq += s;
    }
    return 0;
}

/* torch._amp_foreach_non_finite_check_and_unscale_: flag if any value is not finite, scale all. */
__global__ void unscale_k(void *g, int dt, int64_t n, float inv_scale, int *flag)
{
    int bad = 0;
    GRID_STRIDE(i, n)
    {
        float v = ld(g, dt, i);
        bad |= !isfinite(v);
        st(g, dt, i, v * inv_scale);
    }
    if (bad) *flag = 1;
}

int cuda_unscale_check(sdt_backend *be, sdt_tensor *const *grads, int count, float inv_scale, bool *found_inf)
{
    cuda_ctx *c = ctx_of(be);
    CUDA_TRY(be, cudaMemsetAsync(c->flag, 0, sizeof(int), c->stream));
    for (int k = 0; k < count; k++) {
        if (!grads[k]) continue;
        int64_t n = sdt_tensor_numel(grads[k]);
        unscale_k<<<grid_for(n, 256), 256, 0, c->stream>>>(grads[k]->data, grads[k]->dtype, n, inv_scale, c->flag);
        CUDA_LAUNCHED(be);
    }
    int h = 0;
    if (cuda_download(be, &h, c->flag, sizeof(int))) return -1;
    if (h) *found_inf = true; /* only ever set, like the CPU backend */
    return 0;
}

__global__ void adamw_k(float *p, const void *g, int gdt, float *m, float *v, int64_t n, float lr, float b1, float b2, float eps,
                        float wd, float step_size, float bc2_sqrt, float gscale)
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

int cuda_adamw_update(sdt_backend *be, sdt_tensor *param, const sdt_tensor *grad, sdt_tensor *m, sdt_tensor *v, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale)
{
    if (param->dtype != SDT_F32 || m->dtype != SDT_F32 || v->dtype != SDT_F32)
        return cuda_fail(be, "adamw: parameters and moments must be f32 master copies");
    if (step < 1) return cuda_fail(be, "adamw: step %lld must be >= 1", (long long)step);
    int64_t n = sdt_tensor_numel(param);
    double bc1 = 1.0 - pow((double)beta1, (double)step), bc2 = 1.0 - pow((double)beta2, (double)step);
    adamw_k<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>((float *)param->data, grad->data, grad->dtype, (float *)m->data,
                                                              (float *)v->data, n, lr, beta1, beta2, eps, weight_decay,
                                                              (float)(lr / bc1), (float)sqrt(bc2), grad_scale);
    CUDA_LAUNCHED(be);
    return 0;
}
