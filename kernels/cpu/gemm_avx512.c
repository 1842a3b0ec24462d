/* gemm_avx512.c - a packed, register-blocked AVX-512 sgemm whose bits depend on k alone (gemm_avx512.h).
 *
 * BLIS's shape without its k blocking: B is packed in 32-column micro-panels (zeros past the edge),
 * A is read in place (8 rows broadcast one k at a time; packing it cost more than it saved), and the
 * micro-kernel keeps an 8 x 32 tile of C in 16 zmm accumulators for the whole of k, so each element is
 * one fma chain in k order whatever the blocking. B goes in blocks of GEMM_B_BLOCK floats (within L2).
 * Compiled for any x86-64 with the AVX-512 code behind target attributes; the run-time check picks it. */
#include "gemm_avx512.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    MR = 8,                    /* rows of the register tile */
    NR = 32,                   /* columns of the register tile: two zmm */
    GEMM_B_BLOCK = 192 * 1024, /* floats of packed B per block (768 KiB) */
};

/* The element's epilogue, shared by the reference and (lane-wise) the kernel. */
static inline float finish(float acc, float alpha, float beta, const float *c)
{
    return beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
}

void gemm_avx512_reference(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc = fmaf(trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p],
                           trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j], acc);
            float *cij = c + (size_t)i * ldc + j;
            *cij = finish(acc, alpha, beta, cij);
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

/* An 8 x 8 block (rows src + r * ld) transposed into dst + c * dst_ld: the packing's strided side. */
AVX512 static inline void transpose8x8(const float *src, size_t ld, float *dst, size_t dst_ld)
{
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ld), r2 = _mm256_loadu_ps(src + 2 * ld),
           r3 = _mm256_loadu_ps(src + 3 * ld), r4 = _mm256_loadu_ps(src + 4 * ld), r5 = _mm256_loadu_ps(src + 5 * ld),
           r6 = _mm256_loadu_ps(src + 6 * ld), r7 = _mm256_loadu_ps(src + 7 * ld);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xee), r2 = _mm256_shuffle_ps(t1, t3, 0x44),
    r3 = _mm256_shuffle_ps(t1, t3, 0xee), r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xee),
    r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(r0, r4, 0x20));
    _mm256_storeu_ps(dst + dst_ld, _mm256_permute2f128_ps(r1, r5, 0x20));
    _mm256_storeu_ps(dst + 2 * dst_ld, _mm256_permute2f128_ps(r2, r6, 0x20));
    _mm256_storeu_ps(dst + 3 * dst_ld, _mm256_permute2f128_ps(r3, r7, 0x20));
    _mm256_storeu_ps(dst + 4 * dst_ld, _mm256_permute2f128_ps(r0, r4, 0x31));
    _mm256_storeu_ps(dst + 5 * dst_ld, _mm256_permute2f128_ps(r1, r5, 0x31));
    _mm256_storeu_ps(dst + 6 * dst_ld, _mm256_permute2f128_ps(r2, r6, 0x31));
    _mm256_storeu_ps(dst + 7 * dst_ld, _mm256_permute2f128_ps(r3, r7, 0x31));
}

/* `live` (< 8) strided vectors of length k (src + v * ld + p) written as dst[p * width + v], zeros up to 8:
 * the packing's edge, one float at a time. */
static void gather_edge(const float *src, size_t ld, int live, int k, float *dst, int width)
{
    for (int p = 0; p < k; p++)
        for (int v = 0; v < 8; v++) dst[(size_t)p * width + v] = v < live ? src[(size_t)v * ld + p] : 0.0f;
}

/* n contiguous floats of src per p (src + p * ld) into dst + p * width, zeros up to `full`. */
AVX512 static void copy_rows(const float *src, size_t ld, int live, int full, int k, float *dst, int width)
{
    for (int p = 0; p < k; p++) {
        const float *sp = src + (size_t)p * ld;
        float *dp = dst + (size_t)p * width;
        for (int q = 0; q < full; q += 16) {
            const int left = live - q;
            const __mmask16 mask = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
            const __m512 v = _mm512_maskz_loadu_ps(mask, sp + q);
            if (full - q >= 16)
                _mm512_storeu_ps(dp + q, v);
            else
                _mm256_storeu_ps(dp + q, _mm512_castps512_ps256(v));
        }
    }
}

