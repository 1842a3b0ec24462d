/* groupnorm_nhwc.cu - torch.nn.GroupNorm (with its optional activation) on channels-last x
 * (tensor.h: memory [B, S, C], S the pixels), on the GPU. Semantics: kernels/ops.h; the NCHW
 * kernels and the formulas mirrored here: groupnorm.cu.
 *
 * A group is cpg consecutive channels of every pixel: in NHWC memory a strided set of short runs.
 * The reductions therefore go by channel. A reduction block is a tile of GN_TC channels of one
 * image by a chunk of P pixels: NT threads, TX = GN_TC / V along the tile (V channels a thread,
 * one 16-byte vector, vec_io.cuh: 8 threads of 8 channels for 16-bit storage, so a warp reads
 * four 128-byte row segments) by TY pixel lanes; each lane loads GN_UNROLL pixels before it adds
 * them (64 bytes a tensor in flight a thread: run 28 measured one 2-byte load a thread
 * latency-bound) and keeps per channel sums of value - shift (one shift a channel and chunk: its
 * value at the chunk's first pixel), so lanes combine by plain addition: a fixed shuffle tree
 * within the warp, the warps in warp order in shared memory; each channel's chunk statistic (a
 * Chan statistic, norm_stats.cuh) lands in scratch group by group ([b, g, chunk, channel of the
 * group]). P comes from the shape alone (at the UNets' shapes one batch of loads a lane, many
 * short blocks), so no result depends on scheduling. One
 * block per (image, group) then combines its group's entries in a fixed order (run 29's one warp
 * walked ~17 dependent loads a lane at SDXL's 128x128 level).
 * The normalisation (forward) and the input gradient (backward) are elementwise passes: V
 * consecutive channels a thread, a block as wide as a pixel row's vectors (up to NT threads),
 * GN_EW_UNROLL pixels loaded before any is written; each thread works out its channels'
 * constants once and walks a few pixels (more on big shapes).
 * Every kernel is instantiated per activation kind (groupnorm_act.cuh): identity (the backward
 * then needs no normalised value), SiLU (one exp a value) and any other.
 * Forward: statistics, group combination (writes mean and rstd), normalisation: x read twice.
 * Backward: per-channel chunk sums of dn and dn * (x - mean) (dn the gradient at the norm's
 * output), the group's two means, then dx; gamma's and beta's gradients come from the same sums. */
#include "groupnorm_act.cuh"
#include "norm_stats.cuh"
#include "vec_io.cuh"

#define GN_TC 64            /* channels a reduction block covers */
#define GN_UNROLL 4         /* pixels a lane loads before it adds them */
#define GN_FILL_BLOCKS 4096 /* reduction blocks wanted: several waves on an H100 (132 SMs), so the last one is short */
#define GN_MAX_CHUNK 4096   /* pixels per reduction chunk, at most */
#define GN_EW_UNROLL 2      /* pixels an elementwise thread loads before it writes */
#define GN_EW_FILL 270336   /* elementwise threads that fill an H100 (132 SMs x 2048) */
#define GN_EW_MAX_PIXELS 16 /* pixels per elementwise thread, at most */

/* The reductions' thread layout for storage T: TX threads of V channels along the tile, TY pixel
 * lanes; after the warp's shuffle tree, RPW lanes' rows are one, and R rows are left a block. */
template <typename T> struct gn_red {
    static constexpr int V = io<T>::VEC, TX = GN_TC / V, TY = NT / TX;
    static constexpr int RPW = TX < 32 ? 32 / TX : 1, R = TY / RPW;
};

struct gn_nhwc_geom {
    int64_t B, S, C, G, cpg;
    int64_t P, K; /* the reductions' chunks: K chunks of P pixels an image */
};

