/* groupnorm_nhwc.cu - torch.nn.GroupNorm (with its optional activation) on channels-last x
 * (tensor.h: memory [B, S, C], S the pixels), on the GPU. Semantics: kernels/ops.h; the NCHW
 * kernels and the formulas mirrored here: groupnorm.cu.
 *
 * A group is cpg consecutive channels of every pixel: in NHWC memory a strided set of short runs.
 * The reductions therefore go by channel: a block is a tile of GN_TILE consecutive channels (the
 * threads along x, so each pixel row is read coalesced) by GN_LANES pixel lanes (along y), over a
 * chunk of GN_ROWS pixels of one image. Each thread keeps its channel's statistics over its lane's
 * pixels (Welford per value, norm_stats.cuh), the lanes are combined in lane order in shared
 * memory, and each channel's chunk statistics land in scratch group by group
 * ([b, g, chunk, channel of the group]). One warp per (image, group) then combines its entries in
 * a fixed lane-strided order and a fixed tree (warp_mstat), so no result depends on scheduling.
 * The normalisation (forward) and the input gradient (backward) then go over the same tiles with
 * V consecutive channels a thread (one 16-byte vector, vec_io.cuh, when C is a multiple of the
 * vector width; else one channel): each thread works out its channels' constants once and walks
 * its lane's pixels, so no element pays an index division.
 * Forward: statistics, group combination (writes mean and rstd), normalisation: x read twice.
 * Backward: per-channel chunk sums of dn and dn * (x - mean) (dn the gradient at the norm's
 * output), the group's two means, then dx; gamma's and beta's gradients come from the same sums. */
#include "norm_stats.cuh"
#include "vec_io.cuh"

#define GN_TILE 32  /* channels per block */
#define GN_LANES 8  /* pixel lanes per block: GN_TILE * GN_LANES = NT threads */
#define GN_ROWS 128 /* pixels per chunk */

struct gn_nhwc_geom {
    int64_t B, S, C, G, cpg, K; /* K: chunks of GN_ROWS pixels */
};

static gn_nhwc_geom gn_nhwc_geometry(const sdt_tensor *x, int groups)
{
    gn_nhwc_geom g;
    g.B = x->shape[0];
    g.C = x->shape[1];
    g.S = x->shape[2] * x->shape[3];
    g.G = groups;
    g.cpg = g.C / groups;
    g.K = (g.S + GN_ROWS - 1) / GN_ROWS;
    return g;
}

/* Entry of channel c of image b, chunk k in the group-ordered scratch: [b, g, k, c % cpg]. */
__device__ __forceinline__ int64_t gn_nhwc_entry(const gn_nhwc_geom &g, int64_t b, int64_t c, int64_t k)
{
    int64_t grp = c / g.cpg;
    return ((b * g.G + grp) * g.K + k) * g.cpg + (c - grp * g.cpg);
}

/* The block's tile: its channel, image, chunk and the first and past-last pixel of its lane walk. */
struct gn_nhwc_tile {
    int64_t c, b, k, s0, s1;
    bool live;
};
__device__ __forceinline__ gn_nhwc_tile gn_nhwc_tile_of(const gn_nhwc_geom &g)
{
    gn_nhwc_tile t;
    t.c = (int64_t)blockIdx.x * GN_TILE + threadIdx.x;
    t.k = blockIdx.y;
    t.b = blockIdx.z;
    t.s0 = t.k * GN_ROWS;
    t.s1 = t.s0 + GN_ROWS < g.S ? t.s0 + GN_ROWS : g.S;
    t.live = t.c < g.C;
    return t;
}

