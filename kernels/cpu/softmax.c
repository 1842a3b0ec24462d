/* softmax.c - torch.softmax(x, dim=-1) on the CPU, rows split across OpenMP threads. */
#include "cpu_context.h"
#include "softmax_row.h"

#include <math.h>

void cpu_softmax_row(float *y, const float *x, int n)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += y[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) y[i] *= inv;
}

void cpu_softmax_row_backward(float *dx, const float *dy, const float *y, int n, bool accumulate)
{
    double dot = 0;
    for (int i = 0; i < n; i++) dot += (double)dy[i] * y[i];
    const float d = (float)dot;
    if (accumulate)
        for (int i = 0; i < n; i++) dx[i] += y[i] * (dy[i] - d);
    else
        for (int i = 0; i < n; i++) dx[i] = y[i] * (dy[i] - d);
}

int cpu_softmax_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x)
{
    const char *op = "softmax_forward";
    const int64_t rows = sdt_tensor_rows(x);
    const int n = (int)sdt_tensor_last_dim(x);
    const float *xf = cpu_read_f32(be, x, 0);
    float *of = cpu_write_begin(be, out, 1, false);
    if (!xf || !of) return cpu_fail_oom(be, op, sdt_tensor_nbytes(out));
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *n)) schedule(static)
    for (int64_t r = 0; r < rows; r++) cpu_softmax_row(of + r * n, xf + r * n, n);
    cpu_write_end(be, out, of);
    return 0;
}

int cpu_softmax_backward(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *out)
{
    const char *op = "softmax_backward";
    if (!dx) return 0;
    const int64_t rows = sdt_tensor_rows(out);
    const int n = (int)sdt_tensor_last_dim(out);
    const float *dof = cpu_read_f32(be, dout, 0);
    const float *yf = cpu_read_f32(be, out, 1);
    float *dxf = cpu_write_begin(be, dx, 2, true);
    if (!dof || !yf || !dxf) return cpu_fail_oom(be, op, sdt_tensor_nbytes(dx));
#pragma omp parallel for num_threads(cpu_threads_for(be, rows *n)) schedule(static)
    for (int64_t r = 0; r < rows; r++) cpu_softmax_row_backward(dxf + r * n, dof + r * n, yf + r * n, n, true);
    cpu_write_end(be, dx, dxf);
    return 0;
}
