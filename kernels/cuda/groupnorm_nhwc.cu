/* groupnorm_nhwc.cu - torch.nn.GroupNorm (with its optional activation) on channels-last x
 * (tensor.h: memory [B, S, C], S the pixels), on the GPU. Semantics: kernels/ops.h; the NCHW
 * kernels and the formulas mirrored here: groupnorm.cu.
 *
 * A group is cpg consecutive channels of every pixel: in NHWC memory a strided set of short runs.
 * The reductions therefore go by channel: a block is a tile of GN_TILE threads along the channels,
 * W channels a thread (W = 2 for 16-bit storage: one 4-byte load, so a warp reads 128 bytes of a
 * pixel row), by GN_LANES pixel lanes, over a chunk of P pixels of one image. Each lane loads
 * GN_UNROLL pixels before it adds them (bytes in flight: one 2-byte load a thread left the loads
 * latency-bound at half of NCHW's bandwidth, bench/NOTES.md run 28) and keeps per channel shifted
 * sums (shift: its first value, so no Welford division per element) that become one Chan
 * statistic (norm_stats.cuh) at the end; the lanes are combined in lane order in shared memory,
 * and each channel's chunk statistics land in scratch group by group ([b, g, chunk, channel of
 * the group]). P is chosen from the shape alone (enough blocks to fill the GPU), so no result
 * depends on scheduling. One warp per (image, group) then combines its entries in a fixed
 * lane-strided order and a fixed tree (warp_mstat).
 * The normalisation (forward) and the input gradient (backward) are elementwise passes: V
 * consecutive channels a thread (one 16-byte vector, vec_io.cuh, when C is a multiple of the
 * vector width; else one channel), a block as wide as a pixel row's vectors (up to 256 threads)
 * so whole rows are read contiguously, and GN_EW_UNROLL pixels loaded before any is written.
 * Each thread works out its channels' constants once and walks a few pixels (more on big shapes).
 * Forward: statistics, group combination (writes mean and rstd), normalisation: x read twice.
 * Backward: per-channel chunk sums of dn and dn * (x - mean) (dn the gradient at the norm's
 * output), the group's two means, then dx; gamma's and beta's gradients come from the same sums. */
#include "norm_stats.cuh"
#include "vec_io.cuh"

#define GN_TILE 32          /* threads along the channels in the reductions */
#define GN_LANES 8          /* pixel lanes per block of the reductions: GN_TILE * GN_LANES = NT threads */
#define GN_UNROLL 4         /* pixels a lane loads before it adds them */
#define GN_FILL_BLOCKS 1056 /* reduction blocks that fill an H100 (132 SMs) 8 deep */
#define GN_MAX_CHUNK 4096   /* pixels per reduction chunk, at most */
#define GN_EW_UNROLL 2      /* pixels an elementwise thread loads before it writes */
#define GN_EW_FILL 270336   /* elementwise threads that fill an H100 (132 SMs x 2048) */
#define GN_EW_MAX_PIXELS 16 /* pixels per elementwise thread, at most */

/* Channels a reduction thread loads at once: a 4-byte pair for 16-bit storage. */
template <typename T> struct gn_w {
    static constexpr int W = 1;
};
template <> struct gn_w<__half> {
    static constexpr int W = 2;
};
template <> struct gn_w<__nv_bfloat16> {
    static constexpr int W = 2;
};
template <typename T, int W> __device__ __forceinline__ void gn_load(const io<T> &a, int64_t i, float (&f)[W])
{
    if constexpr (W == 2) {
        uint32_t raw = *(const uint32_t *)(a.p + i);
        const T *e = (const T *)&raw;
        f[0] = to_f32(e[0]);
        f[1] = to_f32(e[1]);
    } else {
        a.template load<W>(i, f);
    }
}

struct gn_nhwc_geom {
    int64_t B, S, C, G, cpg;
    int64_t P, K; /* the reductions' chunks: K chunks of P pixels an image */
};

