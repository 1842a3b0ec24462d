/* groupnorm.cu - torch.nn.GroupNorm, optionally followed by an activation, on the GPU.
 * Semantics: kernels/ops.h. */
#include "norm_stats.cuh"
#include "shared_math.h"

#define GN_SCRATCH_SLOT 7 /* groupnorm's per-channel statistics */

/* x [B, C, S]; a group is cpg consecutive channels: cpg*S contiguous values.
 * One block per (batch, channel), so even batch 1 fills the GPU (32 groups would be 32
 * blocks): the first kernel writes each channel's statistics (forward: mean and M2, two
 * passes over the channel; backward: the two sums dx needs), the second combines the
 * channels of its group in channel order (deterministic, no atomics) and writes its channel.
 * With an activation (SiLU), forward writes act(norm) and backward recomputes the normalised
 * value from x and the statistics (it is never stored). */

/* The gradient at the norm's output: dy through the activation at the normalised value n. */
__device__ __forceinline__ float gn_out_grad(sdt_activation act, float dy, float n)
{
    return act == SDT_ACT_IDENTITY ? dy : dy * act_derivative(act, n);
}

/* Chan's combination of cpg channels of S values each: group mean and rstd (biased variance). */
__device__ void gn_group_stats(const float2 *chan, int64_t c0, int64_t cpg, int64_t S, float eps, float *mean, float *rstd)
{
    float mu = 0;
    for (int64_t k = 0; k < cpg; k++) mu += chan[c0 + k].x;
    mu /= (float)cpg;
    float m2 = 0;
    for (int64_t k = 0; k < cpg; k++) {
        float d = chan[c0 + k].x - mu;
        m2 += chan[c0 + k].y + (float)S * d * d;
    }
    *mean = mu;
    *rstd = rsqrtf(m2 / (float)(cpg * S) + eps);
}

/* chan[b*C + c] = (mean, M2) of channel c of batch b. */
__global__ void gn_chan_stats_k(float2 *chan, const void *x, int xdt, int64_t S)
{
    int64_t base = (int64_t)blockIdx.x * S;
    float s = 0;
    for (int64_t i = threadIdx.x; i < S; i += NT) s += ld(x, xdt, base + i);
    float mu = block_sum(s) / (float)S, q = 0;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float d = ld(x, xdt, base + i) - mu;
        q += d * d;
    }
    q = block_sum(q);
    if (threadIdx.x == 0) chan[blockIdx.x] = make_float2(mu, q);
}

__global__ void gn_fwd_k(void *out, int odt, float *mean, float *rstd, const float2 *chan, const void *x, int xdt, const void *g,
                         int gdt, const void *b, int bdt, int64_t C, int64_t S, int G, float eps, sdt_activation act)
{
    int64_t bc = blockIdx.x, c = bc % C, cpg = C / G, base = bc * S;
    float mu, rs;
    gn_group_stats(chan, bc - c % cpg, cpg, S, eps, &mu, &rs);
    float scale = g ? ld(g, gdt, c) * rs : rs, shift = (b ? ld(b, bdt, c) : 0.0f) - mu * scale;
    if (act == SDT_ACT_IDENTITY) {
        for (int64_t i = threadIdx.x; i < S; i += NT) st(out, odt, base + i, ld(x, xdt, base + i) * scale + shift);
    } else {
        for (int64_t i = threadIdx.x; i < S; i += NT) st(out, odt, base + i, act_value(act, ld(x, xdt, base + i) * scale + shift));
    }
    if (threadIdx.x == 0 && c % cpg == 0) {
        int64_t bg = bc / cpg;
        mean[bg] = mu;
        rstd[bg] = rs;
    }
}

/* part[b*C + c] = (sum of dn*g, sum of dn*g*xhat) over channel c of batch b (dn: the gradient at the
 * norm's output). */
__global__ void gn_bwd_sums_k(float2 *part, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                              const void *b, int bdt, const float *mean, const float *rstd, int64_t C, int64_t S, int G,
                              sdt_activation act)
{
    int64_t bc = blockIdx.x, c = bc % C, bg = bc / (C / G), base = bc * S;
    float mu = mean[bg], rs = rstd[bg], gc = g ? ld(g, gdt, c) : 1.0f, s1 = 0, s2 = 0;
    float scale = gc * rs, shift = (b ? ld(b, bdt, c) : 0.0f) - mu * scale;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float xv = ld(x, xdt, base + i), d = gn_out_grad(act, ld(dy, dyt, base + i), xv * scale + shift);
        s1 += d;
        s2 += d * (xv - mu);
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    if (threadIdx.x == 0) part[bc] = make_float2(gc * s1, gc * s2 * rs);
}

