/* add.c - residual add (out = a + b, torch.add) and the ResBlock's per-channel add
 * (x += v[:, :, None, None]); their backward is an accumulate/sum of dout. */
#include "cpu_context.h"

int cpu_add_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *a, const sdt_tensor *b)
{
    int64_t n = sdt_tensor_numel(out);
    if (n == 0) return 0;
    /* out may alias a or b: for f32 the loop is elementwise; for 16-bit dtypes a and b are
     * staged into their own slots before out's buffer is written. */
    const float *as = cpu_read_f32(be, a, 0);
    const float *bs = cpu_read_f32(be, b, 1);
    float *o = cpu_write_begin(be, out, 2, false);
    if (!as || !bs || !o) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, n)) schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] = as[i] + bs[i];
    cpu_write_end(be, out, o);
    return 0;
}

/* B*C and the spatial size of x [B, C, spatial...] (v [B, C] is checked against it before
 * the op runs: op_checks.c). */
static void channel_dims(const sdt_tensor *x, int64_t *bc, int64_t *spatial)
{
    *bc = x->shape[0] * x->shape[1];
    *spatial = *bc ? sdt_tensor_numel(x) / *bc : 0;
}

int cpu_add_channel_forward(sdt_backend *be, sdt_tensor *x, const sdt_tensor *v)
{
    int64_t bc, spatial;
    channel_dims(x, &bc, &spatial);
    if (bc * spatial == 0) return 0;
    const float *vs = cpu_read_f32(be, v, 0);
    float *xs = cpu_write_begin(be, x, 1, true);
    if (!vs || !xs) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, bc *spatial)) schedule(static)
    for (int64_t i = 0; i < bc; i++)
        for (int64_t s = 0; s < spatial; s++) xs[i * spatial + s] += vs[i];
    cpu_write_end(be, x, xs);
    return 0;
}

int cpu_add_channel_backward(sdt_backend *be, sdt_tensor *dv, const sdt_tensor *dout)
{
    if (!dv) return 0;
    int64_t bc, spatial;
    channel_dims(dout, &bc, &spatial);
    if (bc == 0) return 0;
    const float *g = cpu_read_f32(be, dout, 0);
    float *gv = cpu_write_begin(be, dv, 1, true);
    if (!g || !gv) return -1;
#pragma omp parallel for num_threads(cpu_threads_for(be, bc *spatial)) schedule(static)
    for (int64_t i = 0; i < bc; i++) {
        double sum = 0; /* spatial sums reach 4096+ terms; double keeps them exact enough */
        for (int64_t s = 0; s < spatial; s++) sum += g[i * spatial + s];
        gv[i] += (float)sum;
    }
    cpu_write_end(be, dv, gv);
    return 0;
}