/* The geometry for W channels a reduction thread: P a multiple of GN_LANES * GN_UNROLL, from the shape alone. */
static gn_nhwc_geom gn_nhwc_geometry(const sdt_tensor *x, int groups, int W)
{
    gn_nhwc_geom g;
    g.B = x->shape[0];
    g.C = x->shape[1];
    g.S = x->shape[2] * x->shape[3];
    g.G = groups;
    g.cpg = g.C / groups;
    const int64_t step = GN_LANES * GN_UNROLL, tiles = (g.C + GN_TILE * W - 1) / (GN_TILE * W);
    int64_t want = (g.S * tiles * g.B + GN_FILL_BLOCKS - 1) / GN_FILL_BLOCKS;
    want = (want + step - 1) / step * step;
    g.P = want < step ? step : (want > GN_MAX_CHUNK ? GN_MAX_CHUNK : want);
    g.K = (g.S + g.P - 1) / g.P;
    return g;
}

/* Entry of channel c of image b, chunk k in the group-ordered scratch: [b, g, k, c % cpg]. */
__device__ __forceinline__ int64_t gn_nhwc_entry(const gn_nhwc_geom &g, int64_t b, int64_t c, int64_t k)
{
    int64_t grp = c / g.cpg;
    return ((b * g.G + grp) * g.K + k) * g.cpg + (c - grp * g.cpg);
}

/* stats[entry(b, c, k)] = the statistics of channel c over chunk k of image b. */
template <typename T> __global__ void gn_nhwc_stats_k(mstat *stats, io<T> x, gn_nhwc_geom g)
{
    constexpr int W = gn_w<T>::W;
    __shared__ mstat lanes[GN_LANES][GN_TILE * W];
    const int64_t c0 = ((int64_t)blockIdx.x * GN_TILE + threadIdx.x) * W, k = blockIdx.y, b = blockIdx.z;
    const int64_t s0 = k * g.P, s1 = s0 + g.P < g.S ? s0 + g.P : g.S;
    float shift[W], sum[W], sq[W];
#pragma unroll
    for (int w = 0; w < W; w++) shift[w] = sum[w] = sq[w] = 0.0f;
    int n = 0;
    if (c0 < g.C)
        for (int64_t s = s0 + threadIdx.y; s < s1; s += GN_LANES * GN_UNROLL) {
            float f[GN_UNROLL][W];
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++)
                if (s + u * GN_LANES < s1) gn_load<T, W>(x, (b * g.S + s + u * GN_LANES) * g.C + c0, f[u]);
            if (n == 0)
#pragma unroll
                for (int w = 0; w < W; w++) shift[w] = f[0][w];
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++)
                if (s + u * GN_LANES < s1) {
                    n++;
#pragma unroll
                    for (int w = 0; w < W; w++) {
                        float d = f[u][w] - shift[w];
                        sum[w] += d;
                        sq[w] += d * d;
                    }
                }
        }
#pragma unroll
    for (int w = 0; w < W; w++) {
        float fn = (float)n, mu = n ? sum[w] / fn : 0.0f;
        lanes[threadIdx.y][threadIdx.x * W + w] =
            n ? mstat{fn, shift[w] + mu, fmaxf(sq[w] - sum[w] * mu, 0.0f)} : mstat{0, 0, 0};
    }
    __syncthreads();
    if (threadIdx.y == 0 && c0 < g.C)
#pragma unroll
        for (int w = 0; w < W; w++) {
            mstat m = lanes[0][threadIdx.x * W + w];
            for (int l = 1; l < GN_LANES; l++) m = mstat_combine(m, lanes[l][threadIdx.x * W + w]);
            stats[gn_nhwc_entry(g, b, c0 + w, k)] = m;
        }
}

/* One warp per (image, group): mean and rstd from the group's K * cpg entries. */
__global__ void gn_nhwc_group_stats_k(float *mean, float *rstd, const mstat *stats, gn_nhwc_geom g, float eps)
{
    int64_t bg = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (bg >= g.B * g.G) return; /* whole warps leave together: blockDim.x is a multiple of 32 */
    int64_t n = g.K * g.cpg;
    const mstat *e = stats + bg * n;
    mstat m{0, 0, 0};
#pragma unroll 4
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) m = mstat_combine(m, e[i]);
    m = warp_mstat(m);
    if (threadIdx.x % 32 == 0) {
        mean[bg] = m.mean;
        rstd[bg] = rsqrtf(m.m2 / m.n + eps);
    }
}

