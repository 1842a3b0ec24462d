/* attention_short_keys.cu - attention over few keys (Tk <= 128: the UNet's cross-attention to the 77 text
 * tokens), forward and backward, on tensor cores. Semantics: kernels/ops.h; fragment helpers: attention_tc.cuh.
 *
 * Why not the FlashAttention-shaped kernels (attention.cu, cuDNN's): with 77 keys the work is memory-bound
 * (q, out, dout, dq are ~20 MB each at SDXL b4, K and V 20 KB a head), and those kernels, built for long keys,
 * stream K/V tiles with an online softmax and split the queries for dK/dV (bench/NOTES.md runs 28-29: ~8x from
 * the memory-bound time). Here one block holds all of its head's K and V in shared memory (keys padded to KP,
 * a multiple of 16: pad rows are zeros, masked out of the softmax) and walks its share of the queries:
 *  - forward: a warp per 16-query tile: S = Q K^T (16 x KP in registers), the exact row softmax (no online
 *    rescaling), O = P V, O and lse written (O through the warp's shared buffer, as 16-byte rows).
 *  - backward: chunks of 128 queries (16 per warp). Phase 1, a warp per 16 queries: delta = rowsum(dO * O),
 *    P recomputed from the saved lse, dP = dO V^T, dS = P (dP - delta), dQ = scale dS K written directly.
 *    Phase 2, a warp per 16 keys (transposed, as attention.cu's dK/dV kernel): S^T = K Q^T, dP^T = V dO^T over
 *    the chunk's queries, dV += P^T dO and dK += dS^T Q in fp32 registers, added into the block's running sums.
 *    Each block stores one fp32 partial of dK and dV (or dK, dV themselves when one block covers the head);
 *    a second kernel sums the partials in block order. No atomics: the same bits on every run.
 * Shared memory (LD = head dim padded to 16, + 8): K and V 2 KP LD 2 bytes; forward adds two 16-row Q buffers
 * per warp (8 warps: 16 x 16 LD 2), backward the chunk's Q and dO (2 x 128 LD 2), lse and delta (2 x 128
 * floats) and the running dK, dV sums of the KP / 16 warps with keys (2 x KP/16 x 32 lanes x 4 ND floats, ND =
 * head dim / 8):
 *   d40 (LD 56)  KP 80: fwd 17.9 + 28.7 = 46.6 KB; bwd 17.9 + 28.7 + 1 + 25.6 = 73.2 KB
 *   d64 (LD 72)  KP 80: fwd 23.0 + 36.9 = 59.9 KB; bwd 23.0 + 36.9 + 1 + 41.0 = 101.9 KB (2 blocks an SM)
 *   d80 (LD 88)  KP 80: fwd 28.2 + 45.1 = 73.3 KB; bwd 28.2 + 45.1 + 1 + 51.2 = 125.5 KB
 *   KP 128 (81..128 keys) adds 0.6 x that K/V share, and 1.6 x the sums (d80 bwd: 173 KB, one block an SM).
 * Registers (fp32 accumulators a thread): forward S KP/2 (40 at KP 80) + O 4 ND (20, 32, 40) + Q fragments 4 KQ
 * (KQ = padded head dim / 16: 12, 16, 20), P's fragments KP/4 taking S's place; backward phase 1 dQ 4 ND + Q and
 * dO fragments 8 KQ + S, dP 16; phase 2 dK, dV 8 ND (40, 64, 80) + S^T, dP^T 16 + one A fragment set 4 KQ, the
 * running sums in shared memory so the phases share the registers (128 a thread up to d64: 2 blocks an SM).
 * d160 (dK + dV alone 160 registers) stays on attention.cu (sk_applies). */
#include "attention_short_keys_plan.h"
#include "attention_tc.cuh"
#include "cuda_ops.h"

