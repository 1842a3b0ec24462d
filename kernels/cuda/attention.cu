/* attention.cu - fused scaled-dot-product attention (FlashAttention-2), forward and
 * backward, with no [Tq, Tk] buffer anywhere. Semantics: kernels/ops.h.
 *
 * Forward walks key tiles with an online softmax (fp32 running max and sum per row)
 * and saves each row's logsumexp. Backward recomputes the probabilities tile by tile
 * from that logsumexp, with delta = rowsum(dO * O) for the softmax gradient, in two
 * kernels that own disjoint rows (one over key tiles writes dK and dV, one over query
 * tiles writes dQ), so results are deterministic and no atomics are needed. Every
 * gradient element is stored exactly once (by its row's owner, or by the reduction of
 * the dK/dV query splits' partials), so the op writes dq, dk, dv without reading them
 * (ops.h) and callers need not zero them.
 *
 * Two implementations of the same algorithm:
 *  - tensor cores (sm_80+, bf16/fp16 q, k, v, head dims 40, 64, 80, 160): 4 warps per block,
 *    each owning one or two m-tiles of 16 resident rows (query rows in forward and dQ, keys
 *    in dK/dV: 128 rows per block where the registers allow, else 64; tc_dims says which),
 *    the other side streaming through shared memory in double-buffered tiles of 64 rows;
 *    mma.sync m16n8k16 with fp32 accumulators fed by ldmatrix, each B fragment shared by
 *    the warp's m-tiles; the probabilities go from the accumulators straight into the next
 *    product's operand registers.
 *  - a scalar fp32 path for everything else (f32 tensors, mixed dtypes, other head dims
 *    up to 512 such as the VAE's single 512-wide head, GPUs before sm_80): a warp per
 *    row, a lane per key, the same recurrence.
 * Kernels first, then launchers.
 */
#include <stdint.h>

#include "attention_tc.cuh"
#include "cuda_ops.h"

#define ATTN_MAX_GENERIC_D 512

/* ======================================================= shared pieces */