/* part[entry(b, c, k)] = (sum of dn, sum of dn * (x - mean)) of channel c over chunk k of image b. */
template <typename T>
__global__ void gn_nhwc_bwd_sums_k(float2 *part, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta,
                                   int bdt, const float *mean, const float *rstd, gn_nhwc_geom g, sdt_activation act)
{
    constexpr int W = gn_w<T>::W;
    __shared__ float2 lanes[GN_LANES][GN_TILE * W];
    const int64_t c0 = ((int64_t)blockIdx.x * GN_TILE + threadIdx.x) * W, k = blockIdx.y, b = blockIdx.z;
    const int64_t s0 = k * g.P, s1 = s0 + g.P < g.S ? s0 + g.P : g.S;
    float2 acc2[W];
#pragma unroll
    for (int w = 0; w < W; w++) acc2[w] = make_float2(0, 0);
    if (c0 < g.C) {
        float mu[W], scale[W], shift[W];
#pragma unroll
        for (int w = 0; w < W; w++) {
            int64_t c = c0 + w, bg = b * g.G + c / g.cpg;
            mu[w] = mean[bg];
            scale[w] = (gamma ? ld(gamma, gdt, c) : 1.0f) * rstd[bg];
            shift[w] = (beta ? ld(beta, bdt, c) : 0.0f) - mu[w] * scale[w];
        }
        for (int64_t s = s0 + threadIdx.y; s < s1; s += GN_LANES * GN_UNROLL) {
            float xf[GN_UNROLL][W], df[GN_UNROLL][W];
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++)
                if (s + u * GN_LANES < s1) {
                    int64_t i = (b * g.S + s + u * GN_LANES) * g.C + c0;
                    gn_load<T, W>(x, i, xf[u]);
                    gn_load<T, W>(dy, i, df[u]);
                }
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++)
                if (s + u * GN_LANES < s1)
#pragma unroll
                    for (int w = 0; w < W; w++) {
                        float d = gn_out_grad(act, df[u][w], xf[u][w] * scale[w] + shift[w]);
                        acc2[w].x += d;
                        acc2[w].y += d * (xf[u][w] - mu[w]);
                    }
        }
    }
#pragma unroll
    for (int w = 0; w < W; w++) lanes[threadIdx.y][threadIdx.x * W + w] = acc2[w];
    __syncthreads();
    if (threadIdx.y == 0 && c0 < g.C)
#pragma unroll
        for (int w = 0; w < W; w++) {
            float2 s = lanes[0][threadIdx.x * W + w];
            for (int l = 1; l < GN_LANES; l++) {
                float2 e = lanes[l][threadIdx.x * W + w];
                s = make_float2(s.x + e.x, s.y + e.y);
            }
            part[gn_nhwc_entry(g, b, c0 + w, k)] = s;
        }
}

/* One warp per (image, group): the means of dn * gamma and of dn * gamma * x_hat over the group,
 * m[bg] = (m1, m2) as groupnorm.cu's gn_bwd_dx_k forms them. */
__global__ void gn_nhwc_group_sums_k(float2 *m, const float2 *part, const void *gamma, int gdt, const float *rstd,
                                     gn_nhwc_geom g)
{
    int64_t bg = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (bg >= g.B * g.G) return;
    int64_t n = g.K * g.cpg, c0 = (bg % g.G) * g.cpg;
    const float2 *e = part + bg * n;
    float2 s = make_float2(0, 0);
#pragma unroll 4
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) {
        float gi = gamma ? ld(gamma, gdt, c0 + i % g.cpg) : 1.0f;
        float2 v = e[i];
        s.x += gi * v.x;
        s.y += gi * v.y;
    }
    s = warp_sum2(s);
    if (threadIdx.x % 32 == 0) {
        float inv_n = 1.0f / (float)(g.cpg * g.S);
        m[bg] = make_float2(s.x * inv_n, s.y * rstd[bg] * inv_n);
    }
}