struct sk_args {
    const void *q, *k, *v, *dout, *out_in;
    void *out, *dq, *dk, *dv; /* 16-bit, q's dtype (sk_applies); each gradient may be NULL */
    float *lse;               /* forward, may be NULL */
    const float *lse_in;      /* backward */
    float *partial;           /* backward with splits > 1: [2, splits, B, Tk, HD] (dK's, then dV's) */
    int dt;                   /* their dtype */
    int splits, per;          /* blocks per head; 16-query tiles (forward) or chunks (backward) per block */
    attn_shape s;
};

template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t u);
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t u)
{
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&u));
}
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t u)
{
    return __half22float2(*reinterpret_cast<__half2 *>(&u));
}

/* Rows [r0, r0 + ROWS) of head (b, h) of a [B, T, H*D] tensor into a [ROWS, LD] tile by the NTHR threads
 * numbered `me` (a warp or the block), 16 bytes per copy; rows past T and the columns D..DP are zeros. */
template <typename T, int D, int ROWS, int NTHR>
__device__ __forceinline__ void sk_load_rows(T *tile, const void *src, int b, int h, int r0, int rows_total, int H,
                                             int me)
{
    constexpr int CH = tc_dims<D>::DP / 8, LD = tc_dims<D>::LD;
    for (int c = me; c < ROWS * CH; c += NTHR) {
        const int r = c / CH, col = (c % CH) * 8;
        T *dst = tile + r * LD + col;
        if (r0 + r < rows_total && col < D)
            cp_async16(dst, (const T *)src + row_at(b, r0 + r, h, rows_total, H, D) + col);
        else
            *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
    }
}

/* Forward: block = (split blockIdx.x, head blockIdx.y), its 16-query tiles [per x, per (x + 1)), warp w taking
 * every 8th from the w-th; each warp double-buffers its Q tiles (the next copied while this one computes). */
