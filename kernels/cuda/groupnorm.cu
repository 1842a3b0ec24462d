/* groupnorm.cu - torch.nn.GroupNorm, optionally followed by an activation, on the GPU.
 * Semantics: kernels/ops.h. */
#include "groupnorm_act.cuh"
#include "norm_stats.cuh"
#include "shared_math.h"
#include "vec_io.cuh"

/* x [B, C, S] (channels-last x: groupnorm_nhwc.cu); a group is cpg consecutive channels: cpg*S contiguous values.
 * Work is cut into chunks of a channel: block (b, c, k) owns chunk k of channel c of batch b
 * (K chunks per channel, more when B x C alone would leave the GPU idle: batch 1), and walks it
 * in 16-byte vectors (vec_io.cuh). Forward: the first kernel writes each chunk's statistics in
 * one pass (Welford per vector, Chan's formula within and across warps in a fixed order), the
 * second combines its group's chunks in chunk order (deterministic, no atomics) and writes its
 * chunk: x is read twice, out written once. Backward: the first kernel writes each chunk's two
 * sums (dn and dn * (x - mean), dn the gradient at the norm's output), the second combines the
 * group's and accumulates dx; gamma's and beta's gradients come from the same sums (one small
 * kernel), so x and dy are read twice, dx once and written once. With an activation (SiLU),
 * forward writes act(norm) and backward recomputes the normalised value from x and the
 * statistics (it is never stored); the activation's math: groupnorm_act.cuh. */
struct gn_geom {
    int64_t C, S, cpg, K;
    int64_t units; /* vectors per channel: S / VEC */
    int64_t cu;    /* vectors per chunk (the last chunk may hold fewer) */
};

/* Block blockIdx.x = (b * C + c) * K + k: its channel's offset and its chunk's vectors [u0, u1). */
struct gn_chunk {
    int64_t bc, c, base, u0, u1;
};
__device__ __forceinline__ gn_chunk gn_chunk_of(const gn_geom &g)
{
    int64_t blk = blockIdx.x, bc = blk / g.K, k = blk % g.K, u0 = k * g.cu;
    return gn_chunk{bc, bc % g.C, bc * g.S, u0, u0 + g.cu < g.units ? u0 + g.cu : g.units};
}

/* stats[(b * C + c) * K + k] = the statistics of chunk k of channel c of batch b. */
template <typename T> __global__ void gn_stats_k(mstat *stats, io<T> x, gn_geom g)
{
    constexpr int V = io<T>::VEC;
    gn_chunk ch = gn_chunk_of(g);
    mstat m{0, 0, 0};
    for (int64_t u = ch.u0 + threadIdx.x; u < ch.u1; u += blockDim.x) {
        float f[V];
        x.load(ch.base + u * V, f);
        m = mstat_combine(m, mstat_of<V>(f));
    }
    m = block_mstat(m);
    if (threadIdx.x == 0) stats[blockIdx.x] = m;
}

template <typename T>
__global__ void gn_fwd_k(io<T> out, float *mean, float *rstd, const mstat *stats, io<T> x, const void *gamma, int gdt,
                         const void *beta, int bdt, gn_geom g, float eps, sdt_activation act)
{
    constexpr int V = io<T>::VEC;
    gn_chunk ch = gn_chunk_of(g);
    int64_t bg = ch.bc / g.cpg, n = g.cpg * g.K;
    /* the group's chunks, contiguous in stats: every warp combines them in the same order */
    const mstat *e = stats + bg * n;
    mstat m{0, 0, 0};
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) m = mstat_combine(m, e[i]);
    m = warp_mstat(m);
    float mu = m.mean, rs = rsqrtf(m.m2 / m.n + eps);
    float scale = gamma ? ld(gamma, gdt, ch.c) * rs : rs, shift = (beta ? ld(beta, bdt, ch.c) : 0.0f) - mu * scale;
    for (int64_t u = ch.u0 + threadIdx.x; u < ch.u1; u += blockDim.x) {
        float f[V];
        x.load(ch.base + u * V, f);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float y = f[k] * scale + shift;
            f[k] = gn_act<GN_ACT_ANY>(act, y);
        }
        out.store(ch.base + u * V, f);
    }
    if (threadIdx.x == 0 && ch.c % g.cpg == 0 && ch.u0 == 0) {
        mean[bg] = mu;
        rstd[bg] = rs;
    }
}

