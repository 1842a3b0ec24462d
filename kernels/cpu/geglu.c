/* geglu.c - diffusers GEGLU gating: value, gate = x.chunk(2, dim=-1); out = value * gelu(gate)
 * (exact erf GELU, as diffusers' F.gelu). The Linear projection before it is a separate op. */
#include "shared_math.h"
#include "cpu_context.h"

/* rows and C (the output's last dim) of a GEGLU call; x's last dim must be 2C. */
static int geglu_dims(sdt_backend *be, const char *op, const sdt_tensor *half, const sdt_tensor *x,
                      int64_t *rows, int64_t *c)
{
    if (cpu_check_tensor(be, op, "x", x) || cpu_check_tensor(be, op, "out/dout", half)) return -1;
    if (x->ndim < 1 || half->ndim < 1)
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: x and out need a last dimension; pass [..., 2C] and [..., C].", op);
    *c = half->shape[half->ndim - 1];
    if (x->shape[x->ndim - 1] != 2 * *c || sdt_tensor_numel(x) != 2 * sdt_tensor_numel(half))
        return cpu_fail(be, SDT_ERR_INVALID_ARGUMENT, "%s: x's last dim is %lld but out's is %lld; x must be [..., 2C] for out [..., C].", op,
                        (long long)x->shape[x->ndim - 1], (long long)*c);
    *rows = *c ? sdt_tensor_numel(half) / *c : 0;
    return 0;
}

int cpu_geglu_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    int64_t rows, c;
    if (geglu_dims(be, "geglu_forward", out, x, &rows, &c)) return -1;
    if (rows * c == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    float *o = cpu_write_begin(be, out, 1, false);
    if (!xs || !o) return -1;
    #pragma omp parallel for num_threads(cpu_threads_for(be, rows * c)) schedule(static)
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
    if (geglu_dims(be, "geglu_backward", dout, x, &rows, &c) ||
        cpu_check_same_numel(be, "geglu_backward", "dx", dx, "x", x))
        return -1;
    if (rows * c == 0) return 0;
    const float *xs = cpu_read_f32(be, x, 0);
    const float *g = cpu_read_f32(be, dout, 1);
    float *gx = cpu_write_begin(be, dx, 2, true);
    if (!xs || !g || !gx) return -1;
    #pragma omp parallel for num_threads(cpu_threads_for(be, rows * c)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *value = xs + r * 2 * c, *gate = value + c;
        float *dvalue = gx + r * 2 * c, *dgate = dvalue + c;
        for (int64_t j = 0; j < c; j++) {
            float go = g[r * c + j];
            dvalue[j] += go * act_gelu(gate[j]);
            dgate[j] += go * value[j] * act_gelu_grad(gate[j]);
        }
    }
    cpu_write_end(be, dx, gx);
    return 0;
}
