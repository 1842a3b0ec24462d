/* attention_tc.cuh - what the tensor-core attention kernels share (attention.cu's FlashAttention-2 kernels
 * and attention_short_keys.cu's short-key kernels): the shape, the mma.sync m16n8k16 / m16n8k8 products fed by
 * ldmatrix, cp.async tile loads, and the fragment helpers. Fragment layout (PTX ISA, mma.m16n8k16): lane = 4 g + tig;
 * an accumulator [16, 8] holds rows g and g + 8, columns 2 tig and 2 tig + 1 (elements e = 0..3: row g + 8 (e >> 1),
 * column 2 tig + (e & 1)). Internal to kernels/cuda. */
#ifndef SDT_KERNELS_CUDA_ATTENTION_TC_CUH
#define SDT_KERNELS_CUDA_ATTENTION_TC_CUH

#include <stdint.h>

#include "cuda_common.cuh"

#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

typedef struct attn_shape {
    int B, Tq, Tk, H, D, HD;
    float scale;
    bool causal;
} attn_shape;

/* Element offset of row t of head h of batch b in a [B, T, H*D] tensor. */
__device__ __forceinline__ int64_t row_at(int b, int t, int h, int T, int H, int D)
{
    return ((int64_t)b * T + t) * (int64_t)H * D + (int64_t)h * D;
}

enum { TC_ROWS = 64, TC_WARPS = 4, TC_THREADS = 128 };

/* Head dim padded to the mma's k of 16, and the shared-memory row stride: 16 bytes of
 * padding put the 8 rows one ldmatrix reads in 8 different bank groups. */
/* The streamed tile pairs are double-buffered up to head dim 80 (with the resident rows at most
 * 8 tiles of 64 rows, 88 KiB in dQ at 80); at 160 one buffer (4 tiles, 84.5 KiB in backward)
 * keeps a block under the 99 KiB it gets on sm_86/sm_89. */
__host__ __device__ constexpr int tc_stream_buffers(int D)
{
    return D <= 80 ? 2 : 1;
}
/* m-tiles of 16 rows per warp (the block's resident rows are 64 of them): with 2, each B
 * fragment read from shared memory feeds two mma, which is what keeps the tensor cores busy
 * rather than the shared-memory pipe. One where the accumulators would not fit in registers:
 * forward holds o [16 MT, DP] and the scores; dK/dV hold dk and dv [16 MT, DP] each; dQ holds dq. */
__host__ __device__ constexpr int tc_fwd_mt(int D)
{
    return D <= 80 ? 2 : 1;
}
__host__ __device__ constexpr int tc_dkdv_mt(int D)
{
    return D <= 64 ? 2 : 1;
}
__host__ __device__ constexpr int tc_dq_mt(int D)
{
    return D <= 80 ? 2 : 1;
}
/* Forward at head dim 40 fits 168 registers without spilling (ptxas -v), so 3 blocks (12 warps)
 * share an SM instead of 2; the other kernels need more than 170 (2 blocks) to keep their
 * accumulators out of local memory. */
__host__ __device__ constexpr int tc_fwd_min_blocks(int D)
{
    return D == 40 ? 3 : 1;
}

template <int D> struct tc_dims {
    static constexpr int DP = (D + 15) / 16 * 16;
    static constexpr int LD = DP + 8;
    static constexpr int TILE = TC_ROWS * LD;  /* elements of one [64, DP] tile */
    static constexpr int NDU = (D + 7) / 8;    /* n-tiles of 8 a head-dim-wide result needs */
    static constexpr bool KHALF = D % 16 == 8; /* the last k step over the head dim is 8 wide */
    static constexpr int NBUF = tc_stream_buffers(D);
    static constexpr int FWD_MT = tc_fwd_mt(D), DKDV_MT = tc_dkdv_mt(D), DQ_MT = tc_dq_mt(D);
    /* Forward keeps the Q fragments in registers across the key tiles, except at 80 with two
     * m-tiles, where reading them again per tile is what keeps o and the scores out of local memory. */
    static constexpr bool FWD_HOLD_Q = !(D == 80 && FWD_MT == 2);
    /* Backward takes each streamed tile of 64 in steps of STEP rows (fewer live score registers);
     * HOLD keeps the resident rows' A fragments (K and V, or Q and dO) in registers for the
     * whole kernel instead of reading them from shared memory again at every step. */
    static constexpr int DKDV_STEP = D <= 64 ? 16 : D <= 80 ? 32 : 64;
    static constexpr bool DKDV_HOLD = D <= 80;
    static constexpr int DQ_STEP = D <= 40 ? 32 : D <= 80 ? 16 : 64;
    static constexpr bool DQ_HOLD = D <= 80;
};

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SDT_TC_ARCH 1
#else
#define SDT_TC_ARCH 0
#endif