template <typename T, int D, int KP> __global__ void __launch_bounds__(SK_THREADS) attn_sk_fwd_kernel(sk_args a)
{
    using dims = tc_dims<D>;
    constexpr int LD = dims::LD, KQ = dims::DP / 16, ND = dims::NDU, NK = KP / 8;
    extern __shared__ __align__(16) unsigned char sk_smem[];
    T *sK = reinterpret_cast<T *>(sk_smem), *sV = sK + KP * LD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    T *qbuf = sV + KP * LD + warp * 2 * 16 * LD; /* the warp's two [16, LD] buffers */
    const int bh = blockIdx.y, b = bh / a.s.H, h = bh % a.s.H, Tq = a.s.Tq, Tk = a.s.Tk;
    const int tiles = (Tq + 15) / 16, t_begin = blockIdx.x * a.per, t_end = min(tiles, t_begin + a.per);
    const int mine = t_begin + warp < t_end ? (t_end - t_begin - warp + SK_WARPS - 1) / SK_WARPS : 0;
    sk_load_rows<T, D, KP, SK_THREADS>(sK, a.k, b, h, 0, Tk, a.s.H, threadIdx.x);
    sk_load_rows<T, D, KP, SK_THREADS>(sV, a.v, b, h, 0, Tk, a.s.H, threadIdx.x);
    cp_async_commit();
    if (mine > 0) sk_load_rows<T, D, 16, 32>(qbuf, a.q, b, h, (t_begin + warp) * 16, Tq, a.s.H, lane);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads(); /* K and V are in for every warp: the block's only barrier */
    const float sl2 = a.s.scale * ATTN_LOG2E;
    for (int i = 0; i < mine; i++) {
        const int q0 = (t_begin + warp + i * SK_WARPS) * 16;
        T *buf = qbuf + (i & 1) * 16 * LD;
        if (i + 1 < mine) { /* into the other buffer, which the previous tile's O copy has left (syncwarp below) */
            sk_load_rows<T, D, 16, 32>(qbuf + ((i + 1) & 1) * 16 * LD, a.q, b, h, q0 + SK_WARPS * 16, Tq, a.s.H, lane);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncwarp();
        uint32_t qf[1][KQ][4];
        tc_load_a<LD>(qf, buf, 0);
        float s[1][NK][4];
        tc_zero(s);
        tc_gemm<T, LD, KQ, NK, false, dims::KHALF>(s, qf, sK, 0, 0); /* S = Q K^T, unscaled */
        /* element e of n-tile n: row q0 + g + 8 (e >> 1), key n*8 + tig*2 + (e & 1); pad keys leave the softmax */
        if (Tk < KP) {
#pragma unroll
            for (int n = 0; n < NK; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (n * 8 + tig * 2 + (e & 1) >= Tk) s[0][n][e] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < NK; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[0][n][e]);
#pragma unroll
        for (int r = 0; r < 2; r++) { /* a row's keys are spread over its 4 lanes (tig) */
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2)); /* finite: key 0 is real */
        }
        const float base2[2] = {mx[0] * sl2, mx[1] * sl2};
#pragma unroll
        for (int n = 0; n < NK; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[0][n][e] = exp2_ftz(fmaf(s[0][n][e], sl2, -base2[e >> 1]));
                l[e >> 1] += s[0][n][e];
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        uint32_t pf[1][KP / 16][4];
        tc_acc_to_a<T>(pf, s);
        float o[1][ND][4];
        tc_zero(o);
        tc_gemm<T, LD, KP / 16, ND, true, false>(o, pf, sV, 0, 0); /* O = P V (unnormalized) */
        /* O normalized into the warp's buffer (its Q is in qf now), then out as 16-byte row pieces */
        const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
#pragma unroll
        for (int n = 0; n < ND; n++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                *reinterpret_cast<uint32_t *>(buf + (g + 8 * r) * LD + n * 8 + tig * 2) =
                    pack2<T>(o[0][n][2 * r] * inv[r], o[0][n][2 * r + 1] * inv[r]);
        __syncwarp();
        for (int c = lane; c < 16 * (D / 8); c += 32) {
            const int r = c / (D / 8), col = (c % (D / 8)) * 8;
            if (q0 + r < Tq)
                *reinterpret_cast<uint4 *>((T *)a.out + row_at(b, q0 + r, h, Tq, a.s.H, D) + col) =
                    *reinterpret_cast<const uint4 *>(buf + r * LD + col);
        }
        if (a.lse && tig == 0)
#pragma unroll
            for (int r = 0; r < 2; r++)
                if (q0 + g + 8 * r < Tq) a.lse[(int64_t)bh * Tq + q0 + g + 8 * r] = (base2[r] + log2f(l[r])) * ATTN_LN2;
        __syncwarp(); /* the buffer is read out before the next tile's copy lands in it */
    }
}

/* Backward: block = (split blockIdx.x, head blockIdx.y), its chunks of 128 queries [per x, per (x + 1)).
 * Warp w: queries 16 w.. of each chunk in phase 1, keys 16 w.. (if any) in phase 2 (header comment). */
template <typename T, int D, int KP>
__global__ void __launch_bounds__(SK_THREADS, D <= 64 ? 2 : 1) attn_sk_bwd_kernel(sk_args a)
{
    using dims = tc_dims<D>;
    constexpr int LD = dims::LD, KQ = dims::DP / 16, ND = dims::NDU;
    extern __shared__ __align__(16) unsigned char sk_smem[];
    T *sK = reinterpret_cast<T *>(sk_smem), *sV = sK + KP * LD, *sQ = sV + KP * LD, *sO = sQ + SK_CHUNK * LD;
    float *sLse = reinterpret_cast<float *>(sO + SK_CHUNK * LD), *sDelta = sLse + SK_CHUNK;
    /* the block's running dK, dV sums for the warps with keys, each thread's own elements (lane-contiguous:
     * no bank conflicts, no barrier); kept here, not in registers, so phase 1 has the registers to itself */
    float *sAccK = sDelta + SK_CHUNK + (threadIdx.x >> 5) * ND * 4 * 32 + (threadIdx.x & 31),
          *sAccV = sAccK + (KP / 16) * ND * 4 * 32;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
    const int bh = blockIdx.y, b = bh / a.s.H, h = bh % a.s.H, Tq = a.s.Tq, Tk = a.s.Tk, H = a.s.H;
    const int chunks = (Tq + SK_CHUNK - 1) / SK_CHUNK, c_begin = blockIdx.x * a.per,
              c_end = min(chunks, c_begin + a.per);
    const bool keys_mine = warp * 16 < Tk, dkdv = a.dk || a.dv; /* phase 2: this warp has real keys */
    const float sl2 = a.s.scale * ATTN_LOG2E;
    sk_load_rows<T, D, KP, SK_THREADS>(sK, a.k, b, h, 0, Tk, H, threadIdx.x);
    sk_load_rows<T, D, KP, SK_THREADS>(sV, a.v, b, h, 0, Tk, H, threadIdx.x);
    cp_async_commit();
    if (keys_mine)
        for (int e = 0; e < ND * 4; e++) sAccK[e * 32] = sAccV[e * 32] = 0.0f;
    for (int c = c_begin; c < c_end; c++) {
        const int q0 = c * SK_CHUNK;
        __syncthreads(); /* the previous chunk's phase 2 is done with sQ, sO, sLse, sDelta */
        sk_load_rows<T, D, SK_CHUNK, SK_THREADS>(sQ, a.q, b, h, q0, Tq, H, threadIdx.x);
        sk_load_rows<T, D, SK_CHUNK, SK_THREADS>(sO, a.dout, b, h, q0, Tq, H, threadIdx.x);
        cp_async_commit();
        for (int r = threadIdx.x; r < SK_CHUNK; r += SK_THREADS) /* p = 0 for queries past Tq */
            sLse[r] = q0 + r < Tq ? a.lse_in[(int64_t)bh * Tq + q0 + r] * ATTN_LOG2E : INFINITY;
        cp_async_wait<0>();
        __syncthreads();

        /* phase 1: delta = rowsum(dO * O) for the warp's 16 rows, 2 lanes a row (lane 2 r + half) */
        const int wq = warp * 16; /* the warp's first row in the chunk */
        {
            const int r = lane >> 1, row = q0 + wq + r;
            float sum = 0.0f;
            if (row < Tq) {
                const T *orow = (const T *)a.out_in + row_at(b, row, h, Tq, H, D);
                for (int c8 = lane & 1; c8 < D / 8; c8 += 2) {
                    const uint4 o8 = *reinterpret_cast<const uint4 *>(orow + c8 * 8);
                    const uint4 d8 = *reinterpret_cast<const uint4 *>(sO + (wq + r) * LD + c8 * 8);
                    const uint32_t ou[4] = {o8.x, o8.y, o8.z, o8.w}, du[4] = {d8.x, d8.y, d8.z, d8.w};
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const float2 of = unpack2<T>(ou[j]), df = unpack2<T>(du[j]);
                        sum = fmaf(of.x, df.x, sum);
                        sum = fmaf(of.y, df.y, sum);
                    }
                }
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            if ((lane & 1) == 0) sDelta[wq + r] = sum;
        }
        __syncwarp();
        if (a.dq && q0 + wq < Tq) { /* dQ of the warp's rows over every key */
            const float lse2[2] = {sLse[wq + g], sLse[wq + g + 8]}, delta[2] = {sDelta[wq + g], sDelta[wq + g + 8]};
            uint32_t qf[1][KQ][4], of[1][KQ][4];
            tc_load_a<LD>(qf, sQ, wq);
            tc_load_a<LD>(of, sO, wq);
            float dq[1][ND][4];
            tc_zero(dq);
#pragma unroll
            for (int n0 = 0; n0 < KP; n0 += 16) {
                float s[1][2][4], dp[1][2][4];
                tc_two_products<T, D, true>(s, dp, qf, of, sQ, sO, wq, sK, sV, n0); /* S = Q K^T, dP = dO V^T */
                /* element e of n-tile n: row wq + g + 8 (e >> 1), key n0 + n*8 + tig*2 + (e & 1) */
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const bool real = n0 + n * 8 + tig * 2 + (e & 1) < Tk; /* pad keys: K rows of zeros */
                        const float p = real ? exp2_ftz(fmaf(s[0][n][e], sl2, -lse2[e >> 1])) : 0.0f;
                        dp[0][n][e] = p * (dp[0][n][e] - delta[e >> 1]);
                    }
                uint32_t pf[1][1][4];
                tc_acc_to_a<T>(pf, dp);
                tc_gemm<T, LD, 1, ND, true, false>(dq, pf, sK, n0, 0); /* dQ += dS K */
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = q0 + wq + g + 8 * r;
                if (row >= Tq) continue;
                T *dst = (T *)a.dq + row_at(b, row, h, Tq, H, D);
#pragma unroll
                for (int n = 0; n < ND; n++)
                    *reinterpret_cast<uint32_t *>(dst + n * 8 + tig * 2) =
                        pack2<T>(dq[0][n][2 * r] * a.s.scale, dq[0][n][2 * r + 1] * a.s.scale);
            }
        }
        __syncthreads(); /* every row's delta is in */

        /* phase 2: dK, dV of the warp's 16 keys over the chunk's queries (transposed products) */
        if (dkdv && keys_mine) {
            float dk[1][ND][4], dv[1][ND][4];
            tc_zero(dk);
            tc_zero(dv);
            const int q_in = min(SK_CHUNK, Tq - q0); /* real queries in the chunk */
            uint32_t unused[1][KQ][4];
#pragma unroll
            for (int n0 = 0; n0 < SK_CHUNK; n0 += 16) {
                if (n0 >= q_in) break;
                float s[1][2][4], dp[1][2][4];
                /* S^T = K Q^T, dP^T = V dO^T; element e of n-tile n: key 16 warp + g + 8 (e >> 1),
                 * query n0 + n*8 + tig*2 + (e & 1) of the chunk */
                tc_two_products<T, D, false>(s, dp, unused, unused, sK, sV, warp * 16, sQ, sO, n0);
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int qi = n0 + n * 8 + tig * 2 + (e & 1);
                        const float p = exp2_ftz(fmaf(s[0][n][e], sl2, -sLse[qi])); /* 0 past Tq (lse inf) */
                        s[0][n][e] = p;
                        dp[0][n][e] = p * (dp[0][n][e] - sDelta[qi]);
                    }
                uint32_t pf[1][1][4];
                tc_acc_to_a<T>(pf, s);
                tc_gemm<T, LD, 1, ND, true, false>(dv, pf, sO, n0, 0); /* dV += P^T dO */
                tc_acc_to_a<T>(pf, dp);
                tc_gemm<T, LD, 1, ND, true, false>(dk, pf, sQ, n0, 0); /* dK += dS^T Q */
            }
#pragma unroll
            for (int n = 0; n < ND; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    sAccK[(n * 4 + e) * 32] += dk[0][n][e];
                    sAccV[(n * 4 + e) * 32] += dv[0][n][e];
                }
        }
    }
    cp_async_wait<0>(); /* a block without chunks (no queries) still has K and V in flight */
    if (!dkdv || !keys_mine) return;
    float dk[1][ND][4], dv[1][ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[0][n][e] = sAccK[(n * 4 + e) * 32], dv[0][n][e] = sAccV[(n * 4 + e) * 32];
    /* the block's dK, dV: the gradients themselves when it covers the head, else its partial */
    const int64_t plane = (int64_t)a.s.B * Tk * a.s.HD;
    float *pk = a.partial ? a.partial + (int64_t)blockIdx.x * plane : NULL;
    float *pv = a.partial ? a.partial + (int64_t)(a.splits + blockIdx.x) * plane : NULL;
    if (a.dk) tc_store_rows<D>(dk[0], a.dk, a.dt, pk, b, h, warp * 16, Tk, H, a.partial ? 1.0f : a.s.scale);
    if (a.dv) tc_store_rows<D>(dv[0], a.dv, a.dt, pv, b, h, warp * 16, Tk, H, 1.0f);
}

/* dK = scale * sum of the splits' partials, dV = their sum, in split order (deterministic); one launch for both. */
__global__ void attn_sk_reduce_kernel(void *dk, void *dv, int dt, const float *partial, int splits, int64_t plane,
                                      float scale)
{
    GRID_STRIDE(i, 2 * plane)
    {
        const bool is_v = i >= plane;
        void *dst = is_v ? dv : dk;
        if (!dst) continue;
        const int64_t e = is_v ? i - plane : i;
        const float *p = partial + (is_v ? (int64_t)splits * plane : 0) + e;
        float sum = 0.0f;
        for (int k = 0; k < splits; k++) sum += p[(int64_t)k * plane];
        st(dst, dt, e, is_v ? sum : scale * sum);
    }
}

/* ======================================================= host side */

static bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

/* THE predicate: these kernels take an attention call when its shape fits (sk_shape_fits: unmasked, 1..128 keys,
 * head dim 40, 64 or 80), every tensor given has one 16-bit dtype and is 16-byte aligned, the card and the code
 * are sm_80+, and (sk_prepare) a block's shared memory fits the card. Checked before cuDNN's fused attention, in
 * deterministic and nondeterministic mode alike (these kernels give the same bits on every run). */
static bool sk_applies(sdt_backend *be, const attn_shape *s, const sdt_tensor *const *t, int n)
{
    if (!ctx_of(be)->attention_tc || !sk_shape_fits(s->causal, s->Tk, s->D)) return false;
    const int dt = t[0]->dtype;
    if (dt != SDT_BF16 && dt != SDT_F16) return false;
    for (int i = 0; i < n; i++)
        if (t[i] && (t[i]->dtype != dt || !aligned16(t[i]->data))) return false;
    return true;
}

typedef void (*sk_kernel)(sk_args);

/* The <T, D, KP> instantiation of the forward (BWD false) or backward kernel. */
template <bool BWD, typename T, int D, int KP> static sk_kernel sk_instance()
{
    return BWD ? attn_sk_bwd_kernel<T, D, KP> : attn_sk_fwd_kernel<T, D, KP>;
}
template <bool BWD, typename T, int D> static sk_kernel sk_pick_keys(int KP)
{
    return KP == 80 ? sk_instance<BWD, T, D, 80>() : sk_instance<BWD, T, D, SK_MAX_KEYS>();
}
template <bool BWD, typename T> static sk_kernel sk_pick_dim(int D, int KP)
{
    return D == 40   ? sk_pick_keys<BWD, T, 40>(KP)
           : D == 64 ? sk_pick_keys<BWD, T, 64>(KP)
                     : sk_pick_keys<BWD, T, 80>(KP);
}
template <bool BWD> static sk_kernel sk_pick(int dtype, int D, int KP)
{
    return dtype == SDT_BF16 ? sk_pick_dim<BWD, __nv_bfloat16>(D, KP) : sk_pick_dim<BWD, __half>(D, KP);
}

/* The kernel ready to launch with `bytes` of shared memory, and how many of its blocks run at once on the GPU:
 * 0; 1 when a block needs more shared memory than this card gives one (sm_86/sm_89: 99 KB, sm_80: 163 KB; the
 * backward at d64 and d80 needs more there), so attention.cu or cuDNN takes the call; -1 on a CUDA failure. */
static int sk_prepare(sdt_backend *be, sk_kernel k, size_t bytes, int *slots)
{
    int optin = 0, per_sm = 0, sms = 0;
    CUDA_TRY(be, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx_of(be)->device));
    if (bytes > (size_t)optin) return 1;
    CUDA_TRY(be, cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    CUDA_TRY(be, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, SK_THREADS, bytes));
    CUDA_TRY(be, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx_of(be)->device));
    *slots = (per_sm > 0 ? per_sm : 1) * (sms > 0 ? sms : 1);
    return 0;
}

