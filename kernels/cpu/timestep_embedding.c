/* timestep_embedding.c - diffusers' get_timestep_embedding (SD's sinusoidal time embedding); the
 * value of each column is kernels/shared_math.h's timestep_embedding_at, the CUDA backend's too.
 * No backward: timesteps are not trained. */
#include "cpu_context.h"
#include "shared_math.h"

#include <math.h>

int cpu_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                           float downscale_freq_shift, float max_period)
{
    int64_t batch = sdt_tensor_numel(t);
    int64_t dim = out->shape[1];
    if (batch * dim == 0) return 0;
    const float *ts = cpu_read_f32(be, t, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!ts || !o) return -1;
    double log_period = log((double)max_period);
#pragma omp parallel for num_threads(cpu_threads_for(be, batch *dim)) schedule(static)
    for (int64_t b = 0; b < batch; b++)
        for (int64_t j = 0; j < dim; j++)
            o[b * dim + j] = timestep_embedding_at(ts[b], j, dim, flip_sin_to_cos, downscale_freq_shift, log_period);
    cpu_write_end(be, out, o);
    return 0;
}