__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* delta[b, h, i] = sum_d dout * out (fp32), one warp per row. */
__global__ void attn_delta_kernel(float *delta, const void *dout, int dot, const void *out, int ot, int B, int T, int H,
                                  int D)
{
    const int lane = threadIdx.x & 31;
    const int64_t rows = (int64_t)B * H * T;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += ((int64_t)gridDim.x * blockDim.x) >> 5) {
        const int t = (int)(r % T), bh = (int)(r / T);
        const int64_t base = row_at(bh / H, t, bh % H, T, H, D);
        float s = 0.0f;
        for (int d = lane; d < D; d += 32) s += ld(dout, dot, base + d) * ld(out, ot, base + d);
        s = warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

/* dst[i] = alpha * sum over splits of partial[s * n + i] (written, not accumulated); the fixed order
 * keeps it deterministic. Every split stores its whole plane of partials, zeros included. */
__global__ void attn_reduce_kernel(void *dst, int dt, const float *partial, int splits, int64_t n, float alpha)
{
    GRID_STRIDE(i, n)
    {
        float s = 0.0f;
        for (int k = 0; k < splits; k++) s += partial[(int64_t)k * n + i];
        st(dst, dt, i, alpha * s);
    }
}

/* ======================================================= scalar path */
/* A block of 4 warps takes 4 consecutive rows (a warp each) and walks tiles of 32 rows of
 * the other side (keys for forward and dQ, queries for dK/dV), a lane per row of the tile.
 * With STAGED (head dims up to GEN_STAGED_MAX_D) each tile's two tensors are copied once per
 * block into shared memory as fp32, padded to D + 1 floats a row so a lane per row reads
 * distinct banks; otherwise (the VAE's 512-wide head) lanes read global memory directly.
 * NC chunks of 32 dims per lane hold a row's accumulators (D <= 32 * NC). */

#define GEN_STAGED_MAX_D 160

struct gen_args {
    const void *q, *k, *v, *dout;
    int qt, kt, vt, dot;
    void *out, *dq, *dk, *dv;
    int ot, dqt, dkt, dvt;
    float *lse;          /* forward output, may be NULL */
    const float *lse_in; /* backward input */
    const float *delta;
    attn_shape s;
};

/* The tile of 32 rows [r0, r0 + 32) of head (b, h) of two [B, T, H*D] tensors x and y. */
struct gen_tile {
    const void *x, *y;
    int xt, yt;
    int64_t base; /* element offset of row r0 */
    int64_t HD;
    int rows;       /* valid rows (rows past T read as 0) */
    float *sx, *sy; /* staged copies [32][D + 1] */
};

template <bool STAGED> __device__ __forceinline__ void gen_tile_load(gen_tile &t, int D)
{
    if (STAGED) {
        __syncthreads(); /* the previous tile is no longer read */
        for (int e = threadIdx.x; e < 32 * D; e += blockDim.x) {
            const int r = e / D, d = e % D;
            const bool in = r < t.rows;
            t.sx[r * (D + 1) + d] = in ? ld(t.x, t.xt, t.base + r * t.HD + d) : 0.0f;
            t.sy[r * (D + 1) + d] = in ? ld(t.y, t.yt, t.base + r * t.HD + d) : 0.0f;
        }
        __syncthreads();
    }
}
template <bool STAGED> __device__ __forceinline__ float gen_x(const gen_tile &t, int r, int d, int D)
{
    return STAGED ? t.sx[r * (D + 1) + d] : ld(t.x, t.xt, t.base + r * t.HD + d);
}
template <bool STAGED> __device__ __forceinline__ float gen_y(const gen_tile &t, int r, int d, int D)
{
    return STAGED ? t.sy[r * (D + 1) + d] : ld(t.y, t.yt, t.base + r * t.HD + d);
}

/* Shared memory of a scalar kernel: 2 rows of D per warp, plus two staged tiles. */
static size_t gen_smem_bytes(int D, bool staged)
{
    return sizeof(float) * ((size_t)4 * 2 * D + (staged ? (size_t)2 * 32 * (D + 1) : 0));
}

/* The warp's own row: row blockIdx.x * 4 + warp (of T) of head blockIdx.y, copied as fp32 from
 * x and y (y may be NULL) into the warp's two shared rows (zeros past T). */
struct gen_row {
    int r, bh, b, h;
    bool active;
    int64_t off; /* element offset of the row */
    float *sx, *sy;
};
__device__ __forceinline__ gen_row gen_own_row(const gen_args &a, int T, const void *x, int xt, const void *y, int yt)
{
    extern __shared__ float gen_smem[];
    const int lane = threadIdx.x & 31, D = a.s.D;
    gen_row w;
    w.r = blockIdx.x * 4 + (threadIdx.x >> 5), w.bh = blockIdx.y, w.b = w.bh / a.s.H, w.h = w.bh % a.s.H;
    w.active = w.r < T;
    w.sx = gen_smem + (threadIdx.x >> 5) * 2 * D;
    w.sy = w.sx + D;
    w.off = row_at(w.b, w.active ? w.r : 0, w.h, T, a.s.H, D);
    for (int d = lane; d < D; d += 32) {
        w.sx[d] = w.active ? ld(x, xt, w.off + d) : 0.0f;
        if (y) w.sy[d] = w.active ? ld(y, yt, w.off + d) : 0.0f;
    }
    __syncwarp();
    return w;
}

/* The tiles of the other side: x and y's rows, staged after the 4 warps' own rows. */
__device__ __forceinline__ gen_tile gen_tiles(const gen_args &a, const void *x, int xt, const void *y, int yt)
{
    extern __shared__ float gen_smem[];
    const int D = a.s.D;
    return gen_tile{x, y, xt, yt, 0, a.s.HD, 0, gen_smem + 8 * D, gen_smem + 8 * D + 32 * (D + 1)};
}

/* One query row per warp over every key it sees (a lane per key): forward (out, lse through
 * the online softmax) or, with DQ, dQ += scale * sum_j P (dP - delta) k_j. */
template <int NC, bool STAGED, bool DQ> __global__ void __launch_bounds__(128) attn_gen_rows_kernel(gen_args a)
{
    const int lane = threadIdx.x & 31, D = a.s.D, H = a.s.H;
    const gen_row me = gen_own_row(a, a.s.Tq, a.q, a.qt, DQ ? a.dout : NULL, a.dot);
    const int i = me.r, bh = me.bh, b = me.b, h = me.h;
    const bool active = me.active;
    const float *sq = me.sx, *sdo = me.sy;
    const int64_t qo = me.off;
    float o[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) o[c] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* forward's running max and sum */
    const float lse = DQ && active ? a.lse_in[(int64_t)bh * a.s.Tq + i] : 0.0f;
    const float delta = DQ && active ? a.delta[(int64_t)bh * a.s.Tq + i] : 0.0f;
    const int kend = !active ? 0 : a.s.causal ? i + 1 : a.s.Tk;
    const int last = min(a.s.Tq - 1, (int)blockIdx.x * 4 + 3), kend_block = a.s.causal ? last + 1 : a.s.Tk;
    gen_tile t = gen_tiles(a, a.k, a.kt, a.v, a.vt);
    for (int j0 = 0; j0 < kend_block; j0 += 32) {
        t.base = row_at(b, j0, h, a.s.Tk, H, D);
        t.rows = min(32, a.s.Tk - j0);
        gen_tile_load<STAGED>(t, D);
        if (j0 >= kend) continue;
        const int j = j0 + lane;
        float s = 0.0f, dp = 0.0f;
        if (j < kend)
            for (int d = 0; d < D; d++) {
                s += sq[d] * gen_x<STAGED>(t, lane, d, D);
                if (DQ) dp += sdo[d] * gen_y<STAGED>(t, lane, d, D);
            }
        s *= a.s.scale;
        float w; /* the weight of key j in this row's sum: P (forward, unnormalized) or dS (dQ) */
        if (DQ) {
            w = j < kend ? __expf(s - lse) * (dp - delta) : 0.0f;
        } else {
            const float mnew = fmaxf(m, warp_max(j < kend ? s : -INFINITY)); /* finite: lane 0's key is visible */
            const float corr = __expf(m - mnew);
            w = j < kend ? __expf(s - mnew) : 0.0f;
            l = l * corr + warp_sum(w);
            m = mnew;
#pragma unroll
            for (int c = 0; c < NC; c++) o[c] *= corr;
        }
        const int n = min(32, kend - j0);
        for (int r = 0; r < n; r++) {
            const float wr = __shfl_sync(0xffffffffu, w, r);
#pragma unroll
            for (int c = 0; c < NC; c++)
                if (c * 32 + lane < D)
                    o[c] += wr * (DQ ? gen_x<STAGED>(t, r, c * 32 + lane, D) : gen_y<STAGED>(t, r, c * 32 + lane, D));
        }
    }
    if (!active) return;
#pragma unroll
    for (int c = 0; c < NC; c++)
        if (c * 32 + lane < D) {
            if (DQ)
                st(a.dq, a.dqt, qo + c * 32 + lane, o[c] * a.s.scale); /* the row's only store */
            else
                st(a.out, a.ot, qo + c * 32 + lane, o[c] / l);
        }
    if (!DQ && a.lse && lane == 0) a.lse[(int64_t)bh * a.s.Tq + i] = m + logf(l);
}

/* dK and dV of one key row per warp, over every query that sees it (a lane per query).
 * (UNUSED keeps the scalar kernels' template shape alike for the launcher.) */
template <int NC, bool STAGED, bool UNUSED> __global__ void __launch_bounds__(128) attn_gen_dkdv_kernel(gen_args a)
{
    const int lane = threadIdx.x & 31, D = a.s.D, H = a.s.H;
    const gen_row me = gen_own_row(a, a.s.Tk, a.k, a.kt, a.v, a.vt);
    const int j = me.r, bh = me.bh, b = me.b, h = me.h;
    const bool active = me.active;
    const float *sk = me.sx, *sv = me.sy;
    const int64_t ko = me.off;
    float dk[NC], dv[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) dk[c] = dv[c] = 0.0f;
    const float *lse = a.lse_in + (int64_t)bh * a.s.Tq, *delta = a.delta + (int64_t)bh * a.s.Tq;
    gen_tile t = gen_tiles(a, a.q, a.qt, a.dout, a.dot);
    for (int i0 = a.s.causal ? (int)blockIdx.x * 4 : 0; i0 < a.s.Tq; i0 += 32) {
        t.base = row_at(b, i0, h, a.s.Tq, H, D);
        t.rows = min(32, a.s.Tq - i0);
        gen_tile_load<STAGED>(t, D);
        if (!active) continue;
        const int i = i0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (i < a.s.Tq && !(a.s.causal && i < j)) {
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < D; d++) {
                s += gen_x<STAGED>(t, lane, d, D) * sk[d];
                dp += gen_y<STAGED>(t, lane, d, D) * sv[d];
            }
            p = __expf(s * a.s.scale - lse[i]);
            ds = p * (dp - delta[i]);
        }
        const int n = min(32, a.s.Tq - i0);
        for (int r = 0; r < n; r++) {
            const float pr = __shfl_sync(0xffffffffu, p, r), dsr = __shfl_sync(0xffffffffu, ds, r);
#pragma unroll
            for (int c = 0; c < NC; c++)
                if (c * 32 + lane < D) {
                    dv[c] += pr * gen_y<STAGED>(t, r, c * 32 + lane, D);
                    dk[c] += dsr * gen_x<STAGED>(t, r, c * 32 + lane, D);
                }
        }
    }
    if (!active) return;
#pragma unroll
    for (int c = 0; c < NC; c++)
        if (c * 32 + lane < D) {
            if (a.dk) st(a.dk, a.dkt, ko + c * 32 + lane, dk[c] * a.s.scale); /* the row's only store */
            if (a.dv) st(a.dv, a.dvt, ko + c * 32 + lane, dv[c]);
        }
}

