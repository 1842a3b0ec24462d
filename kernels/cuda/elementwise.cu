/* elementwise.cu - activations, GEGLU, adds, concat, upsample, dropout and the
 * timestep embedding on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

#define STREAM(be) ctx_of(be)->stream
#define LAUNCH(be, n) <<<grid_for((n), 256), 256, 0, STREAM(be)>>>

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* value and derivative of each activation, fp32 */
__device__ float act_f(int act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0 ? x : 0;
    case SDT_ACT_LEAKY_RELU: return x > 0 ? x : 0.01f * x;
    case SDT_ACT_ELU: return x > 0 ? x : expm1f(x);
    case SDT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case SDT_ACT_QUICK_GELU: return x * sigmoidf_(1.702f * x);
    case SDT_ACT_SILU: return x * sigmoidf_(x);
    case SDT_ACT_TANH: return tanhf(x);
    case SDT_ACT_SIGMOID: return sigmoidf_(x);
    case SDT_ACT_MISH: return x * tanhf(log1pf(expf(x)));
    case SDT_ACT_HARDSWISH: return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
    case SDT_ACT_HARDSIGMOID: return x <= -3.0f ? 0.0f : x >= 3.0f ? 1.0f : x / 6.0f + 0.5f;
    case SDT_ACT_HARDTANH: return fminf(fmaxf(x, -1.0f), 1.0f);
    case SDT_ACT_RELU6: return fminf(fmaxf(x, 0.0f), 6.0f);
    case SDT_ACT_SELU: return 1.0507009873554804934f * (x > 0 ? x : 1.6732632423543772848f * expm1f(x));
    case SDT_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    case SDT_ACT_SOFTSIGN: return x / (1.0f + fabsf(x));
    case SDT_ACT_TANHSHRINK: return (float)((double)x - tanh((double)x)); /* cancels in float near 0 */
    case SDT_ACT_LOGSIGMOID: return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
    case SDT_ACT_HARDSHRINK: return fabsf(x) > 0.5f ? x : 0.0f;
    case SDT_ACT_SOFTSHRINK: return x > 0.5f ? x - 0.5f : x < -0.5f ? x + 0.5f : 0.0f;
    default: return x;
    }
}

__device__ float act_df(int act, float x)
{
    switch (act) {
    case SDT_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case SDT_ACT_LEAKY_RELU: return x > 0 ? 1.0f : 0.01f;
    case SDT_ACT_ELU: return x > 0 ? 1.0f : expf(x);
    case SDT_ACT_GELU: {
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
        return cdf + x * pdf;
    }
    case SDT_ACT_QUICK_GELU: {
        float s = sigmoidf_(1.702f * x);
        return s + 1.702f * x * s * (1.0f - s);
    }
    case SDT_ACT_SILU: {
        float s = sigmoidf_(x);
        return s * (1.0f + x * (1.0f - s));
    }
    case SDT_ACT_TANH: {
        float t = tanhf(x);
        return 1.0f - t * t;
    }
    case SDT_ACT_SIGMOID: {
        float s = sigmoidf_(x);
        return s * (1.0f - s);
    }
    case SDT_ACT_MISH: {
        float sp = log1pf(expf(x)), t = tanhf(sp);
        return t + x * (1.0f - t * t) * sigmoidf_(x);
    }
    case SDT_ACT_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? x / 3.0f + 0.5f : 1.0f;
    case SDT_ACT_HARDSIGMOID: return x > -3.0f && x < 3.0f ? 1.0f / 6.0f : 0.0f;
    case SDT_ACT_HARDTANH: return x > -1.0f && x < 1.0f ? 1.0f : 0.0f;
    case SDT_ACT_RELU6: return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    case SDT_ACT_SELU: return x > 0 ? 1.0507009873554804934f : 1.0507009873554804934f * 1.6732632423543772848f * expf(x);
    case SDT_ACT_SOFTPLUS: return x > 20.0f ? 1.0f : sigmoidf_(x);
    case SDT_ACT_SOFTSIGN: {
        float d = 1.0f + fabsf(x);
        return 1.0f / (d * d);
    }
    case SDT_ACT_TANHSHRINK: {
        float t = tanhf(x);
        return t * t;
    }
    case SDT_ACT_LOGSIGMOID: return sigmoidf_(-x);
    case SDT_ACT_HARDSHRINK:
    case SDT_ACT_SOFTSHRINK: return fabsf(x) > 0.5f ? 1.0f : 0.0f;
    default: return 1.0f;
    }
}

