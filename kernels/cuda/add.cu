/* add.cu - adds: tensors, a bias over rows or channels, a per-(batch, channel) vector, and the
 * channel sums their backwards need, on the GPU. Semantics: kernels/ops.h. Every kernel moves
 * 16-byte vectors when its big tensors share a dtype and are aligned (vec_io.cuh). */
#include "column_sum.cuh"
#include "norm_stats.cuh"
#include "vec_io.cuh"

/* out may alias a or b: each element is read before it is written, by the same thread. */
template <typename T> __global__ void add_k(io<T> out, io<T> a, io<T> b, int64_t n)
{
    flat_vec_loop<T>(n, [&](int64_t i, auto w) {
        constexpr int V = decltype(w)::value;
        float fa[V], fb[V];
        a.load(i, fa);
        b.load(i, fb);
#pragma unroll
        for (int k = 0; k < V; k++) fa[k] += fb[k];
        out.store(i, fa);
    });
}

int cuda_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t n = sdt_tensor_numel(out);
    const void *ptrs[3] = {out->data, a->data, b->data};
    bool same = a->dtype == out->dtype && b->dtype == out->dtype && vec_ok(out->dtype, 0, ptrs, 3);
    SDT_IO_SWITCH(same, out->dtype, T,
                  add_k<T> LAUNCH(be, n / io<T>::VEC)(io_of<T>(out->data, out->dtype), io_of<T>(a->data, a->dtype),
                                                      io_of<T>(b->data, b->dtype), n));
    CUDA_LAUNCHED(be);
    return 0;
}

/* Bias over channels of S values: y [R, C, S] += bias[c]; block row rc = r * C + c, blockIdx.y a
 * span of vectors of s. */
template <typename T> __global__ void bias_channels_k(io<T> y, const void *bias, int bdt, int64_t C, int64_t S)
{
    constexpr int V = io<T>::VEC;
    int64_t rc = blockIdx.x, base = rc * S;
    float b = ld(bias, bdt, rc % C);
    for (int64_t u = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; u < S / V; u += (int64_t)gridDim.y * blockDim.x) {
        float f[V];
        y.load(base + u * V, f);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] += b;
        y.store(base + u * V, f);
    }
}
/* Bias over rows of C values (S = 1): threads along C (V columns each), blocks of rows. */
template <typename T> __global__ void bias_rows_k(io<T> y, const void *bias, int bdt, int64_t rows, int64_t C)
{
    constexpr int V = io<T>::VEC;
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < C / V; u += (int64_t)gridDim.x * blockDim.x) {
        float b[V];
#pragma unroll
        for (int k = 0; k < V; k++) b[k] = ld(bias, bdt, u * V + k);
        for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
            float f[V];
            y.load(r * C + u * V, f);
#pragma unroll
            for (int k = 0; k < V; k++) f[k] += b[k];
            y.store(r * C + u * V, f);
        }
    }
}

int cuda_add_bias(sdt_backend *be, void *y, int ydt, const void *bias, int bdt, int64_t R, int64_t C, int64_t S)
{
    if (R * C * S == 0) return 0;
    if (R * C > INT32_MAX)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "bias: %lld rows of channels exceed one launch",
                         (long long)(R * C));
    const void *ptrs[1] = {y};
    if (S == 1) { /* threads along C, blocks of rows */
        bool vec = vec_ok(ydt, C, ptrs, 1);
        int64_t units = C / (vec ? vec_width(ydt) : 1);
        dim3 grid((unsigned)((units + 255) / 256), (unsigned)(R < 65535 ? R : 65535));
        SDT_IO_SWITCH(vec, ydt, T, bias_rows_k<T><<<grid, 256, 0, STREAM(be)>>>(io_of<T>(y, ydt), bias, bdt, R, C));
    } else { /* one block row per (r, c), spans of 256 vectors of s */
        bool vec = vec_ok(ydt, S, ptrs, 1);
        int64_t spans = (S / (vec ? vec_width(ydt) : 1) + 255) / 256;
        dim3 grid((unsigned)(R * C), (unsigned)(spans < 16 ? spans : 16));
        SDT_IO_SWITCH(vec, ydt, T, bias_channels_k<T><<<grid, 256, 0, STREAM(be)>>>(io_of<T>(y, ydt), bias, bdt, C, S));
    }
    CUDA_LAUNCHED(be);
    return 0;
}

