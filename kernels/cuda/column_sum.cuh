/* column_sum.cuh - deterministic column sums over tall inputs (bias and LayerNorm parameter
 * gradients: a hypernetwork layer's 32768 rows at batch 8).
 *
 * One thread per column walking every row in order is deterministic but latency-bound (a 320-wide
 * layer keeps 3 blocks busy). Here a block of 32 columns x 32 row lanes sums one chunk of
 * COLSUM_CHUNK rows: each lane takes the rows lane, lane + 32, ... (loads coalesced across the 32
 * columns), the 32 lanes are added in lane order in shared memory, and a second kernel adds the
 * chunks' partial sums in chunk order. The order of every addition is fixed by the shapes alone,
 * never by scheduling, so a replay gives the same bits. Internal to kernels/cuda. */
#ifndef SDT_CUDA_COLUMN_SUM_CUH
#define SDT_CUDA_COLUMN_SUM_CUH

#include "cuda_common.cuh"

#define COLSUM_TILE 32        /* columns per block, and row lanes per column */
#define COLSUM_CHUNK 1024     /* rows per block */
#define COLSUM_SCRATCH_SLOT 6 /* the partial sums [chunks, sums, C] */

/* partial[(chunk * NSUM + k) * C + c] = sum over the chunk's rows of value(r, c)[k]. */
template <int NSUM, class Value> __global__ void colsum_partial_k(float *partial, Value value, int64_t rows, int64_t C)
{
    __shared__ float lanes[NSUM][COLSUM_TILE][COLSUM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = (int64_t)blockIdx.x * COLSUM_TILE + tx, chunk = blockIdx.y;
    const int64_t r0 = chunk * COLSUM_CHUNK, r1 = r0 + COLSUM_CHUNK < rows ? r0 + COLSUM_CHUNK : rows;
    float s[NSUM];
    for (int k = 0; k < NSUM; k++) s[k] = 0;
    if (c < C)
        for (int64_t r = r0 + ty; r < r1; r += COLSUM_TILE) {
            float v[NSUM];
            value(r, c, v);
            for (int k = 0; k < NSUM; k++) s[k] += v[k];
        }
    for (int k = 0; k < NSUM; k++) lanes[k][ty][tx] = s[k];
    __syncthreads();
    if (ty < NSUM && c < C) {
        float t = 0;
        for (int l = 0; l < COLSUM_TILE; l++) t += lanes[ty][l][tx];
        partial[(chunk * NSUM + ty) * C + c] = t;
    }
}

/* dst_k[c] += sum over chunks, in order, of partial[(chunk * NSUM + k) * C + c]; dst_k NULL: skipped. */
template <int NSUM>
__global__ void colsum_finish_k(void *dst0, int t0, void *dst1, int t1, const float *partial, int64_t chunks, int64_t C)
{
    GRID_STRIDE(c, C)
    {
        for (int k = 0; k < NSUM; k++) {
            void *dst = k == 0 ? dst0 : dst1;
            if (!dst) continue;
            float t = 0;
            for (int64_t ch = 0; ch < chunks; ch++) t += partial[(ch * NSUM + k) * C + c];
            acc(dst, k == 0 ? t0 : t1, c, t);
        }
    }
}

/* Column sums of NSUM values per element into dst0 (and dst1): launches both kernels on the
 * backend's stream. 0, or -1 with the backend's error set. */
template <int NSUM, class Value>
static int column_sums(sdt_backend *be, void *dst0, int t0, void *dst1, int t1, Value value, int64_t rows, int64_t C)
{
    if (rows <= 0 || C <= 0) return 0;
    const int64_t chunks = (rows + COLSUM_CHUNK - 1) / COLSUM_CHUNK;
    float *partial = (float *)cuda_scratch(be, COLSUM_SCRATCH_SLOT, (size_t)(chunks * NSUM * C) * sizeof(float));
    if (!partial) return -1;
    cudaStream_t s = ctx_of(be)->stream;
    dim3 grid((unsigned)((C + COLSUM_TILE - 1) / COLSUM_TILE), (unsigned)chunks), block(COLSUM_TILE, COLSUM_TILE);
    colsum_partial_k<NSUM><<<grid, block, 0, s>>>(partial, value, rows, C);
    CUDA_LAUNCHED(be);
    colsum_finish_k<NSUM><<<grid_for(C, 128), 128, 0, s>>>(dst0, t0, dst1, t1, partial, chunks, C);
    CUDA_LAUNCHED(be);
    return 0;
}

#endif