__global__ void act_fwd_k(void *out, int odt, const void *x, int xdt, int act, int64_t n)
{
    GRID_STRIDE(i, n) st(out, odt, i, act_f(act, ld(x, xdt, i)));
}
__global__ void act_bwd_k(void *dx, int dxt, const void *dout, int dot, const void *x, int xdt, int act, int64_t n)
{
    GRID_STRIDE(i, n) acc(dx, dxt, i, ld(dout, dot, i) * act_df(act, ld(x, xdt, i)));
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

/* GEGLU: x [rows, 2C] -> out [rows, C] = value * gelu(gate), value first. */
__global__ void geglu_fwd_k(void *out, int odt, const void *x, int xdt, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, rows * C)
    {
        int64_t r = i / C, c = i % C;
        float v = ld(x, xdt, r * 2 * C + c), g = ld(x, xdt, r * 2 * C + C + c);
        st(out, odt, i, v * act_f(SDT_ACT_GELU, g));
    }
}
__global__ void geglu_bwd_k(void *dx, int dxt, const void *dout, int dot, const void *x, int xdt, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, rows * C)
    {
        int64_t r = i / C, c = i % C;
        float v = ld(x, xdt, r * 2 * C + c), g = ld(x, xdt, r * 2 * C + C + c), d = ld(dout, dot, i);
        acc(dx, dxt, r * 2 * C + c, d * act_f(SDT_ACT_GELU, g));
        acc(dx, dxt, r * 2 * C + C + c, d * v * act_df(SDT_ACT_GELU, g));
    }
}

int cuda_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t C = out->shape[out->ndim - 1], rows = sdt_tensor_numel(out) / C;
    if (x->shape[x->ndim - 1] != 2 * C) return cuda_fail(be, "geglu: input last dim %lld is not twice the output's %lld",
                                                         (long long)x->shape[x->ndim - 1], (long long)C);
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

__global__ void add_k(void *out, int odt, const void *a, int adt, const void *b, int bdt, int64_t n)
{
    GRID_STRIDE(i, n) st(out, odt, i, ld(a, adt, i) + ld(b, bdt, i));
}

int cuda_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t n = sdt_tensor_numel(out);
    if (n != sdt_tensor_numel(a) || n != sdt_tensor_numel(b)) return cuda_fail(be, "add: element counts differ");
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
    if (R * C > INT32_MAX) return cuda_fail(be, "bias: %lld rows of channels exceed one launch", (long long)(R * C));
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
    if (sdt_tensor_numel(v) != BC) return cuda_fail(be, "add_channel: vector has %lld values, want B*C = %lld",
                                                    (long long)sdt_tensor_numel(v), (long long)BC);
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

/* out [B, Ca+Cb, S] from a [B, Ca, S] and b [B, Cb, S]; backward=1 splits dout back, accumulating. */
__global__ void concat_k(void *out, int odt, void *a, int adt, void *b, int bdt, int64_t B, int64_t Ca, int64_t Cb, int64_t S,
                         int backward)
{
    int64_t C = Ca + Cb;
    GRID_STRIDE(i, B * C * S)
    {
        int64_t bi = i / (C * S), r = i % (C * S), c = r / S, s = r % S;
        void *src = c < Ca ? a : b;
        int sdt = c < Ca ? adt : bdt;
        int64_t j = c < Ca ? (bi * Ca + c) * S + s : (bi * Cb + (c - Ca)) * S + s;
        if (!backward) st(out, odt, i, ld(src, sdt, j));
        else if (src) acc(src, sdt, j, ld(out, odt, i));
    }
}

int cuda_concat_channels_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t B = a->shape[0], Ca = a->shape[1], Cb = b->shape[1], S = sdt_tensor_numel(a) / (B * Ca);
    if (sdt_tensor_numel(out) != B * (Ca + Cb) * S) return cuda_fail(be, "concat_channels: output size does not match inputs");
    concat_k LAUNCH(be, B * (Ca + Cb) * S)(out->data, out->dtype, a->data, a->dtype, b->data, b->dtype, B, Ca, Cb, S, 0);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_concat_channels_backward(sdt_backend *be, sdt_tensor *da, sdt_tensor *db, const sdt_tensor *dout)
{
    int64_t B = dout->shape[0], C = dout->shape[1], S = sdt_tensor_numel(dout) / (B * C);
    int64_t Ca = da ? da->shape[1] : C - db->shape[1], Cb = C - Ca;
    concat_k LAUNCH(be, B * C * S)(dout->data, dout->dtype, da ? da->data : NULL, da ? da->dtype : 0, db ? db->data : NULL,
                                  db ? db->dtype : 0, B, Ca, Cb, S, 1);
    CUDA_LAUNCHED(be);
    return 0;
}