__global__ void gn_bwd_dx_k(void *dx, int dxt, const void *dy, int dyt, const void *x, int xdt, const void *g, int gdt,
                            const void *b, int bdt, const float *mean, const float *rstd, const float2 *part, int64_t C,
                            int64_t S, int G, sdt_activation act)
{
    int64_t bc = blockIdx.x, c = bc % C, cpg = C / G, bg = bc / cpg, base = bc * S, c0 = bc - c % cpg;
    float m1 = 0, m2 = 0;
    for (int64_t k = 0; k < cpg; k++) {
        m1 += part[c0 + k].x;
        m2 += part[c0 + k].y;
    }
    float n = (float)(cpg * S), mu = mean[bg], rs = rstd[bg], gc = g ? ld(g, gdt, c) : 1.0f;
    m1 /= n;
    m2 /= n;
    float scale = gc * rs, shift = (b ? ld(b, bdt, c) : 0.0f) - mu * scale;
    for (int64_t i = threadIdx.x; i < S; i += NT) {
        float xv = ld(x, xdt, base + i), xh = (xv - mu) * rs;
        float d = gn_out_grad(act, ld(dy, dyt, base + i), xv * scale + shift);
        acc(dx, dxt, base + i, rs * (d * gc - m1 - xh * m2));
    }
}

/* One block per channel: sums over batch and spatial. */
__global__ void gn_bwd_params_k(void *dg, int dgt, void *db, int dbt, const void *dy, int dyt, const void *x, int xdt,
                                const void *g, int gdt, const void *beta, int betat, const float *mean, const float *rstd,
                                int64_t B, int64_t C, int64_t S, int G, sdt_activation act)
{
    int64_t c = blockIdx.x, grp = c / (C / G);
    float gc = g ? ld(g, gdt, c) : 1.0f, bc = beta ? ld(beta, betat, c) : 0.0f;
    float sg = 0, sb = 0;
    for (int64_t k = threadIdx.x; k < B * S; k += NT) {
        int64_t b = k / S, s = k % S, i = (b * C + c) * S + s;
        float xh = (ld(x, xdt, i) - mean[b * G + grp]) * rstd[b * G + grp];
        float d = gn_out_grad(act, ld(dy, dyt, i), xh * gc + bc);
        sg += d * xh;
        sb += d;
    }
    sg = block_sum(sg);
    sb = block_sum(sb);
    if (threadIdx.x == 0) {
        if (dg) acc(dg, dgt, c, sg);
        if (db) acc(db, dbt, c, sb);
    }
}

/* B, C and the spatial size of x (groups divide C: checked before the op runs, kernels/op_checks.c). */
static void gn_shape(const sdt_tensor *x, int64_t *B, int64_t *C, int64_t *S)
{
    *B = x->shape[0];
    *C = x->shape[1];
    *S = sdt_tensor_numel(x) / (*B * *C);
}

int cuda_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act)
{
    int64_t B, C, S;
    gn_shape(x, &B, &C, &S);
    float2 *chan = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(B * C) * sizeof(float2));
    if (!chan) return -1;
    cudaStream_t s = ctx_of(be)->stream;
    gn_chan_stats_k<<<(unsigned)(B * C), NT, 0, s>>>(chan, x->data, x->dtype, S);
    CUDA_LAUNCHED(be);
    gn_fwd_k<<<(unsigned)(B * C), NT, 0, s>>>(out->data, out->dtype, (float *)mean->data, (float *)rstd->data, chan, x->data,
                                              x->dtype, dat(gamma), dty(gamma), dat(beta), dty(beta), C, S, groups, eps, act);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout,
                            const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, const sdt_tensor *mean,
                            const sdt_tensor *rstd, int groups, sdt_activation act)
{
    if (act == SDT_ACT_IDENTITY) beta = NULL; /* the plain norm's gradient does not depend on beta */
    int64_t B, C, S;
    gn_shape(x, &B, &C, &S);
    cudaStream_t s = ctx_of(be)->stream;
    if (dx) {
        float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(B * C) * sizeof(float2));
        if (!part) return -1;
        gn_bwd_sums_k<<<(unsigned)(B * C), NT, 0, s>>>(part, dout->data, dout->dtype, x->data, x->dtype, dat(gamma), dty(gamma),
                                                       dat(beta), dty(beta), (const float *)mean->data,
                                                       (const float *)rstd->data, C, S, groups, act);
        CUDA_LAUNCHED(be);
        gn_bwd_dx_k<<<(unsigned)(B * C), NT, 0, s>>>(dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, dat(gamma),
                                                     dty(gamma), dat(beta), dty(beta), (const float *)mean->data,
                                                     (const float *)rstd->data, part, C, S, groups, act);
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        gn_bwd_params_k<<<(unsigned)C, NT, 0, s>>>(dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL,
                                                   dty(dbeta), dout->data, dout->dtype, x->data, x->dtype, dat(gamma),
                                                   dty(gamma), dat(beta), dty(beta), (const float *)mean->data,
                                                   (const float *)rstd->data, B, C, S, groups, act);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
