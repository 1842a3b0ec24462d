/* rope.c - rotary position embedding (diffusers' apply_rotary_emb, interleaved pairs) on the CPU.
 *
 * x [..., S, heads*D] is rows of positions: row r sits at position r % S and holds heads*D/D heads, each
 * rotated pairwise by its position's cos and sin rows [D]. Forward reads a pair before writing it, so out may
 * alias x; backward applies the transposed rotation and accumulates.
 */
#include "cpu_context.h"

static int rope_apply(sdt_backend *be, const char *op, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos,
                      const sdt_tensor *sin, bool transposed)
{
    const int64_t rows = sdt_tensor_rows(x), width = sdt_tensor_last_dim(x), S = cos->shape[0], D = cos->shape[1];
    if (rows * width == 0) return 0;
    const float *xf = cpu_read_f32(be, x, 0);
    const float *cf = cpu_read_f32(be, cos, 1);
    const float *sf = cpu_read_f32(be, sin, 2);
    float *of = cpu_write_begin(be, out, 3, transposed);
    if (!xf || !cf || !sf || !of) return cpu_fail_oom(be, op, sdt_tensor_nbytes(x) * 2);
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *width)) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *c = cf + (r % S) * D, *s = sf + (r % S) * D;
        const float *xr = xf + r * width;
        float *orow = of + r * width;
        for (int64_t j = 0; j < width; j += 2) {
            const int64_t i = j % D;
            const float a = xr[j], b = xr[j + 1];
            if (transposed) {
                orow[j] += a * c[i] + b * s[i + 1];
                orow[j + 1] += b * c[i + 1] - a * s[i];
            } else {
                orow[j] = a * c[i] - b * s[i];
                orow[j + 1] = b * c[i + 1] + a * s[i + 1];
            }
        }
    }
    cpu_write_end(be, out, of);
    return 0;
}

int cpu_rope_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *cos,
                     const sdt_tensor *sin)
{
    return rope_apply(be, "rope_forward", out, x, cos, sin, false);
}

int cpu_rope_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *cos,
                      const sdt_tensor *sin)
{
    if (!dx) return 0;
    return rope_apply(be, "rope_backward", dx, dout, cos, sin, true);
}