/* ======================================================= tensor-core path */

struct tc_args {
    const void *q, *k, *v, *dout, *out_in;
    void *out, *dq, *dk, *dv;
    int ot, dqt, dkt, dvt;
    float *lse;
    const float *lse_in, *delta;
    float *partial; /* dK/dV per query split when splits > 1: [2, splits, B, Tk, HD] */
    int splits;
    attn_shape s;
};

/* Forward: block = 64 MT query rows of one head, warp = MT m-tiles of 16 consecutive rows;
 * K and V tiles of 64 keys stream through shared memory, double-buffered up to head dim 80
 * (the next pair copied while this one computes, one barrier per tile), single at 160 (copied
 * after). The scores stay unscaled until the exponent, where scale * log2(e) is folded into
 * one fma. */
template <typename T, int D>
__global__ void __launch_bounds__(TC_THREADS, tc_fwd_min_blocks(D)) attn_tc_fwd_kernel(tc_args a)
{
    using dims = tc_dims<D>;
    constexpr int DP = dims::DP, LD = dims::LD, KQ = DP / 16, NT = TC_ROWS / 8, ND = dims::NDU, MT = dims::FWD_MT;
    constexpr int ROWS = TC_ROWS * MT;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    T *sQ = reinterpret_cast<T *>(tc_smem);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const int q0 = blockIdx.x * ROWS, bh = blockIdx.y, b = bh / a.s.H, h = bh % a.s.H;
    const int wrow0 = q0 + warp * 16 * MT; /* the warp's first row */
    const int Tk = a.s.Tk, n_tiles_all = (Tk + TC_ROWS - 1) / TC_ROWS;
    const int n_tiles = a.s.causal ? min(n_tiles_all, (q0 + ROWS - 1) / TC_ROWS + 1) : n_tiles_all;
    const tc_stream<T, D> kv = {sQ + ROWS * LD, a.k, a.v, b, h, Tk, a.s.H};
    tc_load_tile<T, D, ROWS>(sQ, a.q, b, h, q0, a.s.Tq, a.s.H);
    kv.issue(0);
    cp_async_commit();
    const float sl2 = a.s.scale * ATTN_LOG2E;
    float o[MT][ND][4];
    tc_zero(o);
    float m[MT][2], l[MT][2]; /* running max (unscaled scores) and sum per row */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    uint32_t qf[MT][KQ][4];
    for (int t = 0; t < n_tiles; t++) {
        cp_async_wait<0>();
        __syncthreads(); /* tile t has landed for every thread, and every warp is done with tile t - 1 */
        if (dims::NBUF == 2 && t + 1 < n_tiles) kv.issue(t + 1); /* into the buffer tile t - 1 used */
        cp_async_commit();
        if (t == 0 || !dims::FWD_HOLD_Q) tc_load_a<LD>(qf, sQ, warp * 16 * MT);
        const T *sK = kv.x_at(t), *sV = kv.y_at(t);
        float s[MT][NT][4];
        tc_zero(s);
        tc_gemm<T, LD, KQ, NT, false, dims::KHALF>(s, qf, sK, 0, 0);
        /* element e of n-tile n of m-tile mt: row wrow0 + 16 mt + g + 8 (e >> 1), key k0 + n*8 + tig*2 + (e & 1);
         * the mask is applied only on tiles that reach past Tk or past the warp's first row (causal) */
        const int k0 = t * TC_ROWS;
        if (k0 + TC_ROWS > Tk || (a.s.causal && k0 + TC_ROWS - 1 > wrow0)) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = k0 + n * 8 + tig * 2 + (e & 1), row = wrow0 + mt * 16 + g + 8 * (e >> 1);
                        if (key >= Tk || (a.s.causal && key > row)) s[mt][n][e] = -INFINITY;
                    }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx[2] = {m[mt][0], m[mt][1]}, base2[2], corr[2];
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[mt][n][e]);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                const float base = mx[r] == -INFINITY ? 0.0f : mx[r];
                corr[r] = exp2_ftz((m[mt][r] - base) * sl2);
                base2[r] = base * sl2;
                m[mt][r] = mx[r];
                l[mt][r] *= corr[r];
            }
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    s[mt][n][e] = exp2_ftz(fmaf(s[mt][n][e], sl2, -base2[e >> 1]));
                    l[mt][e >> 1] += s[mt][n][e];
                }
