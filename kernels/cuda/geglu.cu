/* geglu.cu - diffusers' GEGLU forward and backward on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "shared_math.h"

/* GEGLU: x [rows, 2C] -> out [rows, C] = value * gelu(gate), value first. */
__global__ void geglu_fwd_k(void *out, int odt, const void *x, int xdt, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, rows * C)
    {
        int64_t r = i / C, c = i % C;
        float v = ld(x, xdt, r * 2 * C + c), g = ld(x, xdt, r * 2 * C + C + c);
        st(out, odt, i, v * act_gelu(g));
    }
}
__global__ void geglu_bwd_k(void *dx, int dxt, const void *dout, int dot, const void *x, int xdt, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, rows * C)
    {
        int64_t r = i / C, c = i % C;
        float v = ld(x, xdt, r * 2 * C + c), g = ld(x, xdt, r * 2 * C + C + c), d = ld(dout, dot, i);
        acc(dx, dxt, r * 2 * C + c, d * act_gelu(g));
        acc(dx, dxt, r * 2 * C + C + c, d * v * act_gelu_grad(g));
    }
}

int cuda_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t C = out->shape[out->ndim - 1], rows = sdt_tensor_numel(out) / C;
    geglu_fwd_k LAUNCH(be, rows * C)(out->data, out->dtype, x->data, x->dtype, rows, C);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x)
{
    if (!dx) return 0;
    int64_t C = dout->shape[dout->ndim - 1], rows = sdt_tensor_numel(dout) / C;
    geglu_bwd_k LAUNCH(be, rows * C)(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, rows, C);
    CUDA_LAUNCHED(be);
    return 0;
}