/* stats[entry(b, c, k)] = the statistics of channel c over chunk k of image b. */
__global__ void gn_nhwc_stats_k(mstat *stats, const void *x, int xdt, gn_nhwc_geom g)
{
    __shared__ mstat lanes[GN_LANES][GN_TILE];
    gn_nhwc_tile t = gn_nhwc_tile_of(g);
    mstat m{0, 0, 0};
    if (t.live)
        for (int64_t s = t.s0 + threadIdx.y; s < t.s1; s += GN_LANES) {
            float f[1] = {ld(x, xdt, (t.b * g.S + s) * g.C + t.c)};
            m = mstat_combine(m, mstat_of<1>(f));
        }
    lanes[threadIdx.y][threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.y == 0 && t.live) {
        for (int l = 1; l < GN_LANES; l++) m = mstat_combine(m, lanes[l][threadIdx.x]);
        stats[gn_nhwc_entry(g, t.b, t.c, t.k)] = m;
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
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) m = mstat_combine(m, e[i]);
    m = warp_mstat(m);
    if (threadIdx.x % 32 == 0) {
        mean[bg] = m.mean;
        rstd[bg] = rsqrtf(m.m2 / m.n + eps);
    }
}

/* The elementwise passes' walk: V channels from c0 (this thread's) of image blockIdx.z, its lane's
 * pixels of chunk blockIdx.y; body(i) gets the flat index of each pixel's first of the V. */
template <int V, typename Body>
__device__ __forceinline__ void gn_nhwc_walk(const gn_nhwc_geom &g, int64_t c0, Body body)
{
    int64_t b = blockIdx.z, s0 = (int64_t)blockIdx.y * GN_ROWS, s1 = s0 + GN_ROWS < g.S ? s0 + GN_ROWS : g.S;
    for (int64_t s = s0 + threadIdx.y; s < s1; s += GN_LANES) body((b * g.S + s) * g.C + c0);
}

/* out = act(x * scale + shift), scale = gamma * rstd, shift = beta - mean * scale (groupnorm.cu's
 * expression), V consecutive channels a thread. */
template <typename T>
__global__ void gn_nhwc_fwd_k(io<T> out, io<T> x, const float *mean, const float *rstd, const void *gamma, int gdt,
                              const void *beta, int bdt, gn_nhwc_geom g, sdt_activation act)
{
    constexpr int V = io<T>::VEC;
    const int64_t c0 = ((int64_t)blockIdx.x * GN_TILE + threadIdx.x) * V, b = blockIdx.z;
    if (c0 >= g.C) return;
    float scale[V], shift[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        int64_t c = c0 + k, bg = b * g.G + c / g.cpg;
        float mu = mean[bg], rs = rstd[bg];
        scale[k] = gamma ? ld(gamma, gdt, c) * rs : rs;
        shift[k] = (beta ? ld(beta, bdt, c) : 0.0f) - mu * scale[k];
    }
    gn_nhwc_walk<V>(g, c0, [&](int64_t i) {
        float f[V];
        x.load(i, f);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float y = f[k] * scale[k] + shift[k];
            f[k] = act == SDT_ACT_IDENTITY ? y : act_value(act, y);
        }
        out.store(i, f);
    });
}

