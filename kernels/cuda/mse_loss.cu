/* mse_loss.cu - the (weighted) MSE loss and its gradient on the GPU. Semantics: kernels/ops.h. */
#include "reduce.cuh"

__global__ void mse_partial_k(const void *p, int pdt, const void *t, int tdt, const void *w, int wdt, int64_t n,
                              double *partial)
{
    double s = 0;
    GRID_STRIDE(i, n)
    {
        double d = (double)ld(p, pdt, i) - (double)ld(t, tdt, i);
        s += (w ? (double)ld(w, wdt, i) : 1.0) * d * d;
    }
    block_sum_store(s, partial);
}

int cuda_mse_loss_forward(sdt_backend *be, double *loss, const sdt_tensor *pred, const sdt_tensor *target,
                          const sdt_tensor *weight)
{
    int64_t n = sdt_tensor_numel(pred);
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    mse_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(pred->data, pred->dtype, target->data,
                                                                      target->dtype, weight ? weight->data : NULL,
                                                                      weight ? weight->dtype : 0, n, partial);
    CUDA_LAUNCHED(be);
    double sum;
    if (cuda_finish_sum(be, partial, &sum)) return -1;
    *loss = sum / (double)n;
    return 0;
}

__global__ void mse_bwd_k(void *dp, int dpt, const void *p, int pdt, const void *t, int tdt, const void *w, int wdt,
                          float k, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float d = ld(p, pdt, i) - ld(t, tdt, i);
        acc(dp, dpt, i, k * (w ? ld(w, wdt, i) : 1.0f) * d);
    }
}

int cuda_mse_loss_backward(sdt_backend *be, sdt_tensor *dpred, float dloss, const sdt_tensor *pred,
                           const sdt_tensor *target, const sdt_tensor *weight)
{
    int64_t n = sdt_tensor_numel(pred);
    float k = 2.0f * dloss / (float)n;
    mse_bwd_k<<<grid_for(n, 256), 256, 0, ctx_of(be)->stream>>>(
        dpred->data, dpred->dtype, pred->data, pred->dtype, target->data, target->dtype, weight ? weight->data : NULL,
        weight ? weight->dtype : 0, k, n);
    CUDA_LAUNCHED(be);
    return 0;
}
