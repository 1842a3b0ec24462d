/* activation.cu - activations (every sdt_activation) forward and backward on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "shared_math.h"

__global__ void act_fwd_k(void *out, int odt, const void *x, int xdt, int act, int64_t n)
{
    GRID_STRIDE(i, n) st(out, odt, i, act_value((sdt_activation)act, ld(x, xdt, i)));
}
__global__ void act_bwd_k(void *dx, int dxt, const void *dout, int dot, const void *x, int xdt, int act, int64_t n)
{
    GRID_STRIDE(i, n) acc(dx, dxt, i, ld(dout, dot, i) * act_derivative((sdt_activation)act, ld(x, xdt, i)));
}

int cuda_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    int64_t n = sdt_tensor_numel(x);
    act_fwd_k LAUNCH(be, n)(out->data, out->dtype, x->data, x->dtype, act, n);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x, sdt_activation act)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(x);
    act_bwd_k LAUNCH(be, n)(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, act, n);
    CUDA_LAUNCHED(be);
    return 0;
}
