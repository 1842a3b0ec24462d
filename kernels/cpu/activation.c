/* activation.c - torch.nn activations (ReLU, LeakyReLU, ELU, GELU, QuickGELU, SiLU, Tanh, Sigmoid,
 * Mish, the hard/soft/shrink family, identity), forward and accumulating backward. Formulas: kernels/shared_math.h. */
#include "shared_math.h"
#include "cpu_context.h"

static int check_activation(sdt_backend *be, const char *op, sdt_activation act)
{
    if ((int)act < 0 || act >= SDT_ACT_COUNT)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: activation %d is unknown; pass an sdt_activation value.", op, (int)act);
    return 0;
}

int cpu_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, sdt_activation act)
{
    if (check_activation(be, "activation_forward", act) ||
        cpu_check_same_numel(be, "activation_forward", "out", out, "x", x))
        return -1;
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
    if (check_activation(be, "activation_backward", act) ||
        cpu_check_same_numel(be, "activation_backward", "dx", dx, "x", x) ||
        cpu_check_same_numel(be, "activation_backward", "dout", dout, "x", x))
        return -1;
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
