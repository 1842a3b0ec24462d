/* softmax.cu - row softmax on the GPU (the op, and the row helpers attention's fp32 path
 * shares). Semantics: kernels/ops.h. */
#include "norm_stats.cuh"

/* causal_T > 0 masks column j > (row % causal_T): used by attention, rows are (b, h, i).
 * out2 (may be NULL) receives the same probabilities in another dtype, so attention gets its
 * fp32 copy and its 16-bit GEMM operand from one pass. In place (out == x) is safe: each
 * thread reads its elements before writing them. */
__global__ void softmax_k(void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t C, int64_t causal_T,
                          float scale)
{
    int64_t r = blockIdx.x, base = r * C;
    int64_t limit = causal_T > 0 ? (r % causal_T) + 1 : C;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < limit; c += NT) m = fmaxf(m, scale * ld(x, xdt, base + c));
    m = block_max(m);
    float s = 0;
    for (int64_t c = threadIdx.x; c < limit; c += NT) s += expf(scale * ld(x, xdt, base + c) - m);
    s = block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float p = c < limit ? expf(scale * ld(x, xdt, base + c) - m) / s : 0.0f;
        st(out, odt, base + c, p);
        if (out2) st(out2, o2dt, base + c, p);
    }
}

/* dx = scale * y * (dy - sum(dy * y)); accumulate when acc_mode, overwrite otherwise. */
__global__ void softmax_bwd_k(void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt, int64_t C,
                              float scale, int acc_mode)
{
    int64_t r = blockIdx.x, base = r * C;
    float s = 0;
    for (int64_t c = threadIdx.x; c < C; c += NT) s += ld(dy, dyt, base + c) * ld(y, ydt, base + c);
    s = block_sum(s);
    for (int64_t c = threadIdx.x; c < C; c += NT) {
        float v = scale * ld(y, ydt, base + c) * (ld(dy, dyt, base + c) - s);
        if (acc_mode)
            acc(dx, dxt, base + c, v);
        else
            st(dx, dxt, base + c, v);
    }
}

int cuda_softmax_rows(sdt_backend *be, void *out, int odt, void *out2, int o2dt, const void *x, int xdt, int64_t rows,
                      int64_t C, int64_t causal_T, float scale)
{
    softmax_k<<<(unsigned)rows, NT, 0, ctx_of(be)->stream>>>(out, odt, out2, o2dt, x, xdt, C, causal_T, scale);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_softmax_rows_backward(sdt_backend *be, void *dx, int dxt, const void *dy, int dyt, const void *y, int ydt,
                               int64_t rows, int64_t C, float scale, bool accumulate)
{
    softmax_bwd_k<<<(unsigned)rows, NT, 0, ctx_of(be)->stream>>>(dx, dxt, dy, dyt, y, ydt, C, scale, accumulate);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t C = x->shape[x->ndim - 1];
    return cuda_softmax_rows(be, out->data, out->dtype, NULL, 0, x->data, x->dtype, sdt_tensor_numel(x) / C, C, 0,
                             1.0f);
}

int cuda_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out)
{
    if (!dx) return 0;
    int64_t C = out->shape[out->ndim - 1];
    return cuda_softmax_rows_backward(be, dx->data, dx->dtype, dout->data, dout->dtype, out->data, out->dtype,
                                      sdt_tensor_numel(out) / C, C, 1.0f, true);
}