/* `live` strided vectors (src + v * ld, v < live <= width) of length k into dst[p * width + v], zeros up to
 * width (a multiple of 8): 8 x 8 transposes, then the edges. */
AVX512 static void pack_transposed(const float *src, size_t ld, int live, int k, float *dst, int width)
{
    for (int v0 = 0; v0 < width; v0 += 8) {
        const int lv = live - v0 < 8 ? (live - v0 < 0 ? 0 : live - v0) : 8;
        if (lv < 8) {
            gather_edge(src + (size_t)v0 * ld, ld, lv, k, dst + v0, width);
            continue;
        }
        int p = 0;
        for (; p + 8 <= k; p += 8) transpose8x8(src + (size_t)v0 * ld + p, ld, dst + (size_t)p * width + v0, width);
        if (p < k) gather_edge(src + (size_t)v0 * ld + p, ld, 8, k - p, dst + (size_t)p * width + v0, width);
    }
}

/* Columns [j0, j0 + cols) of op(B) into micro-panels of NR columns: dst[(panel * k + p) * NR + q]. */
AVX512 static void pack_b(bool trans_b, const float *b, int ldb, int j0, int cols, int k, float *dst)
{
    for (int q0 = 0; q0 < cols; q0 += NR) {
        float *d = dst + (size_t)q0 * k;
        const int live = cols - q0 < NR ? cols - q0 : NR;
        if (trans_b) /* B^T's columns are B's rows */
            pack_transposed(b + (size_t)(j0 + q0) * ldb, (size_t)ldb, live, k, d, NR);
        else
            copy_rows(b + j0 + q0, (size_t)ldb, live, NR, k, d, NR);
    }
}

/* C tile [rows <= MR, cols <= 16 * halves] from MR rows of op(A), read in place (element (r, p) at
 * a[r * rs + p * cs]; rows past `rows` re-read row 0 and are never stored), and one packed B micro-panel:
 * the fma chains, then the epilogue under a column mask. halves is 2 (32 columns) or 1 (the last <= 16),
 * a constant in each caller below, so the unused accumulators vanish. */
AVX512 static inline __attribute__((always_inline)) void micro_kernel(int halves, int k, const float *a, size_t rs,
                                                                      size_t cs, const float *bp, float alpha,
                                                                      float beta, float *c, int ldc, int rows, int cols)
{
    const float *ar[MR];
    for (int r = 0; r < MR; r++) ar[r] = a + (r < rows ? (size_t)r : 0) * rs;
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++)
        for (int h = 0; h < halves; h++) acc[r][h] = _mm512_setzero_ps();
    size_t off = 0;
    for (int p = 0; p < k; p++, off += cs) {
        __m512 bv[2];
        for (int h = 0; h < halves; h++) bv[h] = _mm512_load_ps(bp + 16 * h);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            const __m512 av = _mm512_set1_ps(ar[r][off]);
            for (int h = 0; h < halves; h++) acc[r][h] = _mm512_fmadd_ps(av, bv[h], acc[r][h]);
        }
        bp += NR;
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < halves; h++) {
            const int live = cols - 16 * h;
            if (live <= 0) break;
            const __mmask16 mask = live >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << live) - 1u);
            float *dst = c + (size_t)r * ldc + 16 * h;
            const __m512 v = beta == 0.0f
                                 ? _mm512_mul_ps(va, acc[r][h])
                                 : _mm512_fmadd_ps(va, acc[r][h], _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask, dst)));
            _mm512_mask_storeu_ps(dst, mask, v);
        }
}

AVX512 static void kernel_8x32(int k, const float *a, size_t rs, size_t cs, const float *bp, float alpha, float beta,
                               float *c, int ldc, int rows, int cols)
{
    micro_kernel(2, k, a, rs, cs, bp, alpha, beta, c, ldc, rows, cols);
}

