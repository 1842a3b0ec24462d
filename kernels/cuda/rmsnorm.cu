/* rmsnorm.cu - T5LayerNorm (RMS norm) on the GPU. Semantics: kernels/ops.h; the CPU's kernels/cpu/rmsnorm.c
 * is the reference. One block per row for the statistic and dx (a block-wide sum in a fixed order, so the
 * bits repeat), one thread per column for dgamma (rows summed in order: deterministic, no atomics). */
#include "cuda_ops.h"

enum { RMS_THREADS = 256 };

/* Sum of v over the block, in a fixed order; every thread gets the result. */
static __device__ float block_sum(float v, float *shared)
{
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = RMS_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    float r = shared[0];
    __syncthreads();
    return r;
}

__global__ void rmsnorm_fwd_k(void *out, int odt, float *rstd, const void *x, int xdt, const void *gamma, int gdt,
                              int64_t C, float eps)
{
    __shared__ float shared[RMS_THREADS];
    const int64_t r = blockIdx.x, base = r * C;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += RMS_THREADS) {
        float v = ld(x, xdt, base + i);
        ss += v * v;
    }
    ss = block_sum(ss, shared);
    const float rs = rsqrtf(ss / (float)C + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    for (int64_t i = threadIdx.x; i < C; i += RMS_THREADS) {
        float y = ld(x, xdt, base + i) * rs;
        st(out, odt, base + i, gamma ? y * ld(gamma, gdt, i) : y);
    }
}

__global__ void rmsnorm_dx_k(void *dx, int dxt, const void *dout, int ddt, const void *x, int xdt, const void *gamma,
                             int gdt, const float *rstd, int64_t C)
{
    __shared__ float shared[RMS_THREADS];
    const int64_t r = blockIdx.x, base = r * C;
    const float rs = rstd[r];
    float dot = 0.0f;
    for (int64_t i = threadIdx.x; i < C; i += RMS_THREADS)
        dot += ld(dout, ddt, base + i) * (gamma ? ld(gamma, gdt, i) : 1.0f) * ld(x, xdt, base + i);
    dot = block_sum(dot, shared);
    const float k = dot / (float)C * rs * rs * rs;
    for (int64_t i = threadIdx.x; i < C; i += RMS_THREADS)
        acc(dx, dxt, base + i,
            rs * ld(dout, ddt, base + i) * (gamma ? ld(gamma, gdt, i) : 1.0f) - k * ld(x, xdt, base + i));
}

__global__ void rmsnorm_dgamma_k(void *dgamma, int gdt, const void *dout, int ddt, const void *x, int xdt,
                                 const float *rstd, int64_t rows, int64_t C)
{
    GRID_STRIDE(i, C)
    {
        float sum = 0.0f;
        for (int64_t r = 0; r < rows; r++) sum += ld(dout, ddt, r * C + i) * ld(x, xdt, r * C + i) * rstd[r];
        acc(dgamma, gdt, i, sum);
    }
}

int cuda_rmsnorm_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *rstd, const sdt_tensor *x,
                         const sdt_tensor *gamma, float eps)
{
    const int64_t rows = sdt_tensor_rows(x), C = sdt_tensor_last_dim(x);
    if (rows * C == 0) return 0;
    rmsnorm_fwd_k<<<(unsigned)rows, RMS_THREADS, 0, STREAM(be)>>>(out->data, out->dtype, (float *)rstd->data, x->data,
                                                                  x->dtype, gamma ? gamma->data : NULL,
                                                                  gamma ? gamma->dtype : SDT_F32, C, eps);
    CUDA_LAUNCHED(be);
    return 0;
}

int cuda_rmsnorm_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dgamma, const sdt_tensor *dout,
                          const sdt_tensor *x, const sdt_tensor *gamma, const sdt_tensor *rstd)
{
    const int64_t rows = sdt_tensor_rows(x), C = sdt_tensor_last_dim(x);
    if (rows * C == 0) return 0;
    const void *g = gamma ? gamma->data : NULL;
    const int gdt = gamma ? gamma->dtype : SDT_F32;
    if (dx) {
        rmsnorm_dx_k<<<(unsigned)rows, RMS_THREADS, 0, STREAM(be)>>>(
            dx->data, dx->dtype, dout->data, dout->dtype, x->data, x->dtype, g, gdt, (const float *)rstd->data, C);
        CUDA_LAUNCHED(be);
    }
    if (dgamma) {
        rmsnorm_dgamma_k LAUNCH(be, C)(dgamma->data, dgamma->dtype, dout->data, dout->dtype, x->data, x->dtype,
                                       (const float *)rstd->data, rows, C);
        CUDA_LAUNCHED(be);
    }
    return 0;
}
