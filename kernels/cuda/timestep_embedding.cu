/* timestep_embedding.cu - diffusers' sinusoidal timestep embedding on the GPU. Semantics: kernels/ops.h. */
#include "cuda_ops.h"

__global__ void timestep_k(void *out, int odt, const void *t, int tdt, int64_t B, int64_t dim, int flip, float shift,
                           float log_max_period)
{
    int64_t half = dim / 2;
    GRID_STRIDE(i, B * dim)
    {
        int64_t b = i / dim, j = i % dim;
        float v = 0;
        if (j < 2 * half) {
            int64_t k = j % half;
            float freq = expf(-log_max_period * (float)k / ((float)half - shift));
            float arg = ld(t, tdt, b) * freq;
            bool first = j < half; /* [sin, cos], or [cos, sin] when flipped */
            v = (first != (flip != 0)) ? sinf(arg) : cosf(arg);
        }
        st(out, odt, i, v);
    }
}

int cuda_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                            float downscale_freq_shift, float max_period)
{
    int64_t B = sdt_tensor_numel(t), dim = out->shape[out->ndim - 1];
    timestep_k LAUNCH(be, B * dim)(out->data, out->dtype, t->data, t->dtype, B, dim, flip_sin_to_cos, downscale_freq_shift,
                                   logf(max_period));
    CUDA_LAUNCHED(be);
    return 0;
}
