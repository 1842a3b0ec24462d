/* activation.cu - activations (every sdt_activation) forward and backward on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "shared_math.h"
#include "vec_io.cuh"

/* Flat over n elements in 16-byte vectors when every tensor shares a dtype (vec_io.cuh). */
template <typename T> __global__ void act_fwd_k(io<T> out, io<T> x, int act, int64_t n)
{
    flat_vec_loop<T>(n, [&](int64_t i, auto w) {
        constexpr int V = decltype(w)::value;
        float f[V];
        x.load(i, f);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = act_value((sdt_activation)act, f[k]);
        out.store(i, f);
    });
}
template <typename T> __global__ void act_bwd_k(io<T> dx, io<T> dout, io<T> x, int act, int64_t n)
{
    flat_vec_loop<T>(n, [&](int64_t i, auto w) {
        constexpr int V = decltype(w)::value;
        float f[V], d[V], g[V];
        x.load(i, f);
        dout.load(i, d);
        dx.load(i, g);
#pragma unroll
        for (int k = 0; k < V; k++) g[k] += d[k] * act_derivative((sdt_activation)act, f[k]);
        dx.store(i, g);
    });
}

int cuda_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    int64_t n = sdt_tensor_numel(x);
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, 0, ptrs, 2);
    SDT_IO_SWITCH(
        same, x->dtype, T,
        act_fwd_k<T> LAUNCH(be, n / io<T>::VEC)(io_of<T>(out->data, out->dtype), io_of<T>(x->data, x->dtype), act, n));
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x,
                             sdt_activation act)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(x);
    const void *ptrs[3] = {dx->data, dout->data, x->data};
    bool same = dx->dtype == x->dtype && dout->dtype == x->dtype && vec_ok(x->dtype, 0, ptrs, 3);
    SDT_IO_SWITCH(same, x->dtype, T,
                  act_bwd_k<T> LAUNCH(be, n / io<T>::VEC)(io_of<T>(dx->data, dx->dtype),
                                                          io_of<T>(dout->data, dout->dtype),
                                                          io_of<T>(x->data, x->dtype), act, n));
    CUDA_LAUNCHED(be);
    return 0;
}