/* part[(b * C + c) * K + k] = (sum of dn, sum of dn * (x - mean)) over chunk k of channel c of batch b. */
template <typename T>
__global__ void gn_bwd_sums_k(float2 *part, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta, int bdt,
                              const float *mean, const float *rstd, gn_geom g, sdt_activation act)
{
    constexpr int V = io<T>::VEC;
    gn_chunk ch = gn_chunk_of(g);
    int64_t bg = ch.bc / g.cpg;
    float mu = mean[bg], rs = rstd[bg], gc = gamma ? ld(gamma, gdt, ch.c) : 1.0f;
    float scale = gc * rs, shift = (beta ? ld(beta, bdt, ch.c) : 0.0f) - mu * scale;
    float2 s = make_float2(0, 0);
    for (int64_t u = ch.u0 + threadIdx.x; u < ch.u1; u += blockDim.x) {
        float xf[V], df[V];
        x.load(ch.base + u * V, xf);
        dy.load(ch.base + u * V, df);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = gn_grad<GN_ACT_ANY>(act, df[k], xf[k] * scale + shift);
            s.x += d;
            s.y += d * (xf[k] - mu);
        }
    }
    s = block_sum2(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

template <typename T>
__global__ void gn_bwd_dx_k(io<T> dx, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta, int bdt,
                            const float *mean, const float *rstd, const float2 *part, gn_geom g, sdt_activation act)
{
    constexpr int V = io<T>::VEC;
    gn_chunk ch = gn_chunk_of(g);
    int64_t bg = ch.bc / g.cpg, n = g.cpg * g.K, c0 = bg * g.cpg - (ch.bc - ch.c); /* the group's first channel */
    float mu = mean[bg], rs = rstd[bg], gc = gamma ? ld(gamma, gdt, ch.c) : 1.0f;
    /* the group's means of dn * gamma and dn * gamma * x_hat: entry i is channel c0 + i / K */
    const float2 *e = part + bg * n;
    float2 m = make_float2(0, 0);
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) {
        float gi = gamma ? ld(gamma, gdt, c0 + i / g.K) : 1.0f;
        m.x += gi * e[i].x;
        m.y += gi * e[i].y;
    }
    m = warp_sum2(m);
    float inv_n = 1.0f / (float)(g.cpg * g.S), m1 = m.x * inv_n, m2 = m.y * rs * inv_n;
    float scale = gc * rs, shift = (beta ? ld(beta, bdt, ch.c) : 0.0f) - mu * scale;
    for (int64_t u = ch.u0 + threadIdx.x; u < ch.u1; u += blockDim.x) {
        float xf[V], df[V], gf[V];
        x.load(ch.base + u * V, xf);
        dy.load(ch.base + u * V, df);
        dx.load(ch.base + u * V, gf);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = gn_grad<GN_ACT_ANY>(act, df[k], xf[k] * scale + shift), xh = (xf[k] - mu) * rs;
            gf[k] += rs * (d * gc - m1 - xh * m2);
        }
        dx.store(ch.base + u * V, gf);
    }
}

/* dgamma[c] += sum over b of rstd * (sum of dn * (x - mean)), dbeta[c] += sum over b of (sum of dn):
 * from the per-chunk sums, batches and chunks in order. */
__global__ void gn_bwd_params_k(void *dg, int dgt, void *db, int dbt, const float2 *part, const float *rstd, int64_t B,
                                int G, gn_geom g)
{
    GRID_STRIDE(c, g.C)
    {
        float sg = 0, sb = 0;
        for (int64_t b = 0; b < B; b++) {
            const float2 *e = part + (b * g.C + c) * g.K;
            float s1 = 0, s2 = 0;
            for (int64_t k = 0; k < g.K; k++) {
                s1 += e[k].x;
                s2 += e[k].y;
            }
            sg += s2 * rstd[b * G + c / g.cpg];
            sb += s1;
        }
        if (dg) acc(dg, dgt, c, sg);
        if (db) acc(db, dbt, c, sb);
    }
}

/* The call's chunking: up to GN_VECS_PER_THREAD vectors per thread and chunk, and more chunks
 * while fewer than GN_MIN_BLOCKS blocks would run and every thread would still get a vector;
 * but at most GN_MAX_GROUP_CHUNKS chunks a group, since every block of the second kernels
 * combines its group's (a VAE's 1024 x 1024 channels take more vectors per thread instead).
 * Blocks of up to NT threads, fewer for small channels (SD's 8x8 level). */