#pragma unroll
            for (int n = 0; n < ND; n++)
                o[mt][n][0] *= corr[0], o[mt][n][1] *= corr[0], o[mt][n][2] *= corr[1], o[mt][n][3] *= corr[1];
        }
        uint32_t pf[MT][TC_ROWS / 16][4];
        tc_acc_to_a<T>(pf, s);
        tc_gemm<T, LD, TC_ROWS / 16, ND, true, false>(o, pf, sV, 0, 0);
        if (dims::NBUF == 1 && t + 1 < n_tiles) {
            __syncthreads();
            kv.issue(t + 1);
            cp_async_commit();
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            const int row = wrow0 + mt * 16 + g + 8 * r;
            if (row >= a.s.Tq) continue;
            const float inv = 1.0f / lr;
            const int64_t base_o = row_at(b, row, h, a.s.Tq, a.s.H, D);
#pragma unroll
            for (int n = 0; n < ND; n++) {
                const int d = n * 8 + tig * 2;
                if (d < D) {
                    st(a.out, a.ot, base_o + d, o[mt][n][2 * r] * inv);
                    st(a.out, a.ot, base_o + d + 1, o[mt][n][2 * r + 1] * inv);
                }
            }
            if (a.lse && tig == 0) a.lse[(int64_t)bh * a.s.Tq + row] = (m[mt][r] * sl2 + log2f(lr)) * ATTN_LN2;
        }
}

/* dK, dV: block = 64 MT keys of one head (warp = MT m-tiles of 16 keys) over the query tiles
 * of split blockIdx.z, each tile of 64 queries taken in steps of DKDV_STEP (fewer live
 * accumulators). Works transposed: S^T = K Q^T, so P^T and dS^T land in the accumulators
 * laid out as the A operands of dV += P^T dO and dK += dS^T Q. */
template <typename T, int D> __global__ void __launch_bounds__(TC_THREADS) attn_tc_dkdv_kernel(tc_args a)
{
    using dims = tc_dims<D>;
    constexpr int DP = dims::DP, LD = dims::LD, KQ = DP / 16, ND = dims::NDU, MT = dims::DKDV_MT,
                  STEP = dims::DKDV_STEP;
    constexpr int KROWS = TC_ROWS * MT, NS = STEP / 8;
    constexpr bool HOLD = dims::DKDV_HOLD;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    T *sK = reinterpret_cast<T *>(tc_smem), *sV = sK + KROWS * LD;
    float *sLse = reinterpret_cast<float *>(sV + KROWS * LD + 2 * dims::NBUF * dims::TILE), *sDelta = sLse + TC_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const int k0 = blockIdx.x * KROWS, bh = blockIdx.y, b = bh / a.s.H, h = bh % a.s.H;
    const int krow0 = k0 + warp * 16 * MT; /* the warp's first key */
    const int Tq = a.s.Tq, q_tiles = (Tq + TC_ROWS - 1) / TC_ROWS;
    const int first = a.s.causal ? k0 / TC_ROWS : 0, per = (q_tiles - first + a.splits - 1) / a.splits;
    const int t_begin = first + blockIdx.z * per, t_end = min(q_tiles, t_begin + per);
    const tc_stream<T, D> qo = {sV + KROWS * LD, a.q, a.dout, b, h, Tq, a.s.H};
    tc_load_tile<T, D, KROWS>(sK, a.k, b, h, k0, a.s.Tk, a.s.H);
    tc_load_tile<T, D, KROWS>(sV, a.v, b, h, k0, a.s.Tk, a.s.H);
    if (t_begin < t_end) qo.issue(t_begin);
    cp_async_commit();
    const float sl2 = a.s.scale * ATTN_LOG2E;
    float dk[MT][ND][4], dv[MT][ND][4];
    tc_zero(dk);
    tc_zero(dv);
    uint32_t kf[MT][KQ][4], vf[MT][KQ][4]; /* written and read only with HOLD */
    for (int t = t_begin; t < t_end; t++) {
        const int q0 = t * TC_ROWS;
        if (dims::NBUF == 2 && t + 1 < t_end) qo.issue(t + 1);
        cp_async_commit();
        for (int r = threadIdx.x; r < TC_ROWS; r += TC_THREADS) {
            const bool in = q0 + r < Tq;
            sLse[r] = in ? a.lse_in[(int64_t)bh * Tq + q0 + r] * ATTN_LOG2E : INFINITY; /* p = 0 past Tq */
            sDelta[r] = in ? a.delta[(int64_t)bh * Tq + q0 + r] : 0.0f;
        }
        if (dims::NBUF == 2)
            cp_async_wait<1>(); /* everything but step t + 1's copy */
        else
            cp_async_wait<0>();
        __syncthreads();
        if (HOLD && t == t_begin) {
            tc_load_a<LD>(kf, sK, warp * 16 * MT);
            tc_load_a<LD>(vf, sV, warp * 16 * MT);
        }
        const T *sQ = qo.x_at(t), *sO = qo.y_at(t);
#pragma unroll
        for (int n0 = 0; n0 < TC_ROWS; n0 += STEP) {
            if (a.s.causal && krow0 > q0 + n0 + STEP - 1) continue; /* every key of the warp is after every query */
            float s[MT][NS][4], dp[MT][NS][4];
            tc_two_products<T, D, HOLD>(s, dp, kf, vf, sK, sV, warp * 16 * MT, sQ, sO,
                                        n0); /* S^T = K Q^T, dP^T = V dO^T */
            /* element e of n-tile n of m-tile mt: key krow0 + 16 mt + g + 8 (e >> 1), query q0 + n0 + n*8 + tig*2 + (e & 1) */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int qi = n0 + n * 8 + tig * 2 + (e & 1);
                        const bool masked = a.s.causal && krow0 + mt * 16 + g + 8 * (e >> 1) > q0 + qi;
                        const float p = masked ? 0.0f : exp2_ftz(fmaf(s[mt][n][e], sl2, -sLse[qi]));
                        s[mt][n][e] = p;
                        dp[mt][n][e] = p * (dp[mt][n][e] - sDelta[qi]);
                    }
            uint32_t pf[MT][NS / 2][4];
            tc_acc_to_a<T>(pf, s);
            tc_gemm<T, LD, NS / 2, ND, true, false>(dv, pf, sO, n0, 0); /* dV += P^T dO */
            tc_acc_to_a<T>(pf, dp);
            tc_gemm<T, LD, NS / 2, ND, true, false>(dk, pf, sQ, n0, 0); /* dK += dS^T Q */
        }
        __syncthreads();
        if (dims::NBUF == 1 && t + 1 < t_end) qo.issue(t + 1);
    }
    const int64_t plane = (int64_t)a.s.B * a.s.Tk * a.s.HD;
    float *pk = a.partial ? a.partial + (int64_t)blockIdx.z * plane : NULL;
    float *pv = a.partial ? a.partial + (int64_t)(a.splits + blockIdx.z) * plane : NULL;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        if (a.dk)
            tc_store_rows<D>(dk[mt], a.dk, a.dkt, pk, b, h, krow0 + mt * 16, a.s.Tk, a.s.H,
                             a.partial ? 1.0f : a.s.scale);
        if (a.dv) tc_store_rows<D>(dv[mt], a.dv, a.dvt, pv, b, h, krow0 + mt * 16, a.s.Tk, a.s.H, 1.0f);
    }
}

