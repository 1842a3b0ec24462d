/* geglu.c - diffusers GEGLU gating: value, gate = x.chunk(2, dim=-1); out = value * gelu(gate)
 * (exact erf GELU, as diffusers' F.gelu). The Linear projection before it is a separate op.
 * Phi(gate) and backward's act_gelu_grad(gate) come from cpu_normal_cdf_array (vec_erfcf.h: the scalar
 * expressions with the erfc and expf 4 lanes at a time, the same bits, so the op equals the shared GELU both
 * backends compute), a chunk of gates at a time: the scalar calls were ~10% of the demo-sized CPU step
 * (bench/NOTES.md runs 34 and 37). */
#include "shared_math.h"
#include "cpu_context.h"
#include "vec_erfcf.h"

/* Gates per vector call (stack buffers per thread). */
#define GEGLU_CHUNK 256

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
        float cdf[GEGLU_CHUNK];
        for (int64_t j0 = 0; j0 < c; j0 += GEGLU_CHUNK) {
            const int64_t n = c - j0 < GEGLU_CHUNK ? c - j0 : GEGLU_CHUNK;
            cpu_normal_cdf_array(gate + j0, cdf, NULL, n);
            for (int64_t j = 0; j < n; j++) o[r * c + j0 + j] = value[j0 + j] * (gate[j0 + j] * cdf[j]); /* act_gelu */
        }
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
        float cdf[GEGLU_CHUNK], grad[GEGLU_CHUNK];
        for (int64_t j0 = 0; j0 < c; j0 += GEGLU_CHUNK) {
            const int64_t n = c - j0 < GEGLU_CHUNK ? c - j0 : GEGLU_CHUNK;
            cpu_normal_cdf_array(gate + j0, cdf, grad, n);
            for (int64_t i = 0; i < n; i++) {
                const int64_t j = j0 + i;
                const float go = g[r * c + j], xg = gate[j];
                /* act_gelu and act_gelu_grad with Phi computed once. Written (ops.h). 0.0f + turns a -0
                 * product into +0: the bits that zeroing dx and accumulating gave. */
                dvalue[j] = 0.0f + go * (xg * cdf[i]);
                dgate[j] = 0.0f + go * value[j] * grad[i];
            }
        }
    }
    cpu_write_end(be, dx, gx);
    return 0;
}