AVX512 static void kernel_8x16(int k, const float *a, size_t rs, size_t cs, const float *bp, float alpha, float beta,
                               float *c, int ldc, int rows, int cols)
{
    micro_kernel(1, k, a, rs, cs, bp, alpha, beta, c, ldc, rows, cols);
}

/* C tile [8 < rows <= 16, cols <= 16]: 16 rows of op(A) (rows past `rows` re-read row 8, never stored) against
 * the left half of a packed panel, 16 fma chains in flight instead of the 8 x 16 tile's 8 (which waits on the
 * fma latency): the products with n <= 16 (the convolutions at 4 x 4 pixels). Same chains, same bits. */
AVX512 static void kernel_16x16(int k, const float *a, size_t rs, size_t cs, const float *bp, float alpha, float beta,
                                float *c, int ldc, int rows, int cols)
{
    const float *a0 = a, *a8 = a + (size_t)8 * rs; /* rows > 8: the caller's rule */
    size_t ro[8], ro8[8];
    for (int r = 0; r < 8; r++) ro[r] = (size_t)r * rs, ro8[r] = 8 + r < rows ? (size_t)r * rs : 0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, acc4 = acc0, acc5 = acc0, acc6 = acc0,
           acc7 = acc0, acc8 = acc0, acc9 = acc0, acc10 = acc0, acc11 = acc0, acc12 = acc0, acc13 = acc0, acc14 = acc0,
           acc15 = acc0;
    size_t off = 0;
    for (int p = 0; p < k; p++, off += cs, bp += NR) {
        const __m512 bv = _mm512_load_ps(bp);
        const float *x = a0 + off, *y = a8 + off;
        acc0 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[0]]), bv, acc0);
        acc1 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[1]]), bv, acc1);
        acc2 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[2]]), bv, acc2);
        acc3 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[3]]), bv, acc3);
        acc4 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[4]]), bv, acc4);
        acc5 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[5]]), bv, acc5);
        acc6 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[6]]), bv, acc6);
        acc7 = _mm512_fmadd_ps(_mm512_set1_ps(x[ro[7]]), bv, acc7);
        acc8 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[0]]), bv, acc8);
        acc9 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[1]]), bv, acc9);
        acc10 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[2]]), bv, acc10);
        acc11 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[3]]), bv, acc11);
        acc12 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[4]]), bv, acc12);
        acc13 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[5]]), bv, acc13);
        acc14 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[6]]), bv, acc14);
        acc15 = _mm512_fmadd_ps(_mm512_set1_ps(y[ro8[7]]), bv, acc15);
    }
    const __m512 acc[16] = {acc0, acc1, acc2,  acc3,  acc4,  acc5,  acc6,  acc7,
                            acc8, acc9, acc10, acc11, acc12, acc13, acc14, acc15};
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 mask = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1u);
    for (int r = 0; r < rows; r++) {
        float *dst = c + (size_t)r * ldc;
        const __m512 v = beta == 0.0f
                             ? _mm512_mul_ps(va, acc[r])
                             : _mm512_fmadd_ps(va, acc[r], _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask, dst)));
        _mm512_mask_storeu_ps(dst, mask, v);
    }
}

/* C [m, cols] from op(A) (element (i, p) at a[i rs + p cs]) and op(B) already packed: the panels of NR
 * columns at packed + jr * k (pack_b's layout). */
