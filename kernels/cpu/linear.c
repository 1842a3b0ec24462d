/* linear.c - torch.nn.functional.linear on the CPU: out = x w^T + b via OpenBLAS sgemm.
 *
 * x [..., C] is viewed as a matrix [N, C]; w is [OC, C] (PyTorch layout), so the
 * forward is a row-major sgemm with w transposed. Backward accumulates:
 * dx += dout w, dw += dout^T x (beta = 1), db += column sums of dout.
 *
 * x [S, ..., C] holds S samples (sequences, images; a 2-D x is one sample), and the forward and dx
 * are one GEMM per sample: OpenBLAS's kernels for some CPUs (Haswell, Zen) give a row bits that
 * depend on its place in the call and on the call's row count, so a GEMM over the whole batch would
 * let a sample's output depend on what else shares its batch. Per sample, it never does (the text
 * cache relies on it: docs/DESIGN.md section 8). dw sums over every row, so it stays one GEMM.
 */
#include "cpu_context.h"
#include "cpu_gemm.h"

static const char *OP_FWD = "linear_forward";
static const char *OP_BWD = "linear_backward";

/* Rows of one sample of x [S, ..., C]: all of them for a 2-D x. */
static int sample_rows(const sdt_tensor *x)
{
    const int64_t rows = sdt_tensor_rows(x);
    return (int)(x->ndim >= 3 && x->shape[0] > 0 ? rows / x->shape[0] : rows);
}

/* Row-major C [n, cols] = alpha A [n, k] op(B) + beta C, one cpu_sgemm per sample of `rows` rows. */
static void sgemm_per_sample(sdt_backend *be, bool trans_b, int n, int rows, int cols, int k, const float *a,
                             const float *b, int ldb, float beta, float *c)
{
    for (int r0 = 0; r0 < n; r0 += rows)
        cpu_sgemm(be, false, trans_b, rows, cols, k, 1.0f, a + (size_t)r0 * k, k, b, ldb, beta, c + (size_t)r0 * cols,
                  cols);
}

int cpu_linear_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b)
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
#pragma omp parallel for num_threads(cpu_threads_for(be, (int64_t)n *oc)) schedule(static)
        for (int i = 0; i < n; i++)
            for (int o = 0; o < oc; o++) of[(int64_t)i * oc + o] = bf[o];
        beta = 1.0f;
    }
    sgemm_per_sample(be, true, n, sample_rows(x), oc, c, xf, wf, c, beta, of);
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

int cpu_linear_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                        const sdt_tensor *x, const sdt_tensor *w)
{
    const int n = (int)sdt_tensor_rows(x), c = (int)sdt_tensor_last_dim(x), oc = (int)w->shape[0];
    const float *dof = cpu_read_f32(be, dout, 0);
    if (!dof) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(dout));
    if (dx) {
        const float *wf = cpu_read_f32(be, w, 1);
        float *dxf = cpu_write_begin(be, dx, 3, true);
        if (!wf || !dxf) return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(dx));
        sgemm_per_sample(be, false, n, sample_rows(x), c, oc, dof, wf, c, 1.0f, dxf);
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