int cuda_attention_short_keys_forward(sdt_backend *be, const attn_shape *s, sdt_tensor *out, sdt_tensor *lse,
                                      const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v)
{
    const sdt_tensor *all[4] = {q, k, v, out};
    if (!sk_applies(be, s, all, 4) || (lse && !aligned16(lse->data))) return 1;
    sk_args a = {};
    a.q = q->data, a.k = k->data, a.v = v->data, a.out = out->data, a.lse = lse ? (float *)lse->data : NULL;
    a.dt = q->dtype, a.s = *s;
    const int KP = sk_keys_padded(s->Tk);
    const size_t bytes = sk_fwd_smem(s->D, KP);
    const sk_kernel kern = sk_pick<false>(q->dtype, s->D, KP);
    int slots, rc = sk_prepare(be, kern, bytes, &slots);
    if (rc) return rc;
    /* one wave, at least a tile per warp (K and V are read again per block, from L2) */
    sk_split((s->Tq + 15) / 16, s->B * s->H, slots, SK_WARPS, &a.splits, &a.per);
    kern<<<dim3((unsigned)a.splits, (unsigned)(s->B * s->H)), SK_THREADS, bytes, ctx_of(be)->stream>>>(a);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_attention_short_keys_backward(sdt_backend *be, const attn_shape *s, sdt_tensor *dq, sdt_tensor *dk,
                                       sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k,
                                       const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse)
{
    if (!out || !lse || !aligned16(lse->data)) return 1; /* without saved statistics attention.cu recomputes them */
    const sdt_tensor *all[8] = {q, k, v, dout, out, dq, dk, dv};
    if (!sk_applies(be, s, all, 8)) return 1;
    sk_args a = {};
    a.q = q->data, a.k = k->data, a.v = v->data, a.dout = dout->data, a.out_in = out->data;
    a.dq = dq ? dq->data : NULL, a.dk = dk ? dk->data : NULL, a.dv = dv ? dv->data : NULL;
    a.lse_in = (const float *)lse->data, a.dt = q->dtype, a.s = *s;
    const int KP = sk_keys_padded(s->Tk);
    const size_t bytes = sk_bwd_smem(s->D, KP);
    const sk_kernel kern = sk_pick<true>(q->dtype, s->D, KP);
    int slots, rc = sk_prepare(be, kern, bytes, &slots);
    if (rc) return rc;
    /* one wave, each block over at least one chunk: every extra split costs a partial of dK and dV (fp32,
     * Tk x head dim a head) written and summed again, so no more blocks than run at once */
    sk_split((s->Tq + SK_CHUNK - 1) / SK_CHUNK, s->B * s->H, slots, 1, &a.splits, &a.per);
    const int64_t plane = (int64_t)s->B * s->Tk * s->HD;
    if (a.splits > 1 && (dk || dv)) {
        a.partial =
            (float *)cuda_scratch(be, CUDA_ATTENTION_SCRATCH_SLOT, (size_t)(2 * a.splits * plane) * sizeof(float));
        if (!a.partial) return -1;
    }
    kern<<<dim3((unsigned)a.splits, (unsigned)(s->B * s->H)), SK_THREADS, bytes, ctx_of(be)->stream>>>(a);
    CUDA_LAUNCHED(be);
    if (a.partial) {
        attn_sk_reduce_kernel<<<grid_for(2 * plane, 256), 256, 0, ctx_of(be)->stream>>>(a.dk, a.dv, q->dtype, a.partial,
                                                                                        a.splits, plane, s->scale);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
