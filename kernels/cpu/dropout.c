/* dropout.c - inverted dropout as torch.nn.Dropout in training: keep with probability 1-p,
 * scale kept values by 1/(1-p). The mask is kernels/shared_math.h's counter-based one (a pure
 * function of seed and index), which the CUDA backend draws too, so a run can move between backends. */
#include "cpu_context.h"
#include "shared_math.h"

int cpu_dropout_forward(sdt_backend *be, sdt_tensor *out, sdt_tensor *mask, const sdt_tensor *x, float p, uint64_t seed)
{
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    float *m = mask->data;
    if (!xs || !o) return -1;
    float keep_scale = dropout_keep_scale(p);
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        m[i] = dropout_mask_at(seed, (uint64_t)i, p, keep_scale);
        o[i] = xs[i] * m[i];
    }
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_dropout_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *mask)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(dout);
    if (n == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    const float *m = cpu_read_f32(be, mask, 1);
    float *gx = cpu_write_begin(be, dx, 2, true);
    if (!g || !m || !gx) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) gx[i] += g[i] * m[i];
    cpu_write_end(be, dx, gx);
    return 0;
}