/* dQ: block = 64 MT query rows of one head (warp = MT m-tiles of 16 rows) over the key tiles
 * they see, each tile of 64 keys taken in steps of DQ_STEP. */
template <typename T, int D> __global__ void __launch_bounds__(TC_THREADS) attn_tc_dq_kernel(tc_args a)
{
    using dims = tc_dims<D>;
    constexpr int DP = dims::DP, LD = dims::LD, KQ = DP / 16, ND = dims::NDU, MT = dims::DQ_MT, STEP = dims::DQ_STEP;
    constexpr int QROWS = TC_ROWS * MT, NS = STEP / 8;
    constexpr bool HOLD = dims::DQ_HOLD;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    T *sQ = reinterpret_cast<T *>(tc_smem), *sO = sQ + QROWS * LD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const int q0 = blockIdx.x * QROWS, bh = blockIdx.y, b = bh / a.s.H, h = bh % a.s.H;
    const int wrow0 = q0 + warp * 16 * MT; /* the warp's first row */
    const int Tk = a.s.Tk, n_tiles_all = (Tk + TC_ROWS - 1) / TC_ROWS;
    const int n_tiles = a.s.causal ? min(n_tiles_all, (q0 + QROWS - 1) / TC_ROWS + 1) : n_tiles_all;
    const tc_stream<T, D> kv = {sO + QROWS * LD, a.k, a.v, b, h, Tk, a.s.H};
    tc_load_tile<T, D, QROWS>(sQ, a.q, b, h, q0, a.s.Tq, a.s.H);
    tc_load_tile<T, D, QROWS>(sO, a.dout, b, h, q0, a.s.Tq, a.s.H);
    kv.issue(0);
    cp_async_commit();
    const float sl2 = a.s.scale * ATTN_LOG2E;
    float lse2[MT][2], delta[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = wrow0 + mt * 16 + g + 8 * r;
            const bool in = row < a.s.Tq;
            lse2[mt][r] = in ? a.lse_in[(int64_t)bh * a.s.Tq + row] * ATTN_LOG2E : INFINITY;
            delta[mt][r] = in ? a.delta[(int64_t)bh * a.s.Tq + row] : 0.0f;
        }
    float dq[MT][ND][4];
    tc_zero(dq);
    uint32_t qf[MT][KQ][4], of[MT][KQ][4]; /* written and read only with HOLD */
    for (int t = 0; t < n_tiles; t++) {
        const int k0 = t * TC_ROWS;
        if (dims::NBUF == 2 && t + 1 < n_tiles) kv.issue(t + 1);
        cp_async_commit();
        if (dims::NBUF == 2)
            cp_async_wait<1>(); /* everything but step t + 1's copy */
        else
            cp_async_wait<0>();
        __syncthreads();
        if (HOLD && t == 0) {
            tc_load_a<LD>(qf, sQ, warp * 16 * MT);
            tc_load_a<LD>(of, sO, warp * 16 * MT);
        }
        const T *sK = kv.x_at(t), *sV = kv.y_at(t);
#pragma unroll
        for (int n0 = 0; n0 < TC_ROWS; n0 += STEP) {
            if (a.s.causal && k0 + n0 > wrow0 + 16 * MT - 1)
                continue; /* every key of the step is after the warp's rows */
            float s[MT][NS][4], dp[MT][NS][4];
            tc_two_products<T, D, HOLD>(s, dp, qf, of, sQ, sO, warp * 16 * MT, sK, sV, n0); /* S = Q K^T, dP = dO V^T */
            /* element e of n-tile n of m-tile mt: row wrow0 + 16 mt + g + 8 (e >> 1), key k0 + n0 + n*8 + tig*2 + (e & 1);
             * the mask is applied only on steps that reach past Tk or past the warp's first row (causal) */
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) s[mt][n][e] = exp2_ftz(fmaf(s[mt][n][e], sl2, -lse2[mt][e >> 1]));
            if (k0 + n0 + STEP > Tk || (a.s.causal && k0 + n0 + STEP - 1 > wrow0)) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int n = 0; n < NS; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int key = k0 + n0 + n * 8 + tig * 2 + (e & 1);
                            if (key >= Tk || (a.s.causal && key > wrow0 + mt * 16 + g + 8 * (e >> 1)))
                                s[mt][n][e] = 0.0f;
                        }
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) dp[mt][n][e] = s[mt][n][e] * (dp[mt][n][e] - delta[mt][e >> 1]);
            uint32_t pf[MT][NS / 2][4];
            tc_acc_to_a<T>(pf, dp);
            tc_gemm<T, LD, NS / 2, ND, true, false>(dq, pf, sK, n0, 0); /* dQ += dS K */
        }
        __syncthreads();
        if (dims::NBUF == 1 && t + 1 < n_tiles) kv.issue(t + 1);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        tc_store_rows<D>(dq[mt], a.dq, a.dqt, NULL, b, h, wrow0 + mt * 16, a.s.Tq, a.s.H, a.s.scale);
}

