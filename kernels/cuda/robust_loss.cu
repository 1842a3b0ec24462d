/* robust_loss.cu - the L1 and Huber losses and their gradient on the GPU; rho and rho' are
 * kernels/shared_math.h's, as on the CPU. Semantics: kernels/ops.h. */
#include "reduce.cuh"
#include "shared_math.h"

__global__ void robust_partial_k(const void *p, int pdt, const void *t, int tdt, const void *w, int wdt, int64_t n,
                                 sdt_robust_loss kind, float delta, double *partial)
{
    double s = 0;
    GRID_STRIDE(i, n)
    {
        float d = ld(p, pdt, i) - ld(t, tdt, i);
        s += (w ? (double)ld(w, wdt, i) : 1.0) * (double)robust_loss_value(kind, d, delta);
    }
    block_sum_store(s, partial);
}

int cuda_robust_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                             const sdt_tensor *weight, sdt_robust_loss kind, float delta)
{
    int64_t n = sdt_tensor_numel(pred);
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    robust_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(
        pred->data, pred->dtype, target->data, target->dtype, weight ? weight->data : NULL, weight ? weight->dtype : 0,
        n, kind, delta, partial);
    CUDA_LAUNCHED(be);
    double sum;
    if (cuda_finish_sum(be, partial, &sum)) return -1;
    *loss = sum / (double)n;
    return 0;
}

__global__ void robust_bwd_k(void *dp, int dpt, const void *p, int pdt, const void *t, int tdt, const void *w, int wdt,
                             float k, int64_t n, sdt_robust_loss kind, float delta)
{
    GRID_STRIDE(i, n)
    {
        float d = ld(p, pdt, i) - ld(t, tdt, i);
        acc(dp, dpt, i, k * (w ? ld(w, wdt, i) : 1.0f) * robust_loss_grad(kind, d, delta));
    }
}

int cuda_robust_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred,
                              const sdt_tensor *target, const sdt_tensor *weight, sdt_robust_loss kind, float delta)
{
    int64_t n = sdt_tensor_numel(pred);
    float k = (float)((double)dloss / (double)n);
    robust_bwd_k<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(
        dpred->data, dpred->dtype, pred->data, pred->dtype, target->data, target->dtype, weight ? weight->data : NULL,
        weight ? weight->dtype : 0, k, n, kind, delta);
    CUDA_LAUNCHED(be);
    return 0;
}