/* c += a b for one 16x8x16 product: a 16x16 (row), b 16x8 (col), fp32 accumulators. */
template <typename T> __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1);
#if SDT_TC_ARCH
#define SDT_MMA_ASM(type)                                                                                              \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." type "." type ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "          \
                 "{%8,%9}, {%0,%1,%2,%3};\n"                                                                           \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#else
#define SDT_MMA_ASM(type) (void)c, (void)a, (void)b0, (void)b1
#endif
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    SDT_MMA_ASM("bf16");
}
template <> __device__ __forceinline__ void mma16816<__half>(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    SDT_MMA_ASM("f16");
}

/* 2^x on the special-function unit without the subnormal fix-up exp2f adds: results under
 * 2^-126 become 0, far below what a 16-bit probability keeps; 2^-inf is 0. */
__device__ __forceinline__ float exp2_ftz(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* c += a b for one 16x8x8 product (a: the first two registers of a 16x16 fragment, its columns 0..7). */
template <typename T> __device__ __forceinline__ void mma16808(float *c, const uint32_t *a, uint32_t b0);
#if SDT_TC_ARCH
#define SDT_MMA8_ASM(type)                                                                                             \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." type "." type ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "           \
                 "{%0,%1,%2,%3};\n"                                                                                    \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(b0))
#else
#define SDT_MMA8_ASM(type) (void)c, (void)a, (void)b0
#endif
template <> __device__ __forceinline__ void mma16808<__nv_bfloat16>(float *c, const uint32_t *a, uint32_t b0)
{
    SDT_MMA8_ASM("bf16");
}
template <> __device__ __forceinline__ void mma16808<__half>(float *c, const uint32_t *a, uint32_t b0)
{
    SDT_MMA8_ASM("f16");
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 matrices (transposed with TRANS); lane l gives the address of row (l & 7) of matrix l >> 3. */
template <bool TRANS> __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
#if SDT_TC_ARCH
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_addr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_addr(p)));
#endif
}

