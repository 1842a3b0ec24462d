/* dropout.cu - inverted dropout with a counter-based mask on the GPU. Semantics: kernels/ops.h; the mask is
 * kernels/shared_math.h's, the CPU backend's bit for bit. */
#include "cuda_ops.h"
#include "shared_math.h"

__global__ void dropout_k(void *out, int odt, float *mask, const void *x, int xdt, float p, uint64_t seed, int64_t n)
{
    float keep = dropout_keep_scale(p);
    GRID_STRIDE(i, n)
    {
        float m = dropout_mask_at(seed, (uint64_t)i, p, keep);
        mask[i] = m;
        st(out, odt, i, ld(x, xdt, i) * m);
    }
}
__global__ void mul_acc_k(void *dx, int dxt, const void *dout, int dot, const float *mask, int64_t n)
{
    GRID_STRIDE(i, n) acc(dx, dxt, i, ld(dout, dot, i) * mask[i]);
}

int cuda_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p,
                         uint64_t seed)
{
    /* p == 1 drops everything, as on the CPU (shared_math.h's keep scale is 0 there) */
    int64_t n = sdt_tensor_numel(x);
    dropout_k LAUNCH(be, n)(out->data, out->dtype, (float *)mask->data, x->data, x->dtype, p, seed, n);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(dout);
    mul_acc_k LAUNCH(be, n)(dx->data, dx->dtype, dout->data, dout->dtype, (const float *)mask->data, n);
    CUDA_LAUNCHED(be);
    return 0;
}