/* The elementwise passes' launch: blocks of bx vector columns (a pixel row's, or a 256-wide tile
 * of them) by ly pixel lanes, each thread pt pixels; grid (column tiles, pixel chunks, images). */
struct gn_ew_geom {
    int bx, ly;
    int64_t pt;
    dim3 grid;
};
static gn_ew_geom gn_ew_geometry(const gn_nhwc_geom &g, int V)
{
    gn_ew_geom e;
    int64_t nv = g.C / V;
    e.bx = (int)(nv < NT ? nv : NT);
    e.ly = NT / e.bx;
    int64_t threads = g.B * g.S * nv, pt = (threads + GN_EW_FILL - 1) / GN_EW_FILL;
    e.pt = pt < 1 ? 1 : (pt > GN_EW_MAX_PIXELS ? GN_EW_MAX_PIXELS : pt);
    int64_t chunk = e.ly * e.pt;
    e.grid = dim3((unsigned)((nv + e.bx - 1) / e.bx), (unsigned)((g.S + chunk - 1) / chunk), (unsigned)g.B);
    return e;
}

/* The walk of an elementwise thread: its first channel c0 (or -1: past the row), and its pixels
 * [s, s1) stepping ly, GN_EW_UNROLL of them loaded at once. */
struct gn_ew_walk {
    int64_t c0, s, s1, step;
};
template <int V> __device__ __forceinline__ gn_ew_walk gn_ew_walk_of(const gn_nhwc_geom &g, int64_t pt)
{
    gn_ew_walk w;
    w.c0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    int64_t chunk = (int64_t)blockDim.y * pt, s0 = (int64_t)blockIdx.y * chunk;
    w.s = s0 + threadIdx.y;
    w.s1 = s0 + chunk < g.S ? s0 + chunk : g.S;
    w.step = blockDim.y;
    return w;
}

/* out = act(x * scale + shift), scale = gamma * rstd, shift = beta - mean * scale (groupnorm.cu's
 * expression), V consecutive channels a thread. */
template <typename T>
__global__ void gn_nhwc_fwd_k(io<T> out, io<T> x, const float *mean, const float *rstd, const void *gamma, int gdt,
                              const void *beta, int bdt, gn_nhwc_geom g, int64_t pt, sdt_activation act)
{
    constexpr int V = io<T>::VEC, U = GN_EW_UNROLL;
    gn_ew_walk w = gn_ew_walk_of<V>(g, pt);
    const int64_t b = blockIdx.z;
    if (w.c0 >= g.C) return;
    float scale[V], shift[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        int64_t c = w.c0 + k, bg = b * g.G + c / g.cpg;
        float mu = mean[bg], rs = rstd[bg];
        scale[k] = gamma ? ld(gamma, gdt, c) * rs : rs;
        shift[k] = (beta ? ld(beta, bdt, c) : 0.0f) - mu * scale[k];
    }
    for (int64_t s = w.s; s < w.s1; s += w.step * U) {
        float f[U][V];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (s + u * w.step < w.s1) x.load((b * g.S + s + u * w.step) * g.C + w.c0, f[u]);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (s + u * w.step < w.s1) {
#pragma unroll
                for (int k = 0; k < V; k++) {
                    float y = f[u][k] * scale[k] + shift[k];
                    f[u][k] = act == SDT_ACT_IDENTITY ? y : act_value(act, y);
                }
                out.store((b * g.S + s + u * w.step) * g.C + w.c0, f[u]);
            }
    }
}

/* dx += rstd * (dn * gamma - m1 - x_hat * m2) (groupnorm.cu's gn_bwd_dx_k), V consecutive channels
 * a thread, as dn * scale + lo + hi * (x - mean) with scale = gamma * rstd, lo = -rstd * m1 and
 * hi = -rstd^2 * m2 worked out once per channel. */
