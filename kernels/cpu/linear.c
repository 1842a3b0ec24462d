/* linear.c - torch.nn.functional.linear on the CPU: out = x w^T + b via OpenBLAS sgemm.
 *
 * x [..., C] is viewed as a matrix [N, C]; w is [OC, C] (PyTorch layout), so the
 * forward is one row-major sgemm with w transposed. Backward accumulates:
 * dx += dout w, dw += dout^T x (beta = 1), db += column sums of dout.
 */
#include "cpu_context.h"
#include "cpu_gemm.h"


static const char *OP_FWD = "linear_forward";
static const char *OP_BWD = "linear_backward";

int cpu_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x,
                       const sdt_tensor *w, const sdt_tensor *b)
{

    const int n = (int)sdt_tensor_rows(x), c = (int)sdt_tensor_last_dim(x), oc = (int)w->shape[0];
    const float *xf = cpu_read_f32(be, x, 0);
    const float *wf = cpu_read_f32(be, w, 1);
    const float *bf = cpu_read_f32(be, b, 2);
    float *of = cpu_write_begin(be, out, 3, false);
    if (!xf || !wf || (b && !bf) || !of) return cpu_fail_oom(be, OP_FWD, sdt_tensor_nbytes(out));

    /* Seeding out with the bias lets sgemm add the product in the same pass (beta = 1). */
    float beta = 0.0f;
    if (bf) {
#pragma omp parallel for num_threads(cpu_threads_for(be, (int64_t)n * oc)) schedule(static)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < oc; o++) of[(int64_t)i * oc + o] = bf[o];
        beta = 1.0f;
    }
    cpu_sgemm(be, false, true, n, oc, c, 1.0f, xf, c, wf, c, beta, of, oc);
    cpu_write_end(be, out, of);
    return 0;
}

/* The linear, then the residual added as add_forward adds it: the same bits as the two ops. */
int cpu_linear_residual_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w,
                                const sdt_tensor *b, const sdt_tensor *residual)
{
    if (cpu_linear_forward(be, out, x, w, b)) return -1;
    return cpu_add_forward(be, out, out, residual);
}

/* db[o] += sum over rows of dout[:, o]; rows split across threads, columns stay contiguous. */
static void linear_bias_grad(float *db, const float *dout, int n, int oc, int threads)
{
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int o0 = 0; o0 < oc; o0 += 64) {
        int o1 = o0 + 64 < oc ? o0 + 64 : oc;
        double acc[64] = {0};
        for (int i = 0; i < n; i++)
            for (int o = o0; o < o1; o++) acc[o - o0] += dout[(int64_t)i * oc + o];
        for (int o = o0; o < o1; o++) db[o] += (float)acc[o - o0];
    }
}

int cpu_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db,
                        const sdt_tensor *dout, const sdt_tensor *x, const sdt_tensor *w)
{

    const int n = (int)sdt_tensor_rows(x), c = (int)sdt_tensor_last_dim(x), oc = (int)w->shape[0];
    const float *dof = cpu_read_f32(be, dout, 0);
    if (!dof) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(dout));
    if (dx) {
        const float *wf = cpu_read_f32(be, w, 1);
        float *dxf = cpu_write_begin(be, dx, 3, true);
        if (!wf || !dxf) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(dx));
        cpu_sgemm(be, false, false, n, c, oc, 1.0f, dof, oc, wf, c, 1.0f, dxf, c);
        cpu_write_end(be, dx, dxf);
    }
    if (dw) {
        const float *xf = cpu_read_f32(be, x, 2);
        float *dwf = cpu_write_begin(be, dw, 4, true);
        if (!xf || !dwf) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(dw));
        cpu_sgemm(be, true, false, oc, c, n, 1.0f, dof, oc, xf, c, 1.0f, dwf, c);
        cpu_write_end(be, dw, dwf);
    }
    if (db) {
        float *dbf = cpu_write_begin(be, db, 5, true);
        if (!dbf) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(db));
        linear_bias_grad(dbf, dof, n, oc, cpu_threads_for(be, (int64_t)n * oc));
        cpu_write_end(be, db, dbf);
    }
    return 0;
}

/* The same values as zeroing dx and accumulating into it (linear_backward's path, one home for the math). */
int cpu_linear_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w)
{
    sdt_tensor x_shape = *dx;
    x_shape.data = NULL;
    if (cpu_zero(be, dx)) return -1;
    return cpu_linear_backward(be, dx, NULL, NULL, dout, &x_shape, w);
}