/* x [B, C, S] += v [B, C]: VEC values of one (b, c) row per thread. */
template <typename T> __global__ void add_channel_k(io<T> x, const void *v, int vdt, int64_t BC, int64_t S)
{
    constexpr int V = io<T>::VEC;
    const int64_t per_row = S / V;
    GRID_STRIDE(u, BC * per_row)
    {
        float f[V], b = ld(v, vdt, u / per_row);
        x.load(u * V, f);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] += b;
        x.store(u * V, f);
    }
}

/* Channels-last x [B, S, C] += v [B, C]: VEC consecutive channels of one pixel per thread. */
template <typename T>
__global__ void add_channel_nhwc_k(io<T> x, const void *v, int vdt, int64_t S, int64_t C, int64_t n_vectors)
{
    constexpr int V = io<T>::VEC;
    const int64_t per_row = C / V;
    GRID_STRIDE(u, n_vectors)
    {
        int64_t row = u / per_row, c0 = (u - row * per_row) * V, vb = row / S * C + c0;
        float f[V];
        x.load(row * C + c0, f);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] += ld(v, vdt, vb + k);
        x.store(row * C + c0, f);
    }
}

/* Column col = b * C + c of channels-last src [B, S, C] seen as S rows: the sums over pixels
 * per (batch, channel) are column sums (column_sum.cuh), read coalesced along c. */
struct nhwc_channel_value {
    const void *d;
    int dt;
    int64_t C, S;
    __device__ void operator()(int64_t r, int64_t col, float *v) const
    {
        int64_t b = col / C;
        v[0] = ld(d, dt, (b * S + r) * C + (col - b * C));
    }
};

int cuda_channel_sums_nhwc(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t B,
                           int64_t C, int64_t S)
{
    return column_sums<1>(be, dst, dst_dtype, NULL, 0, nhwc_channel_value{src, src_dtype, C, S}, S, B * C);
}

/* dst[c] += sum over b < B and s < S of src[(b * C + c) * S + s]: one block per c, batches in
 * order, a fixed tree over the block (deterministic). */
template <typename T>
__global__ void channel_sums_k(void *dst, int dst_dtype, io<T> src, int64_t B, int64_t C, int64_t S)
{
    constexpr int V = io<T>::VEC;
    int64_t c = blockIdx.x;
    float s = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t base = (b * C + c) * S;
        for (int64_t u = threadIdx.x; u < S / V; u += NT) {
            float f[V];
            src.load(base + u * V, f);
#pragma unroll
            for (int k = 0; k < V; k++) s += f[k];
        }
    }
    s = block_sum(s);
    if (threadIdx.x == 0) acc(dst, dst_dtype, c, s);
}

int cuda_channel_sums(sdt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, int64_t B, int64_t C,
                      int64_t S)
{
    if (C == 0) return 0;
    if (C > INT32_MAX)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "channel sums: %lld channels exceed one launch", (long long)C);
    const void *ptrs[1] = {src};
    bool vec = vec_ok(src_dtype, S, ptrs, 1);
    SDT_IO_SWITCH(vec, src_dtype, T,
                  channel_sums_k<T>
                  <<<(unsigned)C, NT, 0, STREAM(be)>>>(dst, dst_dtype, io_of<T>(src, src_dtype), B, C, S));
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    int64_t BC = x->shape[0] * x->shape[1], S = sdt_tensor_numel(x) / BC;
    const void *ptrs[1] = {x->data};
    if (BC * S == 0) return 0;
    if (x->channels_last) {
        int64_t C = x->shape[1];
        bool vec = vec_ok(x->dtype, C, ptrs, 1);
        SDT_IO_SWITCH(vec, x->dtype, T, {
            int64_t n = BC * S / io<T>::VEC;
            add_channel_nhwc_k<T> LAUNCH(be, n)(io_of<T>(x->data, x->dtype), v->data, v->dtype, S, C, n);
        });
        CUDA_LAUNCHED(be);
        return 0;
    }
    bool vec = vec_ok(x->dtype, S, ptrs, 1);
    SDT_IO_SWITCH(
        vec, x->dtype, T,
        add_channel_k<T> LAUNCH(be, BC * S / io<T>::VEC)(io_of<T>(x->data, x->dtype), v->data, v->dtype, BC, S));
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    if (!dv) return 0;
    int64_t BC = dout->shape[0] * dout->shape[1], S = sdt_tensor_numel(dout) / BC;
    if (dout->channels_last)
        return cuda_channel_sums_nhwc(be, dv->data, dv->dtype, dout->data, dout->dtype, dout->shape[0], dout->shape[1],
                                      S);
    return cuda_channel_sums(be, dv->data, dv->dtype, dout->data, dout->dtype, 1, BC, S);
}