/* Two 8x8 matrices (transposed with TRANS); lanes 0..15 give the addresses, lane l row (l & 7) of matrix l >> 3. */
template <bool TRANS> __device__ __forceinline__ void ldsm_x2(uint32_t *r, const void *p)
{
#if SDT_TC_ARCH
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(smem_addr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(smem_addr(p)));
#endif
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
#if SDT_TC_ARCH
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#if SDT_TC_ARCH
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if SDT_TC_ARCH
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* Rows [r0, r0 + ROWS) of head (b, h) of a [B, T, H*D] tensor into a [ROWS, LD] tile, 16 bytes
 * per copy; rows past T and the columns D..DP are zeros. */
template <typename T, int D, int ROWS>
__device__ __forceinline__ void tc_load_tile(T *tile, const void *src, int b, int h, int r0, int rows_total, int H)
{
    constexpr int CH = tc_dims<D>::DP / 8, LD = tc_dims<D>::LD;
    for (int c = threadIdx.x; c < ROWS * CH; c += TC_THREADS) {
        const int r = c / CH, col = (c % CH) * 8;
        T *dst = tile + r * LD + col;
        if (r0 + r < rows_total && col < D)
            cp_async16(dst, (const T *)src + row_at(b, r0 + r, h, rows_total, H, D) + col);
        else
            *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
    }
}

/* Tile t of a stream of pairs (x, y) (K and V, or Q and dO) lives in buffer t % NBUF. With two
 * buffers step t + 1 is copied while step t computes; with one, after it. */
template <typename T, int D> struct tc_stream {
    T *x; /* NBUF consecutive pairs of tiles: x0, y0, x1, y1 */
    const void *gx, *gy;
    int b, h, rows_total, H;
    __device__ __forceinline__ T *x_at(int t) const { return x + (t % tc_dims<D>::NBUF) * 2 * tc_dims<D>::TILE; }
    __device__ __forceinline__ T *y_at(int t) const { return x_at(t) + tc_dims<D>::TILE; }
    __device__ __forceinline__ void issue(int t) const
    {
        tc_load_tile<T, D, TC_ROWS>(x_at(t), gx, b, h, t * TC_ROWS, rows_total, H);
        tc_load_tile<T, D, TC_ROWS>(y_at(t), gy, b, h, t * TC_ROWS, rows_total, H);
    }
};

/* acc[m] [16, 8 NN] += A[m] (16 x 16 * KS, a fragment per k step) B for the warp's MT m-tiles,
 * each B fragment loaded once and used by every m-tile (with MT = 2, half the shared-memory
 * reads per mma). B's k rows are the tile's rows (trans: B[k][n] = tile[k][n], e.g. V) or its
 * columns (B[k][n] = tile[n][k], e.g. K in Q K^T). n0 and k0 select the tile's corner. A head
 * dim of 40 needs neither the padded 6th n-tile of 8 (an odd NN: trans products, whose n is the
 * head dim) nor the upper half of the last k step (KHALF: m16n8k8 there, for products whose k is
 * the head dim), which saves a sixth of the mma at SD 1.x's most common width. */
template <typename T, int LD, int KS, int NN, bool TRANS, bool KHALF, int MT, int NA, int KA>
__device__ __forceinline__ void tc_gemm(float (&accum)[MT][NA][4], const uint32_t (&a)[MT][KA][4], const T *tile,
                                        int k0, int n0)
{
    static_assert(NA >= NN && KA >= KS, "fragment arrays too small");
    static_assert(TRANS || NN % 2 == 0, "an odd n-tile count is for trans products");
    static_assert(!(TRANS && KHALF), "a half k step is for products whose k is the head dim");
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
#pragma unroll
        for (int np = 0; np < NN / 2; np++) {
            uint32_t b[4];
            if (KHALF && ks == KS - 1) { /* columns k0 + 16 ks .. + 8 of the rows of both n-tiles */
                ldsm_x2<false>(b, tile + (n0 + np * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + k0 + ks * 16);
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    mma16808<T>(accum[m][2 * np], a[m][ks], b[0]);
                    mma16808<T>(accum[m][2 * np + 1], a[m][ks], b[1]);
                }
                continue;
            }
            if (TRANS)
                ldsm_x4<true>(b, tile + (k0 + ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n0 + np * 16 +
                                     (lane >> 4) * 8);
            else
                ldsm_x4<false>(b, tile + (n0 + np * 16 + (lane & 7) + ((lane >> 4) << 3)) * LD + k0 + ks * 16 +
                                      ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                mma16816<T>(accum[m][2 * np], a[m][ks], b[0], b[1]);
                mma16816<T>(accum[m][2 * np + 1], a[m][ks], b[2], b[3]);
            }
        }
        if (NN % 2) { /* the last n-tile alone: k rows 0..15 of its 8 columns */
            uint32_t b[2];
            ldsm_x2<true>(b, tile + (k0 + ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n0 + (NN - 1) * 8);
#pragma unroll
            for (int m = 0; m < MT; m++) mma16816<T>(accum[m][NN - 1], a[m][ks], b[0], b[1]);
        }
    }
}

/* A fragments of the warp's MT m-tiles (rows row0 + 16 m ..) of a tile, KS steps of 16 columns. */
template <int LD, typename T, int MT, int KS>
__device__ __forceinline__ void tc_load_a(uint32_t (&a)[MT][KS][4], const T *tile, int row0)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            ldsm_x4<false>(a[m][ks], tile + (row0 + m * 16 + (lane & 15)) * LD + ks * 16 + (lane >> 4) * 8);
}

/* Accumulators [16, 8 * 2 * KS] per m-tile (8 n-tiles of 8 per 16 columns) as A fragments of 16-bit values. */
template <typename T, int MT, int KS, int NA>
__device__ __forceinline__ void tc_acc_to_a(uint32_t (&a)[MT][KS][4], const float (&c)[MT][NA][4])
{
    static_assert(NA == 2 * KS, "accumulators and fragments differ in width");
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            a[m][ks][0] = pack2<T>(c[m][2 * ks][0], c[m][2 * ks][1]);
            a[m][ks][1] = pack2<T>(c[m][2 * ks][2], c[m][2 * ks][3]);
            a[m][ks][2] = pack2<T>(c[m][2 * ks + 1][0], c[m][2 * ks + 1][1]);
            a[m][ks][3] = pack2<T>(c[m][2 * ks + 1][2], c[m][2 * ks + 1][3]);
        }
}

