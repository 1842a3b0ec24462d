/* activation.c - torch.nn activations (ReLU, LeakyReLU, ELU, GELU, QuickGELU, SiLU, Tanh, Sigmoid,
 * Mish, the hard/soft/shrink family, identity), forward and accumulating backward. Formulas: kernels/shared_math.h. */
#include "shared_math.h"
#include "cpu_context.h"

int cpu_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] = act_value(act, xs[i]);
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_activation_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x,
                            sdt_activation act)
{
    if (!dx) return 0;
    int64_t n = sdt_tensor_numel(x);
    if (n == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    const float *g = cpu_read_f32(be, dout, 1);
    float *gx = cpu_write_begin(be, dx, 2, true);
    if (!xs || !g || !gx) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) gx[i] += g[i] * act_derivative(act, xs[i]);
    cpu_write_end(be, dx, gx);
    return 0;
}
