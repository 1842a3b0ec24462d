/* layernorm.cu - torch.nn.LayerNorm on the GPU, one warp per row. Semantics: kernels/ops.h. */
#include "column_sum.cuh"
#include "norm_stats.cuh"

/* One warp per row (LN_ROWS rows per block): the model's rows are 320-1280 values, too few for a
 * block each (a block's tree reductions cost more than the row). */
#define LN_ROWS (NT / 32)
__global__ void ln_fwd_k(void *out, int odt, float *mean, float *rstd, const void *x, int xdt, const void *g, int gdt,
                         const void *b, int bdt, int64_t N, int64_t C, float eps)
{
    int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32, base = r * C;
    int lane = threadIdx.x % 32;
    if (r >= N) return; /* the whole warp: no block-wide barrier follows */
    float s = 0;
    for (int64_t c = lane; c < C; c += 32) s += ld(x, xdt, base + c);
    float mu = warp_sum(s) / (float)C, q = 0;
    for (int64_t c = lane; c < C; c += 32) {
        float d = ld(x, xdt, base + c) - mu;
        q += d * d;
    }
    float rs = rsqrtf(warp_sum(q) / (float)C + eps);
    for (int64_t c = lane; c < C; c += 32) {
        float y = (ld(x, xdt, base + c) - mu) * rs;
        if (g) y = y * ld(g, gdt, c);
        if (b) y += ld(b, bdt, c);
        st(out, odt, base + c, y);
    }
    if (lane == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
}

__global__ void ln_bwd_dx_k(void *dx, int dxt, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                            const float *mean, const float *rstd, int64_t N, int64_t C)
{
    int64_t r = (int64_t)blockIdx.x * LN_ROWS + threadIdx.x / 32, base = r * C;
    int lane = threadIdx.x % 32;
    if (r >= N) return;
    float mu = mean[r], rs = rstd[r], s1 = 0, s2 = 0;
    for (int64_t c = lane; c < C; c += 32) {
        float dyg = ld(dy, dyt, base + c) * (g ? ld(g, gdt, c) : 1.0f);
        s1 += dyg;
        s2 += dyg * (ld(x, xdt, base + c) - mu) * rs;
    }
    float m1 = warp_sum(s1) / (float)C, m2 = warp_sum(s2) / (float)C;
    for (int64_t c = lane; c < C; c += 32) {
        float xh = (ld(x, xdt, base + c) - mu) * rs;
        float dyg = ld(dy, dyt, base + c) * (g ? ld(g, gdt, c) : 1.0f);
        acc(dx, dxt, base + c, rs * (dyg - m1 - xh * m2));
    }
}

/* gamma's and beta's gradients are column sums (column_sum.cuh) of dy * x_hat and of dy. */
struct ln_param_grad_value {
    const void *dy;
    int dyt;
    const void *x;
    int xdt;
    const float *mean, *rstd;
    int64_t C;
    __device__ void operator()(int64_t r, int64_t c, float *v) const
    {
        float d = ld(dy, dyt, r * C + c);
        v[0] = d * (ld(x, xdt, r * C + c) - mean[r]) * rstd[r];
        v[1] = d;
    }
};
int cuda_layernorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, float eps)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    if (N == 0) return 0;
    ln_fwd_k<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), NT, 0, ctx_of(be)->stream>>>(
        out->data, out->dtype, (float *)mean->data, (float *)rstd->data, x->data, x->dtype, dat(gamma), dty(gamma), dat(beta),
        dty(beta), N, C, eps);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_layernorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout,
                            const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *mean, const sdt_tensor *rstd)
{
    int64_t C = x->shape[x->ndim - 1], N = sdt_tensor_numel(x) / C;
    cudaStream_t s = ctx_of(be)->stream;
    if (dx && N > 0) {
        ln_bwd_dx_k<<<(unsigned)((N + LN_ROWS - 1) / LN_ROWS), NT, 0, s>>>(dx->data, dx->dtype, dout->data, dout->dtype, x->data,
                                                                          x->dtype, dat(gamma), dty(gamma),
                                                                          (const float *)mean->data, (const float *)rstd->data,
                                                                          N, C);
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        ln_param_grad_value value{dout->data, dout->dtype, x->data, x->dtype, (const float *)mean->data,
                                  (const float *)rstd->data, C};
        if (column_sums<2>(be, dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL, dty(dbeta), value, N, C))
            return -1;
    }
    return 0;
}