template <int MT, int NN> __device__ __forceinline__ void tc_zero(float (&c)[MT][NN][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int n = 0; n < NN; n++) c[m][n][0] = c[m][n][1] = c[m][n][2] = c[m][n][3] = 0.0f;
}

/* Backward's two score-shaped products for the warp's MT m-tiles: s = A1 B1^T and dp = A2 B2^T
 * over rows n0 .. n0 + 8 NN of b1, b2 (fresh accumulators). HOLD: the A fragments a1f, a2f are
 * held in registers for the whole kernel; otherwise they are read from rows row0.. of tiles
 * a1, a2 here, one after the other into one set of registers. */
template <typename T, int D, bool HOLD, int MT, int NN, int KQ>
__device__ __forceinline__ void tc_two_products(float (&s)[MT][NN][4], float (&dp)[MT][NN][4],
                                                const uint32_t (&a1f)[MT][KQ][4], const uint32_t (&a2f)[MT][KQ][4],
                                                const T *a1, const T *a2, int row0, const T *b1, const T *b2, int n0)
{
    constexpr int LD = tc_dims<D>::LD;
    static_assert(KQ == tc_dims<D>::DP / 16, "A fragments must span the head dim");
    tc_zero(s);
    tc_zero(dp);
    if (HOLD) {
        tc_gemm<T, LD, KQ, NN, false, tc_dims<D>::KHALF>(s, a1f, b1, 0, n0);
        tc_gemm<T, LD, KQ, NN, false, tc_dims<D>::KHALF>(dp, a2f, b2, 0, n0);
    } else {
        uint32_t af[MT][KQ][4];
        tc_load_a<LD>(af, a1, row0);
        tc_gemm<T, LD, KQ, NN, false, tc_dims<D>::KHALF>(s, af, b1, 0, n0);
        tc_load_a<LD>(af, a2, row0);
        tc_gemm<T, LD, KQ, NN, false, tc_dims<D>::KHALF>(dp, af, b2, 0, n0);
    }
}

/* Writes a warp's [16, DP] fp32 accumulators into rows row0.. of head (b, h) of dst, or of partial
 * (fp32) when the dK/dV queries are split. The block owning the rows is their only writer. */
template <int D>
__device__ __forceinline__ void tc_store_rows(const float (*c)[4], void *dst, int dt, float *partial, int b, int h,
                                              int row0, int rows_total, int H, float alpha)
{
    constexpr int ND = tc_dims<D>::NDU;
    const int lane = threadIdx.x & 31, g = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + g + 8 * r;
        if (row >= rows_total) continue;
        const int64_t base = row_at(b, row, h, rows_total, H, D);
#pragma unroll
        for (int n = 0; n < ND; n++) {
            const int d = n * 8 + tig * 2;
            if (d >= D) continue;
            if (partial) {
                partial[base + d] = alpha * c[n][2 * r];
                partial[base + d + 1] = alpha * c[n][2 * r + 1];
            } else {
                st(dst, dt, base + d, alpha * c[n][2 * r]);
                st(dst, dt, base + d + 1, alpha * c[n][2 * r + 1]);
            }
        }
    }
}

/* attention_short_keys.cu: attention over at most 128 keys (cross-attention), tried by attention.cu's ops before
 * cuDNN's fused attention: 0 done, -1 failed (be->error), 1 not taken. s is the call's checked geometry. */
int cuda_attention_short_keys_forward(sdt_backend *be, const attn_shape *s, sdt_tensor *out, sdt_tensor *lse,
                                      const sdt_tensor *q, const sdt_tensor *k, const sdt_tensor *v);
int cuda_attention_short_keys_backward(sdt_backend *be, const attn_shape *s, sdt_tensor *dq, sdt_tensor *dk,
                                       sdt_tensor *dv, const sdt_tensor *dout, const sdt_tensor *q, const sdt_tensor *k,
                                       const sdt_tensor *v, const sdt_tensor *out, const sdt_tensor *lse);

#endif
