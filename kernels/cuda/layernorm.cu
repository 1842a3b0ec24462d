/* layernorm.cu - torch.nn.LayerNorm on the GPU, one warp per row. Semantics: kernels/ops.h. */
#include "column_sum.cuh"
#include "norm_stats.cuh"
#include "vec_io.cuh"

/* One warp per row (LN_ROWS rows per block): the model's rows are 320-1280 values, too few for a
 * block each (a block's reductions cost more than the row). A lane walks its row in 16-byte
 * vectors (vec_io.cuh): the statistics in one pass (Welford per vector, Chan's formula across
 * lanes in a fixed order), then the row again for the output, which the warp has just read
 * (it comes from L1/L2, not from memory). gamma and beta (TP) are read in vectors too when they
 * share x's dtype (the model's case), else element by element (TP = void). */
#define LN_ROWS (NT / 32)

/* V values of gamma (1 where absent) and beta (0 where absent) from column c. */
template <typename TP, int V>
__device__ __forceinline__ void ln_params(const io<TP> &g, const io<TP> &b, int64_t c, float (&gf)[V], float (&bf)[V])
{
    if (g.p)
        g.load(c, gf);
    else
#pragma unroll
        for (int k = 0; k < V; k++) gf[k] = 1.0f;
    if (b.p)
        b.load(c, bf);
    else
#pragma unroll
        for (int k = 0; k < V; k++) bf[k] = 0.0f;
}

template <typename T, typename TP>
__global__ void ln_fwd_k(io<T> out, float *mean, float *rstd, io<T> x, io<TP> g, io<TP> b, int64_t N, int64_t C,
                         float eps)
{
    constexpr int V = io<T>::VEC;
    int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32, base = r * C, units = C / V;
    int lane = threadIdx.x % 32;
    if (r >= N) return; /* the whole warp: no block-wide barrier follows */
    mstat m{0, 0, 0};
    for (int64_t u = lane; u < units; u += 32) {
        float f[V];
        x.load(base + u * V, f);
        m = mstat_combine(m, mstat_of<V>(f));
    }
    m = warp_mstat(m);
    float mu = m.mean, rs = rsqrtf(m.m2 / (float)C + eps);
    for (int64_t u = lane; u < units; u += 32) {
        float f[V], gf[V], bf[V];
        x.load(base + u * V, f);
        ln_params<TP, V>(g, b, u * V, gf, bf);
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = (f[k] - mu) * rs * gf[k] + bf[k];
        out.store(base + u * V, f);
    }
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

template <typename T, typename TP>
__global__ void ln_bwd_dx_k(io<T> dx, io<T> dy, io<T> x, io<TP> g, const float *mean, const float *rstd, int64_t N,
                            int64_t C)
{
    constexpr int V = io<T>::VEC;
    int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32, base = r * C, units = C / V;
    int lane = threadIdx.x % 32;
    if (r >= N) return;
    float mu = mean[r], rs = rstd[r];
    float2 s = make_float2(0, 0);
    for (int64_t u = lane; u < units; u += 32) {
        float xf[V], df[V], gf[V], unused[V];
        x.load(base + u * V, xf);
        dy.load(base + u * V, df);
        ln_params<TP, V>(g, io<TP>{}, u * V, gf, unused);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float dyg = df[k] * gf[k];
            s.x += dyg;
            s.y += dyg * (xf[k] - mu) * rs;
        }
    }
    s = warp_sum2(s);
    float m1 = s.x / (float)C, m2 = s.y / (float)C;
    for (int64_t u = lane; u < units; u += 32) {
        float xf[V], df[V], dxf[V], gf[V], unused[V];
        x.load(base + u * V, xf);
        dy.load(base + u * V, df);
        dx.load(base + u * V, dxf);
        ln_params<TP, V>(g, io<TP>{}, u * V, gf, unused);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float xh = (xf[k] - mu) * rs, dyg = df[k] * gf[k];
            dxf[k] += rs * (dyg - m1 - xh * m2);
        }
        dx.store(base + u * V, dxf);
    }
}