#define GN_VECS_PER_THREAD 4
#define GN_MIN_BLOCKS 1024
#define GN_MAX_GROUP_CHUNKS 256
static gn_geom gn_geometry(int64_t B, int64_t C, int64_t S, int G, int vec, int *threads)
{
    gn_geom g;
    g.C = C;
    g.S = S;
    g.cpg = C / G;
    g.units = S / vec;
    int64_t t = g.units >= NT ? NT : (g.units + 31) / 32 * 32;
    if (t < 32) t = 32;
    int64_t K = (g.units + t * GN_VECS_PER_THREAD - 1) / (t * GN_VECS_PER_THREAD);
    while (B * C * K < GN_MIN_BLOCKS && g.units / (2 * K) >= t) K *= 2;
    int64_t max_k = GN_MAX_GROUP_CHUNKS / g.cpg;
    if (K > max_k) K = max_k;
    if (K < 1) K = 1;
    g.cu = (g.units + K - 1) / K;
    g.K = g.cu > 0 ? (g.units + g.cu - 1) / g.cu : 1; /* no empty chunk */
    if (g.cu == 0) g.cu = 1;
    *threads = (int)t;
    return g;
}

/* B, C and the spatial size of x (groups divide C: checked before the op runs, kernels/op_checks.c). */
static void gn_shape(const sdt_tensor *x, int64_t *B, int64_t *C, int64_t *S)
{
    *B = x->shape[0];
    *C = x->shape[1];
    *S = sdt_tensor_numel(x) / (*B * *C);
}

static int gn_launch_limit(sdt_backend *be, int64_t blocks)
{
    if (blocks > INT32_MAX)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "groupnorm: %lld blocks exceed one launch", (long long)blocks);
    return 0;
}

int cuda_groupnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                           const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act)
{
    if (x->channels_last) return cuda_groupnorm_nhwc_forward(be, out, mean, rstd, x, gamma, beta, groups, eps, act);
    int64_t B, C, S;
    gn_shape(x, &B, &C, &S);
    if (B * C * S == 0) return 0;
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, S, ptrs, 2);
    int threads;
    gn_geom g = gn_geometry(B, C, S, groups, same ? vec_width(x->dtype) : 1, &threads);
    int64_t blocks = B * C * g.K;
    if (gn_launch_limit(be, blocks)) return -1;
    mstat *stats = (mstat *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)blocks * sizeof(mstat));
    if (!stats) return -1;
    cudaStream_t s = STREAM(be);
    SDT_IO_SWITCH(same, x->dtype, T, {
        gn_stats_k<T><<<(unsigned)blocks, threads, 0, s>>>(stats, io_of<T>(x->data, x->dtype), g);
        gn_fwd_k<T><<<(unsigned)blocks, threads, 0, s>>>(io_of<T>(out->data, out->dtype), (float *)mean->data,
                                                         (float *)rstd->data, stats, io_of<T>(x->data, x->dtype),
                                                         dat(gamma), dty(gamma), dat(beta), dty(beta), g, eps, act);
    });
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_groupnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                            const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                            const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                            sdt_activation act)
{
    if (act == SDT_ACT_IDENTITY) beta = NULL; /* the plain norm's gradient does not depend on beta */
    if (!dx && !dgamma && !dbeta) return 0;
    if (x->channels_last)
        return cuda_groupnorm_nhwc_backward(be, dx, dgamma, dbeta, dout, x, gamma, beta, mean, rstd, groups, act);
    int64_t B, C, S;
    gn_shape(x, &B, &C, &S);
    if (B * C * S == 0) return 0;
    const void *ptrs[3] = {dout->data, x->data, dx ? dx->data : NULL};
    bool same = dout->dtype == x->dtype && (!dx || dx->dtype == x->dtype) && vec_ok(x->dtype, S, ptrs, 3);
    int threads;
    gn_geom g = gn_geometry(B, C, S, groups, same ? vec_width(x->dtype) : 1, &threads);
    int64_t blocks = B * C * g.K;
    if (gn_launch_limit(be, blocks)) return -1;
    float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)blocks * sizeof(float2));
    if (!part) return -1;
    cudaStream_t s = STREAM(be);
    const float *mp = (const float *)mean->data, *rp = (const float *)rstd->data;
    SDT_IO_SWITCH(same, x->dtype, T, {
        gn_bwd_sums_k<T><<<(unsigned)blocks, threads, 0, s>>>(part, io_of<T>(dout->data, dout->dtype),
                                                              io_of<T>(x->data, x->dtype), dat(gamma), dty(gamma),
                                                              dat(beta), dty(beta), mp, rp, g, act);
        if (dx)
            gn_bwd_dx_k<T><<<(unsigned)blocks, threads, 0, s>>>(
                io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype),
                dat(gamma), dty(gamma), dat(beta), dty(beta), mp, rp, part, g, act);
    });
    CUDA_LAUNCHED(be);
    if (dgamma || dbeta) {
        gn_bwd_params_k<<<grid_for(C, 128), 128, 0, s>>>(
            dgamma ? dgamma->data : NULL, dty(dgamma), dbeta ? dbeta->data : NULL, dty(dbeta), part, rp, B, groups, g);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
