/* gated_activation.cu - out = act(gate) * up on the GPU (T5 v1.1's gated GELU). Semantics: kernels/ops.h;
 * the activation's value and derivative are shared_math.h's, as on the CPU. */
#include "cuda_ops.h"
#include "shared_math.h"

__global__ void gated_fwd_k(void *out, int odt, const void *gate, int gdt, const void *up, int udt, int64_t n,
                            sdt_activation act)
{
    GRID_STRIDE(i, n) st(out, odt, i, act_value(act, ld(gate, gdt, i)) * ld(up, udt, i));
}

__global__ void gated_bwd_k(void *dgate, int dgt, void *dup, int dut, const void *dout, int ddt, const void *gate,
                            int gdt, const void *up, int udt, int64_t n, sdt_activation act)
{
    GRID_STRIDE(i, n)
    {
        const float d = ld(dout, ddt, i), g = ld(gate, gdt, i);
        /* written, not accumulated (ops.h) */
        if (dgate) st(dgate, dgt, i, 0.0f + d * ld(up, udt, i) * act_derivative(act, g));
        if (dup) st(dup, dut, i, 0.0f + d * act_value(act, g));
    }
}

int cuda_gated_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *gate, const sdt_tensor *up,
                                  sdt_activation act)
{
    const int64_t n = sdt_tensor_numel(out);
    if (n == 0) return 0;
    gated_fwd_k LAUNCH(be, n)(out->data, out->dtype, gate->data, gate->dtype, up->data, up->dtype, n, act);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_gated_activation_backward(sdt_backend *be, sdt_tensor *dgate, sdt_tensor *dup, const sdt_tensor *dout,
                                   const sdt_tensor *gate, const sdt_tensor *up, sdt_activation act)
{
    const int64_t n = sdt_tensor_numel(gate);
    if ((!dgate && !dup) || n == 0) return 0;
    gated_bwd_k LAUNCH(be, n)(dgate ? dgate->data : NULL, dgate ? dgate->dtype : SDT_F32, dup ? dup->data : NULL,
                              dup ? dup->dtype : SDT_F32, dout->data, dout->dtype, gate->data, gate->dtype, up->data,
                              up->dtype, n, act);
    CUDA_LAUNCHED(be);
    return 0;
}
