/* add.cu - adds: tensors, a bias over rows or channels, a per-(batch, channel) vector on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

__global__ void add_k(void *out, int odt, const void *a, int adt, const void *b, int bdt, int64_t n)
{
    GRID_STRIDE(i, n) st(out, odt, i, ld(a, adt, i) + ld(b, bdt, i));
}

int cuda_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t n = sdt_tensor_numel(out);
    add_k LAUNCH(be, n)(out->data, out->dtype, a->data, a->dtype, b->data, b->dtype, n);
    CUDA_LAUNCHED(be);
    return 0;
}

/* Bias over rows of C values (S = 1) or over channels of S values (S > 1); see cuda_common.cuh. */
template <typename T, typename TB>
__global__ void bias_channels_k(T *y, const TB *bias, int64_t C, int64_t S)
{
    int64_t rc = blockIdx.x; /* r * C + c */
    float b = to_f32(bias[rc % C]);
    T *row = y + rc * S;
    for (int64_t s = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; s < S; s += (int64_t)gridDim.y * blockDim.x)
        row[s] = from_f32<T>(to_f32(row[s]) + b);
}
template <typename T, typename TB>
__global__ void bias_rows_k(T *y, const TB *bias, int64_t rows, int64_t C)
{
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        float b = to_f32(bias[c]);
        for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) y[r * C + c] = from_f32<T>(to_f32(y[r * C + c]) + b);
    }
}

int cuda_add_bias(sdt_backend *be, void *y, int ydt, const void *bias, int bdt, int64_t R, int64_t C, int64_t S)
{
    if (R * C * S == 0) return 0;
    if (R * C > INT32_MAX) return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "bias: %lld rows of channels exceed one launch", (long long)(R * C));
    if (S == 1) { /* threads along C, blocks of rows */
        dim3 grid((unsigned)((C + 255) / 256), (unsigned)(R < 65535 ? R : 65535));
        SDT_DTYPE_SWITCH(ydt, T, SDT_DTYPE_SWITCH(bdt, TB, bias_rows_k<T, TB><<<grid, 256, 0, STREAM(be)>>>(
                                                            (T *)y, (const TB *)bias, R, C)));
    } else { /* one block row per (r, c), spans of 256 values of s */
        int64_t spans = (S + 255) / 256;
        dim3 grid((unsigned)(R * C), (unsigned)(spans < 16 ? spans : 16));
        SDT_DTYPE_SWITCH(ydt, T, SDT_DTYPE_SWITCH(bdt, TB, bias_channels_k<T, TB><<<grid, 256, 0, STREAM(be)>>>(
                                                            (T *)y, (const TB *)bias, C, S)));
    }
    CUDA_LAUNCHED(be);
    return 0;
}

/* x [B, C, S] += v [B, C] */
__global__ void add_channel_k(void *x, int xdt, const void *v, int vdt, int64_t BC, int64_t S)
{
    GRID_STRIDE(i, BC * S) st(x, xdt, i, ld(x, xdt, i) + ld(v, vdt, i / S));
}
/* dv[bc] += sum_s dout[bc, s]: one block per (b, c). */
__global__ void add_channel_bwd_k(void *dv, int dvt, const void *dout, int dot, int64_t S)
{
    __shared__ float part[256];
    int64_t bc = blockIdx.x;
    float s = 0;
    for (int64_t k = threadIdx.x; k < S; k += blockDim.x) s += ld(dout, dot, bc * S + k);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) acc(dv, dvt, bc, part[0]);
}

int cuda_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    int64_t BC = x->shape[0] * x->shape[1], S = sdt_tensor_numel(x) / BC;
    add_channel_k LAUNCH(be, BC * S)(x->data, x->dtype, v->data, v->dtype, BC, S);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    if (!dv) return 0;
    int64_t BC = dout->shape[0] * dout->shape[1], S = sdt_tensor_numel(dout) / BC;
    add_channel_bwd_k<<<(unsigned)BC, 256, 0, STREAM(be)>>>(dv->data, dv->dtype, dout->data, dout->dtype, S);
    CUDA_LAUNCHED(be);
    return 0;
}