template <typename T>
__global__ void gn_nhwc_bwd_dx_k(io<T> dx, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta, int bdt,
                                 const float *mean, const float *rstd, const float2 *m, gn_nhwc_geom g, int64_t pt,
                                 sdt_activation act)
{
    constexpr int V = io<T>::VEC, U = GN_EW_UNROLL;
    gn_ew_walk w = gn_ew_walk_of<V>(g, pt);
    const int64_t b = blockIdx.z;
    if (w.c0 >= g.C) return;
    float mu[V], scale[V], shift[V], lo[V], hi[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        int64_t c = w.c0 + k, bg = b * g.G + c / g.cpg;
        float rs = rstd[bg];
        float2 mm = m[bg];
        mu[k] = mean[bg];
        scale[k] = (gamma ? ld(gamma, gdt, c) : 1.0f) * rs;
        shift[k] = (beta ? ld(beta, bdt, c) : 0.0f) - mu[k] * scale[k];
        lo[k] = -rs * mm.x;
        hi[k] = -rs * rs * mm.y;
    }
    for (int64_t s = w.s; s < w.s1; s += w.step * U) {
        float xf[U][V], df[U][V], gf[U][V];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (s + u * w.step < w.s1) {
                int64_t i = (b * g.S + s + u * w.step) * g.C + w.c0;
                x.load(i, xf[u]);
                dy.load(i, df[u]);
                dx.load(i, gf[u]);
            }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (s + u * w.step < w.s1) {
#pragma unroll
                for (int k = 0; k < V; k++) {
                    float d = gn_out_grad(act, df[u][k], xf[u][k] * scale[k] + shift[k]);
                    gf[u][k] += d * scale[k] + lo[k] + hi[k] * (xf[u][k] - mu[k]);
                }
                dx.store((b * g.S + s + u * w.step) * g.C + w.c0, gf[u]);
            }
    }
}

/* dgamma[c] += sum over (b, k) of rstd[b, g] * (sum of dn * (x - mean)), dbeta[c] += sum over (b, k) of
 * (sum of dn): one warp per channel, lane-strided over (image, chunk), then a fixed tree. */
__global__ void gn_nhwc_bwd_params_k(void *dg, int dgt, void *db, int dbt, const float2 *part, const float *rstd,
                                     gn_nhwc_geom g)
{
    int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (c >= g.C) return;
    float2 s = make_float2(0, 0);
    const int64_t n = g.B * g.K, grp = c / g.cpg;
#pragma unroll 4
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) {
        int64_t b = i / g.K, k = i - b * g.K;
        float2 e = part[gn_nhwc_entry(g, b, c, k)];
        s.x += e.x;
        s.y += e.y * rstd[b * g.G + grp];
    }
    s = warp_sum2(s);
    if (threadIdx.x % 32 == 0) {
        if (dg) acc(dg, dgt, c, s.y);
        if (db) acc(db, dbt, c, s.x);
    }
}

/* The reductions' grid: channel tiles of GN_TILE * W, the chunks, the images. */
static int gn_nhwc_grid(sdt_backend *be, const gn_nhwc_geom &g, int W, dim3 *grid)
{
    if (g.K > 65535 || g.B > 65535)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "groupnorm: %lld images of %lld pixels exceed one launch",
                         (long long)g.B, (long long)g.S);
    *grid = dim3((unsigned)((g.C + GN_TILE * W - 1) / (GN_TILE * W)), (unsigned)g.K, (unsigned)g.B);
    return 0;
}
static int gn_ew_check(sdt_backend *be, const gn_ew_geom &e)
{
    if (e.grid.y > 65535)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "groupnorm: %u pixel chunks exceed one launch", e.grid.y);
    return 0;
}

