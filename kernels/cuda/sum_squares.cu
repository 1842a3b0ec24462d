/* sum_squares.cu - the sum of squares of many tensors (the gradient norm) on the GPU.
 * Semantics: kernels/ops.h. */
#include "reduce.cuh"

__global__ void sumsq_partial_k(const void *x, int dt, int64_t n, double *partial)
{
    double s = 0;
    GRID_STRIDE(i, n)
    {
        double v = ld(x, dt, i);
        s += v * v;
    }
    block_sum_store(s, partial);
}

int cuda_sum_squares(sdt_backend *be, double *sumsq, const sdt_tensor *const *tensors, int count)
{
    double *partial = (double *)cuda_scratch(be, SDT_CUDA_SCRATCH_SLOTS - 1, RED_BLOCKS * sizeof(double));
    if (!partial) return -1;
    for (int k = 0; k < count; k++) {
        if (!tensors[k]) continue;
        sumsq_partial_k<<<RED_BLOCKS, RED_THREADS, 0, ctx_of(be)->stream>>>(tensors[k]->data, tensors[k]->dtype,
                                                                            sdt_tensor_numel(tensors[k]), partial);
        CUDA_LAUNCHED(be);
        double s;
        if (cuda_finish_sum(be, partial, &s)) return -1;
        *sumsq += s;
    }
    return 0;
}
