/* reduce.cu - the final pass of the two-pass sums (reduce.cuh). */
#include "reduce.cuh"

__global__ void final_sum_k(const double *partial, int n, double *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < n; i++) s += partial[i];
        *out = s;
    }
}

/* Sums the partials of the last kernel into host *out. */
int cuda_finish_sum(sdt_backend *be, double *partial, double *out)
{
    cuda_ctx *c = ctx_of(be);
    final_sum_k<<<1, 1, 0, c->stream>>>(partial, RED_BLOCKS, c->reduce_d);
    CUDA_LAUNCHED(be);
    return cuda_download(be, out, c->reduce_d, sizeof(double));
}