/* part[entry(b, c, k)] = (sum of dn, sum of dn * (x - mean)) of channel c over chunk k of image b. */
__global__ void gn_nhwc_bwd_sums_k(float2 *part, const void *dy, int dyt, const void *x, int xdt, const void *gamma, int gdt,
                                   const void *beta, int bdt, const float *mean, const float *rstd, gn_nhwc_geom g,
                                   sdt_activation act)
{
    __shared__ float2 lanes[GN_LANES][GN_TILE];
    gn_nhwc_tile t = gn_nhwc_tile_of(g);
    float2 s = make_float2(0, 0);
    if (t.live) {
        int64_t bg = t.b * g.G + t.c / g.cpg;
        float mu = mean[bg], rs = rstd[bg], gc = gamma ? ld(gamma, gdt, t.c) : 1.0f;
        float scale = gc * rs, shift = (beta ? ld(beta, bdt, t.c) : 0.0f) - mu * scale;
        for (int64_t p = t.s0 + threadIdx.y; p < t.s1; p += GN_LANES) {
            int64_t i = (t.b * g.S + p) * g.C + t.c;
            float xv = ld(x, xdt, i), d = gn_out_grad(act, ld(dy, dyt, i), xv * scale + shift);
            s.x += d;
            s.y += d * (xv - mu);
        }
    }
    lanes[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && t.live) {
        for (int l = 1; l < GN_LANES; l++) s = make_float2(s.x + lanes[l][threadIdx.x].x, s.y + lanes[l][threadIdx.x].y);
        part[gn_nhwc_entry(g, t.b, t.c, t.k)] = s;
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
    for (int64_t i = threadIdx.x % 32; i < n; i += 32) {
        float gi = gamma ? ld(gamma, gdt, c0 + i % g.cpg) : 1.0f;
        s.x += gi * e[i].x;
        s.y += gi * e[i].y;
    }
    s = warp_sum2(s);
    if (threadIdx.x % 32 == 0) {
        float inv_n = 1.0f / (float)(g.cpg * g.S);
        m[bg] = make_float2(s.x * inv_n, s.y * rstd[bg] * inv_n);
    }
}

/* dx += rstd * (dn * gamma - m1 - x_hat * m2) (groupnorm.cu's gn_bwd_dx_k), V consecutive channels a thread. */
template <typename T>
__global__ void gn_nhwc_bwd_dx_k(io<T> dx, io<T> dy, io<T> x, const void *gamma, int gdt, const void *beta, int bdt,
                                 const float *mean, const float *rstd, const float2 *m, gn_nhwc_geom g, sdt_activation act)
{
    constexpr int V = io<T>::VEC;
    const int64_t c0 = ((int64_t)blockIdx.x * GN_TILE + threadIdx.x) * V, b = blockIdx.z;
    if (c0 >= g.C) return;
    float mu[V], rs[V], gc[V], scale[V], shift[V], m1[V], m2[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
        int64_t c = c0 + k, bg = b * g.G + c / g.cpg;
        mu[k] = mean[bg];
        rs[k] = rstd[bg];
        gc[k] = gamma ? ld(gamma, gdt, c) : 1.0f;
        scale[k] = gc[k] * rs[k];
        shift[k] = (beta ? ld(beta, bdt, c) : 0.0f) - mu[k] * scale[k];
        m1[k] = m[bg].x;
        m2[k] = m[bg].y;
    }
    gn_nhwc_walk<V>(g, c0, [&](int64_t i) {
        float xf[V], df[V], gf[V];
        x.load(i, xf);
        dy.load(i, df);
        dx.load(i, gf);
#pragma unroll
        for (int k = 0; k < V; k++) {
            float d = gn_out_grad(act, df[k], xf[k] * scale[k] + shift[k]), xh = (xf[k] - mu[k]) * rs[k];
            gf[k] += rs[k] * (d * gc[k] - m1[k] - xh * m2[k]);
        }
        dx.store(i, gf);
    });
}

/* dgamma[c] += sum over b of rstd * (sum of dn * (x - mean)), dbeta[c] += sum over b of (sum of dn):
 * images, then chunks, in order. */
__global__ void gn_nhwc_bwd_params_k(void *dg, int dgt, void *db, int dbt, const float2 *part, const float *rstd,
                                     gn_nhwc_geom g)
{
    GRID_STRIDE(c, g.C)
    {
        float sg = 0, sb = 0;
        for (int64_t b = 0; b < g.B; b++) {
            float s1 = 0, s2 = 0;
            for (int64_t k = 0; k < g.K; k++) {
                float2 e = part[gn_nhwc_entry(g, b, c, k)];
                s1 += e.x;
                s2 += e.y;
            }
            sg += s2 * rstd[b * g.G + c / g.cpg];
            sb += s1;
        }
        if (dg) acc(dg, dgt, c, sg);
        if (db) acc(db, dbt, c, sb);
    }
}

static int gn_nhwc_grid(sdt_backend *be, const gn_nhwc_geom &g, dim3 *grid)
{
    if (g.K > 65535 || g.B > 65535)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "groupnorm: %lld images of %lld pixels exceed one launch", (long long)g.B,
                         (long long)g.S);
    *grid = dim3((unsigned)((g.C + GN_TILE - 1) / GN_TILE), (unsigned)g.K, (unsigned)g.B);
    return 0;
}

/* The elementwise passes' grid: tiles of GN_TILE vectors of V channels, the reductions' chunks and images. */
static dim3 gn_nhwc_vec_grid(const gn_nhwc_geom &g, int V)
{
    return dim3((unsigned)((g.C / V + GN_TILE - 1) / GN_TILE), (unsigned)g.K, (unsigned)g.B);
}