/* out [BC, 2H, 2W] = x [BC, H, W] repeated; backward sums 2x2 blocks of dout. */
__global__ void upsample_k(void *out, int odt, const void *x, int xdt, int64_t BC, int64_t H, int64_t W)
{
    GRID_STRIDE(i, BC * 4 * H * W)
    {
        int64_t bc = i / (4 * H * W), r = i % (4 * H * W), oy = r / (2 * W), ox = r % (2 * W);
        st(out, odt, i, ld(x, xdt, (bc * H + oy / 2) * W + ox / 2));
    }
}
__global__ void upsample_bwd_k(void *dx, int dxt, const void *dout, int dot, int64_t BC, int64_t H, int64_t W)
{
    GRID_STRIDE(i, BC * H * W)
    {
        int64_t bc = i / (H * W), r = i % (H * W), y = r / W, x = r % W;
        int64_t base = bc * 4 * H * W;
        float s = ld(dout, dot, base + (2 * y) * 2 * W + 2 * x) + ld(dout, dot, base + (2 * y) * 2 * W + 2 * x + 1) +
                  ld(dout, dot, base + (2 * y + 1) * 2 * W + 2 * x) + ld(dout, dot, base + (2 * y + 1) * 2 * W + 2 * x + 1);
        acc(dx, dxt, i, s);
    }
}

int cuda_upsample_nearest2x_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t H = x->shape[x->ndim - 2], W = x->shape[x->ndim - 1], BC = sdt_tensor_numel(x) / (H * W);
    if (sdt_tensor_numel(out) != 4 * BC * H * W) return cuda_fail(be, "upsample_nearest2x: output is not 2H x 2W");
    upsample_k LAUNCH(be, 4 * BC * H * W)(out->data, out->dtype, x->data, x->dtype, BC, H, W);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_upsample_nearest2x_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout)
{
    if (!dx) return 0;
    int64_t H = dx->shape[dx->ndim - 2], W = dx->shape[dx->ndim - 1], BC = sdt_tensor_numel(dx) / (H * W);
    upsample_bwd_k LAUNCH(be, BC * H * W)(dx->data, dx->dtype, dout->data, dout->dtype, BC, H, W);
    CUDA_LAUNCHED(be);
    return 0;
}

/* Counter-based uniform per element (splitmix64 of seed and index): reproducible, order free. */
__device__ float uniform_at(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}
__global__ void dropout_k(void *out, int odt, float *mask, const void *x, int xdt, float p, uint64_t seed, int64_t n)
{
    float keep = 1.0f / (1.0f - p);
    GRID_STRIDE(i, n)
    {
        float m = uniform_at(seed, (uint64_t)i) < p ? 0.0f : keep;
        mask[i] = m;
        st(out, odt, i, ld(x, xdt, i) * m);
    }
}
__global__ void mul_acc_k(void *dx, int dxt, const void *dout, int dot, const float *mask, int64_t n)
{
    GRID_STRIDE(i, n) acc(dx, dxt, i, ld(dout, dot, i) * mask[i]);
}

int cuda_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed)
{
    if (!(p >= 0 && p < 1)) return cuda_fail(be, "dropout: probability %g is outside [0, 1)", p);
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

__global__ void timestep_k(void *out, int odt, const void *t, int tdt, int64_t B, int64_t dim, int flip, float shift,
                           float log_max_period)
{
    int64_t half = dim / 2;
    GRID_STRIDE(i, B * dim)
    {
        int64_t b = i / dim, j = i % dim;
        float v = 0;
        if (j < 2 * half) {
            int64_t k = j % half;
            float freq = expf(-log_max_period * (float)k / ((float)half - shift));
            float arg = ld(t, tdt, b) * freq;
            bool first = j < half; /* [sin, cos], or [cos, sin] when flipped */
            v = (first != (flip != 0)) ? sinf(arg) : cosf(arg);
        }
        st(out, odt, i, v);
    }
}

int cuda_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                            float downscale_freq_shift, float max_period)
{
    int64_t B = sdt_tensor_numel(t), dim = out->shape[out->ndim - 1];
    timestep_k LAUNCH(be, B * dim)(out->data, out->dtype, t->data, t->dtype, B, dim, flip_sin_to_cos, downscale_freq_shift,
                                   logf(max_period));
    CUDA_LAUNCHED(be);
    return 0;
}
