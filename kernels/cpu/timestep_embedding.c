/* timestep_embedding.c - diffusers' get_timestep_embedding (SD's sinusoidal time embedding):
 *   half = dim / 2, freq_i = exp(-ln(max_period) * i / (half - shift)), arg = t * freq_i,
 *   out = [sin(arg), cos(arg)], or [cos, sin] when flip_sin_to_cos; odd dim zero-pads the last column.
 * The argument is formed in double: t * freq reaches ~1000, where a float argument alone
 * would carry ~3e-5 of error into sin/cos. No backward: timesteps are not trained. */
#include "cpu_context.h"

#include <math.h>

int cpu_timestep_embedding(sdt_backend *be, sdt_tensor *out, const sdt_tensor *t, bool flip_sin_to_cos,
                           float downscale_freq_shift, float max_period)
{
    int64_t batch = sdt_tensor_numel(t);
    int64_t dim = out->shape[1], half = dim / 2;
    if (batch * dim == 0) return 0;
    const float *ts = cpu_read_f32(be, t, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!ts || !o) return -1;
    double log_period = log((double)max_period), denom = (double)half - (double)downscale_freq_shift;
    int64_t sin_at = flip_sin_to_cos ? half : 0, cos_at = flip_sin_to_cos ? 0 : half;
    #pragma omp parallel for num_threads(cpu_threads_for(be, batch * dim)) schedule(static)
    for (int64_t b = 0; b < batch; b++) {
        float *row = o + b * dim;
        for (int64_t i = 0; i < half; i++) {
            double arg = (double)ts[b] * exp(-log_period * (double)i / denom);
            row[sin_at + i] = (float)sin(arg);
            row[cos_at + i] = (float)cos(arg);
        }
        if (dim % 2) row[dim - 1] = 0.0f;
    }
    cpu_write_end(be, out, o);
    return 0;
}