/* The geometry for TY pixel lanes a reduction block: P a multiple of TY * GN_UNROLL, from the shape alone. */
static gn_nhwc_geom gn_nhwc_geometry(const sdt_tensor *x, int groups, int TY)
{
    gn_nhwc_geom g;
    g.B = x->shape[0];
    g.C = x->shape[1];
    g.S = x->shape[2] * x->shape[3];
    g.G = groups;
    g.cpg = g.C / groups;
    const int64_t step = (int64_t)TY * GN_UNROLL, tiles = (g.C + GN_TC - 1) / GN_TC;
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

/* A reduction thread's place: its first channel c0, its lane's pixels [s, s1) stepping TY. */
template <typename T> struct gn_red_walk {
    int64_t c0, s, s1;
    int tx, ty;
};
template <typename T> __device__ __forceinline__ gn_red_walk<T> gn_red_walk_of(const gn_nhwc_geom &g)
{
    using L = gn_red<T>;
    gn_red_walk<T> w;
    w.tx = threadIdx.x % L::TX;
    w.ty = threadIdx.x / L::TX;
    w.c0 = (int64_t)blockIdx.x * GN_TC + w.tx * L::V;
    const int64_t s0 = blockIdx.y * g.P;
    w.s = s0 + w.ty;
    w.s1 = s0 + g.P < g.S ? s0 + g.P : g.S;
    return w;
}

/* The block's per-channel sums, step one: the warp's lanes of the same channels (lane l, l + TX,
 * ...) in a fixed shuffle tree, then one row a warp (a row of lanes for TX >= 32) into rows. The
 * caller syncs and adds the rows in order. */
template <typename T>
__device__ __forceinline__ void gn_rows_sum(float2 (*rows)[GN_TC], float2 (&a)[gn_red<T>::V], const gn_red_walk<T> &w)
{
    using L = gn_red<T>;
#pragma unroll
    for (int o = L::TX; o < 32; o *= 2)
#pragma unroll
        for (int v = 0; v < L::V; v++) {
            a[v].x += __shfl_down_sync(0xffffffffu, a[v].x, o);
            a[v].y += __shfl_down_sync(0xffffffffu, a[v].y, o);
        }
    if (w.ty % L::RPW == 0)
#pragma unroll
        for (int v = 0; v < L::V; v++) rows[w.ty / L::RPW][w.tx * L::V + v] = a[v];
}

/* stats[entry(b, c, k)] = the statistics of channel c over chunk k of image b. Every lane sums
 * value - shift with one shift per channel (its value at the chunk's first pixel, so the sums do
 * not cancel), so the lanes' sums simply add: one division per channel and chunk, not one per
 * combination. */
template <typename T> __global__ void __launch_bounds__(NT) gn_nhwc_stats_k(mstat *stats, io<T> x, gn_nhwc_geom g)
{
    using L = gn_red<T>;
    constexpr int V = L::V, U = GN_UNROLL;
    __shared__ float2 rows[L::R][GN_TC];
    __shared__ float shifts[GN_TC];
    const gn_red_walk<T> w = gn_red_walk_of<T>(g);
    const int64_t b = blockIdx.z, k = blockIdx.y, s0 = k * g.P;
    float shift[V];
    float2 a[V];
#pragma unroll
    for (int v = 0; v < V; v++) a[v] = make_float2(0, 0);
    if (w.c0 < g.C) { /* C is a multiple of V for T != void: a vector is wholly in or out */
        x.load((b * g.S + s0) * g.C + w.c0, shift);
        for (int64_t s = w.s; s < w.s1; s += L::TY * U) {
            float f[U][V];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (s + u * L::TY < w.s1) x.load((b * g.S + s + u * L::TY) * g.C + w.c0, f[u]);
#pragma unroll
            for (int u = 0; u < U; u++)
                if (s + u * L::TY < w.s1)
#pragma unroll
                    for (int v = 0; v < V; v++) {
                        float d = f[u][v] - shift[v];
                        a[v].x += d;
                        a[v].y += d * d;
                    }
        }
        if (w.ty == 0)
#pragma unroll
            for (int v = 0; v < V; v++) shifts[w.tx * V + v] = shift[v];
    }
    gn_rows_sum<T>(rows, a, w);
    __syncthreads();
    const int64_t c = (int64_t)blockIdx.x * GN_TC + threadIdx.x;
    if (threadIdx.x < GN_TC && c < g.C) {
        float2 t = rows[0][threadIdx.x];
#pragma unroll
        for (int r = 1; r < L::R; r++) t = make_float2(t.x + rows[r][threadIdx.x].x, t.y + rows[r][threadIdx.x].y);
        float n = (float)(w.s1 - s0), mu = t.x / n;
        stats[gn_nhwc_entry(g, b, c, k)] = mstat{n, shifts[threadIdx.x] + mu, fmaxf(t.y - t.x * mu, 0.0f)};
    }
}

/* One block per (image, group): mean and rstd from the group's K * cpg entries. */
__global__ void __launch_bounds__(NT)
    gn_nhwc_group_stats_k(float *mean, float *rstd, const mstat *stats, gn_nhwc_geom g, float eps)
{
    const int64_t bg = blockIdx.x, n = g.K * g.cpg;
    const mstat *e = stats + bg * n;
    mstat m{0, 0, 0};
    for (int64_t i = threadIdx.x; i < n; i += NT) m = mstat_combine(m, e[i]);
    m = block_mstat(m);
    if (threadIdx.x == 0) {
        mean[bg] = m.mean;
        rstd[bg] = rsqrtf(m.m2 / m.n + eps);
    }
}

/* part[entry(b, c, k)] = (sum of dn, sum of dn * (x - mean)) of channel c over chunk k of image b. */
template <typename T, int A>
__global__ void __launch_bounds__(NT)
    gn_nhwc_bwd_sums_k(float2 *part, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta, int bdt,
                       const float *mean, const float *rstd, gn_nhwc_geom g, sdt_activation act)
{
    using L = gn_red<T>;
    constexpr int V = L::V, U = GN_UNROLL;
    __shared__ float2 rows[L::R][GN_TC];
    const gn_red_walk<T> w = gn_red_walk_of<T>(g);
    const int64_t b = blockIdx.z, k = blockIdx.y;
    float2 a[V];
#pragma unroll
    for (int v = 0; v < V; v++) a[v] = make_float2(0, 0);
    if (w.c0 < g.C) {
        float mu[V], scale[V], shift[V];
#pragma unroll
        for (int v = 0; v < V; v++) {
            int64_t c = w.c0 + v, bg = b * g.G + c / g.cpg;
            mu[v] = mean[bg];
            if constexpr (A != GN_ACT_ID) {
                scale[v] = (gamma ? ld(gamma, gdt, c) : 1.0f) * rstd[bg];
                shift[v] = (beta ? ld(beta, bdt, c) : 0.0f) - mu[v] * scale[v];
            } else
                scale[v] = shift[v] = 0.0f;
        }
        for (int64_t s = w.s; s < w.s1; s += L::TY * U) {
            float xf[U][V], df[U][V];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (s + u * L::TY < w.s1) {
                    int64_t i = (b * g.S + s + u * L::TY) * g.C + w.c0;
                    x.load(i, xf[u]);
                    dy.load(i, df[u]);
                }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (s + u * L::TY < w.s1)
#pragma unroll
                    for (int v = 0; v < V; v++) {
                        float d = gn_grad<A>(act, df[u][v], xf[u][v] * scale[v] + shift[v]);
                        a[v].x += d;
                        a[v].y += d * (xf[u][v] - mu[v]);
                    }
        }
    }
    gn_rows_sum<T>(rows, a, w);
    __syncthreads();
    const int64_t c = (int64_t)blockIdx.x * GN_TC + threadIdx.x;
    if (threadIdx.x < GN_TC && c < g.C) {
        float2 t = rows[0][threadIdx.x];
#pragma unroll
        for (int r = 1; r < L::R; r++) t = make_float2(t.x + rows[r][threadIdx.x].x, t.y + rows[r][threadIdx.x].y);
        part[gn_nhwc_entry(g, b, c, k)] = t;
    }
}

/* One block per (image, group): the means of dn * gamma and of dn * gamma * x_hat over the group,
 * m[bg] = (m1, m2) as groupnorm.cu's gn_bwd_dx_k forms them. */
__global__ void __launch_bounds__(NT)
    gn_nhwc_group_sums_k(float2 *m, const float2 *part, const void *gamma, int gdt, const float *rstd, gn_nhwc_geom g)
{
    const int64_t bg = blockIdx.x, n = g.K * g.cpg, c0 = (bg % g.G) * g.cpg;
    const float2 *e = part + bg * n;
    float2 s = make_float2(0, 0);
    for (int64_t i = threadIdx.x; i < n; i += NT) {
        float gi = gamma ? ld(gamma, gdt, c0 + i % g.cpg) : 1.0f;
        float2 v = e[i];
        s.x += gi * v.x;
        s.y += gi * v.y;
    }
    s = block_sum2(s);
    if (threadIdx.x == 0) {
        float inv_n = 1.0f / (float)(g.cpg * g.S);
        m[bg] = make_float2(s.x * inv_n, s.y * rstd[bg] * inv_n);
    }
}

/* The elementwise passes' launch: blocks of bx vector columns (a pixel row's, or an NT-wide tile
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

/* The walk of an elementwise thread: its first channel c0 (past the row: c0 >= C), and its pixels
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
template <typename T, int A>
__global__ void __launch_bounds__(NT)
    gn_nhwc_fwd_k(io<T> out, io<T> x, const float *mean, const float *rstd, const void *gamma, int gdt,
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
                for (int k = 0; k < V; k++) f[u][k] = gn_act<A>(act, f[u][k] * scale[k] + shift[k]);
                out.store((b * g.S + s + u * w.step) * g.C + w.c0, f[u]);
            }
    }
}

/* dx += rstd * (dn * gamma - m1 - x_hat * m2) (groupnorm.cu's gn_bwd_dx_k), V consecutive channels
 * a thread, as dn * scale + lo + hi * (x - mean) with scale = gamma * rstd, lo = -rstd * m1 and
 * hi = -rstd^2 * m2 worked out once per channel. */
template <typename T, int A>
__global__ void __launch_bounds__(NT) gn_nhwc_bwd_dx_k(io<T> dx, io<T> dy, io<T> x, const void *gamma, int gdt,
                                                       const void *beta, int bdt, const float *mean, const float *rstd,
                                                       const float2 *m, gn_nhwc_geom g, int64_t pt, sdt_activation act)
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
        shift[k] = A == GN_ACT_ID ? 0.0f : (beta ? ld(beta, bdt, c) : 0.0f) - mu[k] * scale[k];
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
                    float d = gn_grad<A>(act, df[u][k], xf[u][k] * scale[k] + shift[k]);
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

/* The reductions' grid: channel tiles of GN_TC, the chunks, the images; and the group kernels' B * G blocks. */
static int gn_nhwc_grid(sdt_backend *be, const gn_nhwc_geom &g, dim3 *grid)
{
    if (g.K > 65535 || g.B > 65535 || g.B * g.G > INT32_MAX)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "groupnorm: %lld images of %lld pixels exceed one launch",
                         (long long)g.B, (long long)g.S);
    *grid = dim3((unsigned)((g.C + GN_TC - 1) / GN_TC), (unsigned)g.K, (unsigned)g.B);
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
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups, gn_red<T>::TY);
    dim3 grid;
    if (gn_nhwc_grid(be, g, &grid)) return -1;
    gn_ew_geom e = gn_ew_geometry(g, io<T>::VEC);
    if (gn_ew_check(be, e)) return -1;
    mstat *stats = (mstat *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(g.B * g.C * g.K) * sizeof(mstat));
    if (!stats) return -1;
    cudaStream_t s = STREAM(be);
    float *mp = (float *)mean->data, *rp = (float *)rstd->data;
    gn_nhwc_stats_k<T><<<grid, NT, 0, s>>>(stats, io_of<T>(x->data, x->dtype), g);
    CUDA_LAUNCHED(be);
    gn_nhwc_group_stats_k<<<(unsigned)(g.B * g.G), NT, 0, s>>>(mp, rp, stats, g, eps);
    CUDA_LAUNCHED(be);
    GN_ACT_SWITCH(act, A, {
        gn_nhwc_fwd_k<T, A><<<e.grid, dim3(e.bx, e.ly), 0, s>>>(io_of<T>(out->data, out->dtype),
                                                                io_of<T>(x->data, x->dtype), mp, rp, dat(gamma),
                                                                dty(gamma), dat(beta), dty(beta), g, e.pt, act);
    });
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
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups, gn_red<T>::TY);
    dim3 grid;
    if (gn_nhwc_grid(be, g, &grid)) return -1;
    gn_ew_geom e = gn_ew_geometry(g, io<T>::VEC);
    if (gn_ew_check(be, e)) return -1;
    int64_t entries = g.B * g.C * g.K;
    /* the chunk sums, then each group's two means */
    float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(entries + g.B * g.G) * sizeof(float2));
    if (!part) return -1;
    float2 *group_means = part + entries;
    cudaStream_t s = STREAM(be);
    const float *mp = (const float *)mean->data, *rp = (const float *)rstd->data;
    GN_ACT_SWITCH(act, A, {
        gn_nhwc_bwd_sums_k<T, A><<<grid, NT, 0, s>>>(part, io_of<T>(dout->data, dout->dtype),
                                                     io_of<T>(x->data, x->dtype), dat(gamma), dty(gamma), dat(beta),
                                                     dty(beta), mp, rp, g, act);
    });
    CUDA_LAUNCHED(be);
    if (dx) {
        gn_nhwc_group_sums_k<<<(unsigned)(g.B * g.G), NT, 0, s>>>(group_means, part, dat(gamma), dty(gamma), rp, g);
        CUDA_LAUNCHED(be);
        GN_ACT_SWITCH(act, A, {
            gn_nhwc_bwd_dx_k<T, A><<<e.grid, dim3(e.bx, e.ly), 0, s>>>(
                io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype),
                dat(gamma), dty(gamma), dat(beta), dty(beta), mp, rp, group_means, g, e.pt, act);
        });
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
