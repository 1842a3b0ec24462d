/* unscale_check.cu - the loss scaler's fused unscale and non-finite check on the GPU.
 * Semantics: kernels/ops.h. */
#include "cuda_ops.h"

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
