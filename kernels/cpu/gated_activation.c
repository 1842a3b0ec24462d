/* gated_activation.c - a gated feed-forward's product out = act(gate) * up on the CPU (T5 v1.1's
 * gated GELU with act = GELU tanh); the two projections before it are linear ops. The activation's
 * value and derivative are shared_math.h's, so the CUDA backend computes the same numbers. */
#include "shared_math.h"
#include "cpu_context.h"

int cpu_gated_activation_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *gate, const sdt_tensor *up,
                                 sdt_activation act)
{
    const int64_t n = sdt_tensor_numel(out);
    if (n == 0) return 0;
    const float *g = cpu_read_f32(be, gate, 0);
    const float *u = cpu_read_f32(be, up, 1);
    float *o = cpu_write_begin(be, out, 2, false);
    if (!g || !u || !o) return cpu_fail_oom(be, "gated_activation_forward", (size_t)n * 3 * sizeof(float));
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] = act_value(act, g[i]) * u[i];
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_gated_activation_backward(sdt_backend *be, sdt_tensor *dgate, sdt_tensor *dup, const sdt_tensor *dout,
                                  const sdt_tensor *gate, const sdt_tensor *up, sdt_activation act)
{
    const int64_t n = sdt_tensor_numel(gate);
    if ((!dgate && !dup) || n == 0) return 0;
    const float *g = cpu_read_f32(be, gate, 0);
    const float *u = cpu_read_f32(be, up, 1);
    const float *d = cpu_read_f32(be, dout, 2);
    float *dg = cpu_write_begin(be, dgate, 3, false);
    float *du = cpu_write_begin(be, dup, 4, false);
    if (!g || !u || !d || (dgate && !dg) || (dup && !du))
        return cpu_fail_oom(be, "gated_activation_backward", (size_t)n * 5 * sizeof(float));
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        /* written, not accumulated (ops.h); 0.0f + turns a -0 product into +0, as geglu does */
        if (dg) dg[i] = 0.0f + d[i] * u[i] * act_derivative(act, g[i]);
        if (du) du[i] = 0.0f + d[i] * act_value(act, g[i]);
    }
    cpu_write_end(be, dgate, dg);
    cpu_write_end(be, dup, du);
    return 0;
}