/* ======================================================= launchers */

/* The geometry of q [B, Tq, H*D] and k [B, Tk, H*D] (their shapes, heads, the causal mask and lse
 * are checked before the op runs: kernels/op_checks.c); refuses only a head wider than these
 * kernels take. */
static int attn_geometry(sdt_backend *be, const char *op, const sdt_tensor *q, const sdt_tensor *k, int heads,
                         bool causal, attn_shape *s)
{
    *s = (attn_shape){(int)q->shape[0],
                      (int)q->shape[1],
                      (int)k->shape[1],
                      heads,
                      (int)(q->shape[2] / heads),
                      (int)q->shape[2],
                      0.0f,
                      causal};
    s->scale = 1.0f / sqrtf((float)s->D);
    if (s->D > ATTN_MAX_GENERIC_D)
        return cuda_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: head dim %d is over the supported %d", op, s->D,
                         ATTN_MAX_GENERIC_D);
    return 0;
}

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* Whether the tensor-core kernels can run here: the card is sm_80+ AND the code the driver
 * loaded for them was compiled for sm_80+. A module built only as sm_75 PTX, JIT-compiled on a
 * newer card, has empty tensor-core bodies (mma.sync needs sm_80), so the card's capability
 * alone would pick kernels that compute nothing. */
bool cuda_attention_tc_available(int device_major)
{
    if (device_major < 8) return false;
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, attn_tc_fwd_kernel<__nv_bfloat16, 64>) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return attr.ptxVersion >= 80;
}

/* Whether the tensor-core kernels take this call: one 16-bit dtype, a supported head dim, sm_80+. */
static bool tc_usable(sdt_backend *be, const attn_shape *s, const sdt_tensor *const *ts, int n)
{
    if (!ctx_of(be)->attention_tc) return false; /* sm_80+ card and sm_80+ code */
    if (!(s->D == 40 || s->D == 64 || s->D == 80 || s->D == 160)) return false;
    const int dt = ts[0]->dtype;
    if (dt != SDT_BF16 && dt != SDT_F16) return false;
    for (int i = 0; i < n; i++)
        if (ts[i]->dtype != dt || !aligned16(ts[i]->data)) return false;
    return true;
}

/* Launches kernel<T, D> with dynamic shared memory bytes (raising the opt-in limit when needed). */
#define TC_LAUNCH(be, kernel, T, D, grid, bytes, args)                                                                 \
    do {                                                                                                               \
        CUDA_TRY(be, cudaFuncSetAttribute(kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(bytes)));   \
        kernel<T, D><<<grid, TC_THREADS, bytes, ctx_of(be)->stream>>>(args);                                           \
        CUDA_LAUNCHED(be);                                                                                             \
    } while (0)