template <typename T>
static int gn_nhwc_forward_t(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                             const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act)
{
    constexpr int W = gn_w<T>::W;
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups, W);
    dim3 grid;
    if (gn_nhwc_grid(be, g, W, &grid)) return -1;
    gn_ew_geom e = gn_ew_geometry(g, io<T>::VEC);
    if (gn_ew_check(be, e)) return -1;
    mstat *stats = (mstat *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(g.B * g.C * g.K) * sizeof(mstat));
    if (!stats) return -1;
    cudaStream_t s = STREAM(be);
    float *mp = (float *)mean->data, *rp = (float *)rstd->data;
    gn_nhwc_stats_k<T><<<grid, dim3(GN_TILE, GN_LANES), 0, s>>>(stats, io_of<T>(x->data, x->dtype), g);
    CUDA_LAUNCHED(be);
    gn_nhwc_group_stats_k<<<grid_for(g.B * g.G * 32, NT), NT, 0, s>>>(mp, rp, stats, g, eps);
    CUDA_LAUNCHED(be);
    gn_nhwc_fwd_k<T><<<e.grid, dim3(e.bx, e.ly), 0, s>>>(io_of<T>(out->data, out->dtype), io_of<T>(x->data, x->dtype),
                                                         mp, rp, dat(gamma), dty(gamma), dat(beta), dty(beta), g, e.pt,
                                                         act);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_groupnorm_nhwc_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd,
                                const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, int groups,
                                float eps, sdt_activation act)
{
    if (x->shape[0] * x->shape[1] * x->shape[2] * x->shape[3] == 0) return 0;
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, x->shape[1], ptrs, 2);
    SDT_IO_SWITCH(same, x->dtype, T,
                  { return gn_nhwc_forward_t<T>(be, out, mean, rstd, x, gamma, beta, groups, eps, act); });
    return 0;
}

template <typename T>
static int gn_nhwc_backward_t(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                              const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                              const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                              sdt_activation act)
{
    constexpr int W = gn_w<T>::W;
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups, W);
    dim3 grid;
    if (gn_nhwc_grid(be, g, W, &grid)) return -1;
    gn_ew_geom e = gn_ew_geometry(g, io<T>::VEC);
    if (gn_ew_check(be, e)) return -1;
    int64_t entries = g.B * g.C * g.K;
    /* the chunk sums, then each group's two means */
    float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(entries + g.B * g.G) * sizeof(float2));
    if (!part) return -1;
    float2 *group_means = part + entries;
    cudaStream_t s = STREAM(be);
    const float *mp = (const float *)mean->data, *rp = (const float *)rstd->data;
    gn_nhwc_bwd_sums_k<T><<<grid, dim3(GN_TILE, GN_LANES), 0, s>>>(part, io_of<T>(dout->data, dout->dtype),
                                                                   io_of<T>(x->data, x->dtype), dat(gamma), dty(gamma),
                                                                   dat(beta), dty(beta), mp, rp, g, act);
    CUDA_LAUNCHED(be);
    if (dx) {
        gn_nhwc_group_sums_k<<<grid_for(g.B * g.G * 32, NT), NT, 0, s>>>(group_means, part, dat(gamma), dty(gamma), rp,
                                                                         g);
        CUDA_LAUNCHED(be);
        gn_nhwc_bwd_dx_k<T><<<e.grid, dim3(e.bx, e.ly), 0, s>>>(
            io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype), dat(gamma),
            dty(gamma), dat(beta), dty(beta), mp, rp, group_means, g, e.pt, act);
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        gn_nhwc_bwd_params_k<<<grid_for(g.C * 32, NT), NT, 0, s>>>(dgamma ? dgamma->data : NULL, dty(dgamma),
                                                                   dbeta ? dbeta->data : NULL, dty(dbeta), part, rp, g);
        CUDA_LAUNCHED(be);
    }
    return 0;
}

int cuda_groupnorm_nhwc_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta,
                                 const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *gamma,
                                 const sdt_tensor *beta, const sdt_tensor *mean, const sdt_tensor *rstd, int groups,
                                 sdt_activation act)
{
    if (x->shape[0] * x->shape[1] * x->shape[2] * x->shape[3] == 0) return 0;
    const void *ptrs[3] = {dx ? dx->data : NULL, dout->data, x->data};
    bool same = dout->dtype == x->dtype && (!dx || dx->dtype == x->dtype) && vec_ok(x->dtype, x->shape[1], ptrs, 3);
    SDT_IO_SWITCH(same, x->dtype, T, {
        return gn_nhwc_backward_t<T>(be, dx, dgamma, dbeta, dout, x, gamma, beta, mean, rstd, groups, act);
    });
    return 0;
}