int cuda_groupnorm_nhwc_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mean, sdt_tensor *rstd, const sdt_tensor *x,
                                const sdt_tensor *gamma, const sdt_tensor *beta, int groups, float eps, sdt_activation act)
{
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups);
    if (g.B * g.S * g.C == 0) return 0;
    dim3 grid;
    if (gn_nhwc_grid(be, g, &grid)) return -1;
    int64_t entries = g.B * g.C * g.K;
    mstat *stats = (mstat *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)entries * sizeof(mstat));
    if (!stats) return -1;
    cudaStream_t s = STREAM(be);
    float *mp = (float *)mean->data, *rp = (float *)rstd->data;
    gn_nhwc_stats_k<<<grid, dim3(GN_TILE, GN_LANES), 0, s>>>(stats, x->data, x->dtype, g);
    CUDA_LAUNCHED(be);
    gn_nhwc_group_stats_k<<<grid_for(g.B * g.G * 32, NT), NT, 0, s>>>(mp, rp, stats, g, eps);
    CUDA_LAUNCHED(be);
    const void *ptrs[2] = {out->data, x->data};
    bool same = out->dtype == x->dtype && vec_ok(x->dtype, g.C, ptrs, 2);
    SDT_IO_SWITCH(same, x->dtype, T, {
        gn_nhwc_fwd_k<T><<<gn_nhwc_vec_grid(g, io<T>::VEC), dim3(GN_TILE, GN_LANES), 0, s>>>(
            io_of<T>(out->data, out->dtype), io_of<T>(x->data, x->dtype), mp, rp, dat(gamma), dty(gamma), dat(beta), dty(beta), g,
            act);
    });
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_groupnorm_nhwc_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, sdt_tensor *dbeta, const sdt_tensor *dout,
                                 const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *beta, const sdt_tensor *mean,
                                 const sdt_tensor *rstd, int groups, sdt_activation act)
{
    gn_nhwc_geom g = gn_nhwc_geometry(x, groups);
    if (g.B * g.S * g.C == 0) return 0;
    dim3 grid;
    if (gn_nhwc_grid(be, g, &grid)) return -1;
    int64_t entries = g.B * g.C * g.K;
    /* the chunk sums, then each group's two means */
    float2 *part = (float2 *)cuda_scratch(be, GN_SCRATCH_SLOT, (size_t)(entries + g.B * g.G) * sizeof(float2));
    if (!part) return -1;
    float2 *group_means = part + entries;
    cudaStream_t s = STREAM(be);
    const float *mp = (const float *)mean->data, *rp = (const float *)rstd->data;
    gn_nhwc_bwd_sums_k<<<grid, dim3(GN_TILE, GN_LANES), 0, s>>>(part, dout->data, dout->dtype, x->data, x->dtype, dat(gamma),
                                                               dty(gamma), dat(beta), dty(beta), mp, rp, g, act);
    CUDA_LAUNCHED(be);
    if (dx) {
        gn_nhwc_group_sums_k<<<grid_for(g.B * g.G * 32, NT), NT, 0, s>>>(group_means, part, dat(gamma), dty(gamma), rp, g);
        CUDA_LAUNCHED(be);
        const void *ptrs[3] = {dx->data, dout->data, x->data};
        bool same = dout->dtype == x->dtype && dx->dtype == x->dtype && vec_ok(x->dtype, g.C, ptrs, 3);
        SDT_IO_SWITCH(same, x->dtype, T, {
            gn_nhwc_bwd_dx_k<T><<<gn_nhwc_vec_grid(g, io<T>::VEC), dim3(GN_TILE, GN_LANES), 0, s>>>(
                io_of<T>(dx->data, dx->dtype), io_of<T>(dout->data, dout->dtype), io_of<T>(x->data, x->dtype), dat(gamma),
                dty(gamma), dat(beta), dty(beta), mp, rp, group_means, g, act);
        });
        CUDA_LAUNCHED(be);
    }
    if (dgamma || dbeta) {
        gn_nhwc_bwd_params_k<<<grid_for(g.C, 128), 128, 0, s>>>(dgamma ? dgamma->data : NULL, dty(dgamma),
                                                               dbeta ? dbeta->data : NULL, dty(dbeta), part, rp, g);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
