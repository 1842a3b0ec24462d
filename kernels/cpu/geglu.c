/* geglu.c - diffusers GEGLU gating: value, gate = x.chunk(2, dim=-1); out = value * gelu(gate)
 * (exact erf GELU, as diffusers' F.gelu). The Linear projection before it is a separate op. */
#include "shared_math.h"
#include "cpu_context.h"

/* rows and C (the output's last dim) of a GEGLU call on half [..., C] (out or dout); x is
 * [..., 2C] (checked before the op runs: op_checks.c). */
static void geglu_dims(const sdt_tensor *half, int64_t *rows, int64_t *c)
{
    *c = half->shape[half->ndim - 1];
    *rows = *c ? sdt_tensor_numel(half) / *c : 0;
}

int cpu_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t rows, c;
    geglu_dims(out, &rows, &c);
    if (rows * c == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *value = xs + r * 2 * c, *gate = value + c;
        for (int64_t j = 0; j < c; j++) o[r * c + j] = value[j] * act_gelu(gate[j]);
    }
    cpu_write_end(be, out, o);
    return 0;
}

int cpu_geglu_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *x)
{
    if (!dx) return 0;
    int64_t rows, c;
    geglu_dims(dout, &rows, &c);
    if (rows * c == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    const float *g = cpu_read_f32(be, dout, 1);
    float *gx = cpu_write_begin(be, dx, 2, false);
    if (!xs || !g || !gx) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *c)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *value = xs + r * 2 * c, *gate = value + c;
        float *dvalue = gx + r * 2 * c, *dgate = dvalue + c;
        for (int64_t j = 0; j < c; j++) {
            const float go = g[r * c + j], x = gate[j];
            /* Phi(x) once for both (act_gelu and act_gelu_grad's expressions, so the same bits):
             * erfcf is the costliest call of the UNet's backward. Written (ops.h). 0.0f + turns a
             * -0 product into +0: the bits that zeroing dx and accumulating gave, which the demo's
             * byte-compared outputs depend on. */
            const float cdf = act_normal_cdf(x);
            dvalue[j] = 0.0f + go * (x * cdf);
            dgate[j] = 0.0f + go * value[j] * (cdf + x * ACT_INV_SQRT_2PI * expf(-0.5f * x * x));
        }
    }
    cpu_write_end(be, dx, gx);
    return 0;
}