/* Picks the <T, D> instantiation of a tensor-core kernel. */
#define TC_DISPATCH(be, kernel, is_bf16, D, grid, bytes, args)                                                         \
    do {                                                                                                               \
        if (is_bf16) {                                                                                                 \
            switch (D) {                                                                                               \
                case 40:                                                                                               \
                    TC_LAUNCH(be, kernel, __nv_bfloat16, 40, grid, bytes, args);                                       \
                    break;                                                                                             \
                case 64:                                                                                               \
                    TC_LAUNCH(be, kernel, __nv_bfloat16, 64, grid, bytes, args);                                       \
                    break;                                                                                             \
                case 80:                                                                                               \
                    TC_LAUNCH(be, kernel, __nv_bfloat16, 80, grid, bytes, args);                                       \
                    break;                                                                                             \
                default:                                                                                               \
                    TC_LAUNCH(be, kernel, __nv_bfloat16, 160, grid, bytes, args);                                      \
                    break;                                                                                             \
            }                                                                                                          \
        } else {                                                                                                       \
            switch (D) {                                                                                               \
                case 40:                                                                                               \
                    TC_LAUNCH(be, kernel, __half, 40, grid, bytes, args);                                              \
                    break;                                                                                             \
                case 64:                                                                                               \
                    TC_LAUNCH(be, kernel, __half, 64, grid, bytes, args);                                              \
                    break;                                                                                             \
                case 80:                                                                                               \
                    TC_LAUNCH(be, kernel, __half, 80, grid, bytes, args);                                              \
                    break;                                                                                             \
                default:                                                                                               \
                    TC_LAUNCH(be, kernel, __half, 160, grid, bytes, args);                                             \
                    break;                                                                                             \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

static size_t tc_tile_bytes(int D)
{
    return (size_t)TC_ROWS * ((D + 15) / 16 * 16 + 8) * 2;
}

/* Each kernel's block: its resident rows (64 per m-tile) and its shared memory, the tiles laid
 * out as the kernels above take them. */
static int tc_fwd_rows(int D)
{
    return TC_ROWS * tc_fwd_mt(D);
}
static int tc_dkdv_rows(int D)
{
    return TC_ROWS * tc_dkdv_mt(D);
}
static int tc_dq_rows(int D)
{
    return TC_ROWS * tc_dq_mt(D);
}
static size_t tc_fwd_smem(int D)
{
    return (size_t)(tc_fwd_mt(D) + 2 * tc_stream_buffers(D)) * tc_tile_bytes(D);
}
static size_t tc_dkdv_smem(int D)
{
    return (size_t)(2 * tc_dkdv_mt(D) + 2 * tc_stream_buffers(D)) * tc_tile_bytes(D) + 2 * TC_ROWS * sizeof(float);
}
static size_t tc_dq_smem(int D)
{
    return (size_t)(2 * tc_dq_mt(D) + 2 * tc_stream_buffers(D)) * tc_tile_bytes(D);
}

/* Launches a scalar kernel<NC, STAGED, DQ> over `rows` rows, NC = 32-dim chunks per lane covering D;
 * head dims up to GEN_STAGED_MAX_D stage their tiles in shared memory (under the default 48 KiB). */
#define GEN_LAUNCH_NC(be, kernel, DQ, NC, grid, s, args)                                                               \
    do {                                                                                                               \
        const bool staged_ = (s).D <= GEN_STAGED_MAX_D;                                                                \
        const size_t bytes_ = gen_smem_bytes((s).D, staged_);                                                          \
        if (staged_)                                                                                                   \
            kernel<NC, true, DQ><<<grid, 128, bytes_, ctx_of(be)->stream>>>(args);                                     \
        else                                                                                                           \
            kernel<NC, false, DQ><<<grid, 128, bytes_, ctx_of(be)->stream>>>(args);                                    \
    } while (0)
#define GEN_LAUNCH(be, kernel, DQ, s, rows, args)                                                                      \
    do {                                                                                                               \
        dim3 grid_((unsigned)(((rows) + 3) / 4), (unsigned)((s).B * (s).H));                                           \
        if ((s).D <= 32)                                                                                               \
            GEN_LAUNCH_NC(be, kernel, DQ, 1, grid_, s, args);                                                          \
        else if ((s).D <= 64)                                                                                          \
            GEN_LAUNCH_NC(be, kernel, DQ, 2, grid_, s, args);                                                          \
        else if ((s).D <= 128)                                                                                         \
            GEN_LAUNCH_NC(be, kernel, DQ, 4, grid_, s, args);                                                          \
        else if ((s).D <= 256)                                                                                         \
            GEN_LAUNCH_NC(be, kernel, DQ, 8, grid_, s, args);                                                          \
        else                                                                                                           \
            GEN_LAUNCH_NC(be, kernel, DQ, 16, grid_, s, args);                                                         \
        CUDA_LAUNCHED(be);                                                                                             \
    } while (0)

static int forward_run(sdt_backend *be, const attn_shape *s, const sdt_tensor *q, const sdt_tensor *k,
                       const sdt_tensor *v, void *out, int ot, float *lse, bool tc)
{
    if (tc) {
        tc_args a = {};
        a.q = q->data, a.k = k->data, a.v = v->data, a.out = out, a.ot = ot, a.lse = lse, a.s = *s;
        const int rows = tc_fwd_rows(s->D);
        dim3 grid((unsigned)((s->Tq + rows - 1) / rows), (unsigned)(s->B * s->H));
        TC_DISPATCH(be, attn_tc_fwd_kernel, q->dtype == SDT_BF16, s->D, grid, tc_fwd_smem(s->D), a);
        return 0;
    }
    gen_args a = {};
    a.q = q->data, a.k = k->data, a.v = v->data, a.qt = q->dtype, a.kt = k->dtype, a.vt = v->dtype;
    a.out = out, a.ot = ot, a.lse = lse, a.s = *s;
    GEN_LAUNCH(be, attn_gen_rows_kernel, false, *s, s->Tq, a);
    return 0;
}

int cuda_attention_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *lse, const sdt_tensor *q, const sdt_tensor *k,
                           const sdt_tensor *v, int heads, bool causal)
{
    attn_shape s;
    if (attn_geometry(be, "attention_forward", q, k, heads, causal, &s)) return -1;
    int rc = cuda_attention_short_keys_forward(be, &s, out, lse, q, k, v); /* cross-attention's few keys */
    if (rc <= 0) return rc;
    rc = cuda_sdpa_forward(be, out, lse, q, k, v, heads, causal); /* cuDNN's fused attention where it applies */
    if (rc <= 0) return rc;
    const sdt_tensor *all[4] = {q, k, v, out};
    return forward_run(be, &s, q, k, v, out->data, out->dtype, lse ? (float *)lse->data : NULL,
                       tc_usable(be, &s, all, 4));
}

/* Query splits for the dK/dV kernel: enough blocks to fill the GPU when there are few key tiles
 * (cross-attention has 77 keys: two tiles), each split's fp32 partials summed afterwards. */
static int dkdv_splits(sdt_backend *be, const attn_shape *s)
{
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx_of(be)->device) != cudaSuccess || sms <= 0)
        sms = 80;
    const int krows = tc_dkdv_rows(s->D);
    const int blocks = (s->Tk + krows - 1) / krows * s->B * s->H, q_tiles = (s->Tq + TC_ROWS - 1) / TC_ROWS;
    int splits = (2 * sms + blocks - 1) / blocks;
    if (s->causal || splits < 1) splits = 1; /* causal work per key tile is uneven; CLIP's T = 77 is small anyway */
    if (splits > q_tiles) splits = q_tiles;
    if (splits > 16) splits = 16;
    return splits;
}