AVX512 static void multiply_packed(int m, int cols, int k, float alpha, const float *a, size_t rs, size_t cs,
                                   const float *packed, float beta, float *c, int ldc)
{
    int i0 = 0;
    if (cols <= 16 && rs == 1) /* one half-panel, op(A) = A^T (its 16 rows side by side in memory): 16 rows at a
                                * time while more than 8 are left; with rows far apart 16 rows ran slower */
        for (; m - i0 > MR; i0 += 2 * MR)
            kernel_16x16(k, a + (size_t)i0 * rs, rs, cs, packed, alpha, beta, c + (size_t)i0 * ldc, ldc,
                         m - i0 < 2 * MR ? m - i0 : 2 * MR, cols);
    for (; i0 < m; i0 += MR) {
        const int tile_rows = m - i0 < MR ? m - i0 : MR;
        const float *ai = a + (size_t)i0 * rs;
        for (int jr = 0; jr < cols; jr += NR) {
            const float *bp = packed + (size_t)jr * k;
            const int tile_cols = cols - jr < NR ? cols - jr : NR;
            float *ct = c + (size_t)i0 * ldc + jr;
            if (tile_cols > 16)
                kernel_8x32(k, ai, rs, cs, bp, alpha, beta, ct, ldc, tile_rows, tile_cols);
            else /* the packed panel is still NR wide; the 16-column kernel reads its left half */
                kernel_8x16(k, ai, rs, cs, bp, alpha, beta, ct, ldc, tile_rows, tile_cols);
        }
    }
}

AVX512 static void gemm_blocked(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                                const float *b, int ldb, float beta, float *c, int ldc, float *bbuf, int nc)
{
    const size_t rs = trans_a ? 1 : (size_t)lda, cs = trans_a ? (size_t)lda : 1; /* op(A)[i][p] = a[i rs + p cs] */
    for (int j0 = 0; j0 < n; j0 += nc) {
        const int cols = n - j0 < nc ? n - j0 : nc;
        pack_b(trans_b, b, ldb, j0, cols, k, bbuf);
        multiply_packed(m, cols, k, alpha, a, rs, cs, bbuf, beta, c + j0, ldc);
    }
}

size_t gemm_avx512_packed_floats(int n, int k)
{
    return (size_t)((n + NR - 1) / NR * NR) * (size_t)(k > 0 ? k : 1);
}

void gemm_avx512_pack_b(bool trans_b, int n, int k, const float *b, int ldb, float *packed)
{
    if (n > 0 && k > 0) pack_b(trans_b, b, ldb, 0, n, k, packed);
}

void gemm_avx512_packed(bool trans_a, int m, int n, int k, float alpha, const float *a, int lda, const float *packed,
                        float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    const size_t rs = trans_a ? 1 : (size_t)lda, cs = trans_a ? (size_t)lda : 1;
    multiply_packed(m, n, k, alpha, a, rs, cs, packed, beta, c, ldc);
}

bool gemm_avx512_available(void)
{
    static int known = -1; /* -1 unknown; a race decides it twice, the same way */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") ? 1 : 0; /* libgcc also checks that the OS saves zmm state */
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}

bool gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    if (k > GEMM_AVX512_MAX_K || k < 0 || !gemm_avx512_available()) return false;
    if (m <= 0 || n <= 0) return true;
    const int kk = k > 0 ? k : 1;
    int nc = GEMM_B_BLOCK / kk / NR * NR;
    if (nc < NR) nc = NR;
    const int n_up = (n + NR - 1) / NR * NR;
    if (nc > n_up) nc = n_up;
    /* 64-byte aligned for the kernel's aligned loads; nc * kk floats is a multiple of 64 bytes */
    float *buf = aligned_alloc(64, sizeof(float) * (size_t)nc * kk);
    if (!buf) return false;
    gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, buf, nc);
    free(buf);
    return true;
}

#else /* not x86-64 GCC/Clang: BLAS always */

bool gemm_avx512_available(void)
{
    return false;
}

bool gemm_avx512(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c, (void)ldc;
    return false;
}

size_t gemm_avx512_packed_floats(int n, int k)
{
    (void)n, (void)k;
    return 0;
}

void gemm_avx512_pack_b(bool trans_b, int n, int k, const float *b, int ldb, float *packed)
{
    (void)trans_b, (void)n, (void)k, (void)b, (void)ldb, (void)packed;
}

void gemm_avx512_packed(bool trans_a, int m, int n, int k, float alpha, const float *a, int lda, const float *packed,
                        float beta, float *c, int ldc)
{
    (void)trans_a, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)packed, (void)beta, (void)c;
    (void)ldc;
}

#endif
