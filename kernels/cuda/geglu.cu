/* geglu.cu - diffusers' GEGLU forward and backward on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "shared_math.h"
#include "vec_io.cuh"

/* GEGLU: x [rows, 2C] -> out [rows, C] = value * gelu(gate), value first. Each thread takes
 * VEC consecutive columns of one row (16-byte accesses, vec_io.cuh). */
template <typename T> __global__ void geglu_fwd_k(io<T> out, io<T> x, int64_t rows, int64_t C)
{
    constexpr int V = io<T>::VEC;
    const int64_t per_row = C / V;
    GRID_STRIDE(u, rows * per_row)
    {
        int64_t r = u / per_row, c = (u - r * per_row) * V;
        float v[V], g[V];
        x.load(r * 2 * C + c, v);
        x.load(r * 2 * C + C + c, g);
#pragma unroll
        for (int k = 0; k < V; k++) v[k] *= act_gelu(g[k]);
        out.store(u * V, v);
    }
}
template <typename T> __global__ void geglu_bwd_k(io<T> dx, io<T> dout, io<T> x, int64_t rows, int64_t C)
{
    constexpr int V = io<T>::VEC;
    const int64_t per_row = C / V;
    GRID_STRIDE(u, rows * per_row)
    {
        int64_t r = u / per_row, c = (u - r * per_row) * V, vi = r * 2 * C + c, gi = vi + C;
        float v[V], g[V], d[V], dv[V], dg[V];
        x.load(vi, v);
        x.load(gi, g);
        dout.load(u * V, d);
#pragma unroll
        for (int k = 0; k < V; k++) { /* dx is written, never read (ops.h) */
            dv[k] = d[k] * act_gelu(g[k]);
            dg[k] = d[k] * v[k] * act_gelu_grad(g[k]);
        }
        dx.store(vi, dv);
        dx.store(gi, dg);
    }
}

int cuda_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t C = out->shape[out->ndim - 1], rows = sdt_tensor_numel(out) / C;
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, C, ptrs, 2);
    int64_t units = rows * C / (same ? vec_width(x->dtype) : 1);
    SDT_IO_SWITCH(
        same, x->dtype, T,
        geglu_fwd_k<T> LAUNCH(be, units)(io_of<T>(out->data, out->dtype), io_of<T>(x->data, x->dtype), rows, C));
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x)
{
    if (!dx) return 0;
    int64_t C = dout->shape[dout->ndim - 1], rows = sdt_tensor_numel(dout) / C;
    const void *ptrs[3] = {dx->data, dout->data, x->data};
    bool same = dx->dtype == x->dtype && dout->dtype == x->dtype && vec_ok(x->dtype, C, ptrs, 3);
    int64_t units = rows * C / (same ? vec_width(x->dtype) : 1);
    SDT_IO_SWITCH(same, x->dtype, T,
                  geglu_bwd_k<T> LAUNCH(be, units)(io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype),
                                                   io_of<T>(x->data, x->dtype), rows, C));
    CUDA_LAUNCHED(be);
    return 0;
}