int cuda_attention_backward(sdt_backend *be, sdt_tensor *dq, sdt_tensor *dk, sdt_tensor *dv, const sdt_tensor *dout,
                            const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v, const sdt_tensor *out,
                            const sdt_tensor *lse, int heads, bool causal)
{
    const char *op = "attention_backward";
    attn_shape s;
    if (attn_geometry(be, op, q, k, heads, causal, &s)) return -1;
    if (!dq && !dk && !dv) return 0;
    int rc = cuda_attention_short_keys_backward(be, &s, dq, dk, dv, dout, q, k, v, out, lse);
    if (rc <= 0) return rc;
    rc = cuda_sdpa_backward(be, dq, dk, dv, dout, q, k, v, out, lse, heads, causal);
    if (rc <= 0) return rc;
    const sdt_tensor *all[5] = {q, k, v, dout, lse ? out : q};
    const bool tc = tc_usable(be, &s, all, 5);
    const int64_t rows = (int64_t)s.B * s.H * s.Tq;
    /* Without saved statistics, recompute out and lse first (out in q's dtype, as forward would store it). */
    const void *o = lse ? out->data : NULL;
    int odt = lse ? out->dtype : q->dtype;
    const float *lse_p = lse ? (const float *)lse->data : NULL;
    if (!lse) {
        void *obuf = cuda_scratch(be, 8, (size_t)sdt_tensor_numel(q) * sdt_dtype_size(q->dtype));
        float *lbuf = (float *)cuda_scratch(be, 9, (size_t)rows * sizeof(float));
        if (!obuf || !lbuf || forward_run(be, &s, q, k, v, obuf, odt, lbuf, tc)) return -1;
        o = obuf;
        lse_p = lbuf;
    }
    float *delta = (float *)cuda_scratch(be, 3, (size_t)rows * sizeof(float));
    if (!delta) return -1;
    attn_delta_kernel<<<grid_for(rows * 32, 256), 256, 0, ctx_of(be)->stream>>>(delta, dout->data, dout->dtype, o, odt,
                                                                                s.B, s.Tq, s.H, s.D);
    CUDA_LAUNCHED(be);
    if (!tc) {
        gen_args a = {};
        a.q = q->data, a.k = k->data, a.v = v->data, a.dout = dout->data;
        a.qt = q->dtype, a.kt = k->dtype, a.vt = v->dtype, a.dot = dout->dtype;
        a.dq = dq ? dq->data : NULL, a.dk = dk ? dk->data : NULL, a.dv = dv ? dv->data : NULL;
        a.dqt = dq ? dq->dtype : 0, a.dkt = dk ? dk->dtype : 0, a.dvt = dv ? dv->dtype : 0;
        a.lse_in = lse_p, a.delta = delta, a.s = s;
        if (dk || dv) GEN_LAUNCH(be, attn_gen_dkdv_kernel, false, s, s.Tk, a);
        if (dq) GEN_LAUNCH(be, attn_gen_rows_kernel, true, s, s.Tq, a);
        return 0;
    }
    tc_args a = {};
    a.q = q->data, a.k = k->data, a.v = v->data, a.dout = dout->data, a.out_in = o;
    a.dq = dq ? dq->data : NULL, a.dk = dk ? dk->data : NULL, a.dv = dv ? dv->data : NULL;
    a.dqt = dq ? dq->dtype : 0, a.dkt = dk ? dk->dtype : 0, a.dvt = dv ? dv->dtype : 0;
    a.lse_in = lse_p, a.delta = delta, a.s = s, a.splits = 1;
    const bool bf16 = q->dtype == SDT_BF16;
    if (dk || dv) {
        a.splits = dkdv_splits(be, &s);
        const int64_t plane = (int64_t)s.B * s.Tk * s.HD;
        if (a.splits > 1) {
            a.partial =
                (float *)cuda_scratch(be, CUDA_ATTENTION_SCRATCH_SLOT, (size_t)(2 * a.splits * plane) * sizeof(float));
            if (!a.partial) return -1;
        }
        const int krows = tc_dkdv_rows(s.D);
        dim3 grid((unsigned)((s.Tk + krows - 1) / krows), (unsigned)(s.B * s.H), (unsigned)a.splits);
        TC_DISPATCH(be, attn_tc_dkdv_kernel, bf16, s.D, grid, tc_dkdv_smem(s.D), a);
        if (a.splits > 1) {
            if (dk) {
                attn_reduce_kernel<<<grid_for(plane, 256), 256, 0, ctx_of(be)->stream>>>(dk->data, dk->dtype, a.partial,
                                                                                         a.splits, plane, s.scale);
                CUDA_LAUNCHED(be);
            }
            if (dv) {
                attn_reduce_kernel<<<grid_for(plane, 256), 256, 0, ctx_of(be)->stream>>>(
                    dv->data, dv->dtype, a.partial + (int64_t)a.splits * plane, a.splits, plane, 1.0f);
                CUDA_LAUNCHED(be);
            }
        }
    }
    if (dq) {
        const int rows = tc_dq_rows(s.D);
        dim3 grid((unsigned)((s.Tq + rows - 1) / rows), (unsigned)(s.B * s.H));
        TC_DISPATCH(be, attn_tc_dq_kernel, bf16, s.D, grid, tc_dq_smem(s.D), a);
    }
    return 0;
}