/* gamma's and beta's gradients are column sums (column_sum.cuh) of dy * x_hat and of dy. */
template <typename T> struct ln_param_grad_value {
    io<T> dy, x;
    const float *mean, *rstd;
    int64_t C;
    __device__ void operator()(int64_t r, int64_t c, float *v) const
    {
        float d = dy.get(r * C + c);
        v[0] = d * (x.get(r * C + c) - mean[r]) * rstd[r];
        v[1] = d;
    }
};

static unsigned ln_blocks(int64_t N)
{
    return (unsigned)((N + LN_ROWS - 1) / LN_ROWS);
}

/* Whether gamma and beta (either may be NULL) can be read as io<T> beside x of dtype: same dtype,
 * 16-byte aligned (C is a multiple of the vector width already). */
static bool ln_params_typed(int dtype, const sdt_tensor *gamma, const sdt_tensor *beta)
{
    const void *ptrs[2] = {dat(gamma), dat(beta)};
    return (!gamma || gamma->dtype == dtype) && (!beta || beta->dtype == dtype) && vec_ok(dtype, 0, ptrs, 2);
}

template <typename T, typename TP>
static void ln_fwd_launch(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                          const sdt_tensor *gamma, const sdt_tensor *beta, int64_t N, int64_t C, float eps)
{
    ln_fwd_k<T, TP><<<ln_blocks(N), NT, 0, STREAM(be)>>>(
        io_of<T>(out->data, out->dtype), (float *)mean->data, (float *)rstd->data, io_of<T>(x->data, x->dtype),
        io_of<TP>(dat(gamma), dty(gamma)), io_of<TP>(dat(beta), dty(beta)), N, C, eps);
}
template <typename T, typename TP>
static void ln_bwd_launch(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x,
                          const sdt_tensor *gamma, const float *mean, const float *rstd, int64_t N, int64_t C)
{
    ln_bwd_dx_k<T, TP><<<ln_blocks(N), NT, 0, STREAM(be)>>>(
        io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype),
        io_of<TP>(dat(gamma), dty(gamma)), mean, rstd, N, C);
}

int cuda_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    if (N == 0) return 0;
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, C, ptrs, 2);
    if (same && ln_params_typed(x->dtype, gamma, beta)) {
        SDT_DTYPE_SWITCH(x->dtype, T, ln_fwd_launch<T, T>(be, out, mean, rstd, x, gamma, beta, N, C, eps));
    } else {
        SDT_IO_SWITCH(same, x->dtype, T, ln_fwd_launch<T, void>(be, out, mean, rstd, x, gamma, beta, N, C, eps));
    }
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                            const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                            const sdt_tensor *mean, const sdt_tensor *rstd)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    const float *mp = (const float *)mean->data, *rp = (const float *)rstd->data;
    if (dx && N > 0) {
        const void *ptrs[3] = {dx->data, dout->data, x->data};
        bool same = dx->dtype == x->dtype && dout->dtype == x->dtype && vec_ok(x->dtype, C, ptrs, 3);
        if (same && ln_params_typed(x->dtype, gamma, NULL)) {
            SDT_DTYPE_SWITCH(x->dtype, T, ln_bwd_launch<T, T>(be, dx, dout, x, gamma, mp, rp, N, C));
        } else {
            SDT_IO_SWITCH(same, x->dtype, T, ln_bwd_launch<T, void>(be, dx, dout, x, gamma, mp, rp, N, C));
        }
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        /* element reads, not vectors: the column sums walk columns across lanes */
        bool same = dout->dtype == x->dtype;
        int rc = 0;
        SDT_IO_SWITCH(same, x->dtype, T, {
            ln_param_grad_value<T> value{io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype), mp, rp, C};
            rc = column_sums<2>(be, dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL, dty(dbeta),
                                value, N, C);
        });
        if (rc) return -1;
    }
    return 0;
}
