/* timestep_embedding.cu - diffusers' sinusoidal timestep embedding on the GPU: each column is
 * kernels/shared_math.h's timestep_embedding_at (in double, as on the CPU). Semantics: kernels/ops.h. */
#include "cuda_ops.h"
#include "shared_math.h"

__global__ void timestep_k(void *out, int odt, const void *t, int tdt, int64_t B, int64_t dim, int flip, float shift,
                           double log_max_period)
{
    GRID_STRIDE(i, B * dim)
    {
        int64_t b = i / dim, j = i % dim;
        st(out, odt, i, timestep_embedding_at(ld(t, tdt, b), j, dim, flip != 0, shift, log_max_period));
    }
}

int cuda_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                            float downscale_freq_shift, float max_period)
{
    int64_t B = sdt_tensor_numel(t), dim = out->shape[out->ndim - 1];
    timestep_k LAUNCH(be, B * dim)(out->data, out->dtype, t->data, t->dtype, B, dim, flip_sin_to_cos,
                                   downscale_freq_shift, log((double)max_period));
    CUDA_LAUNCHED(be);
    return 0;
}
