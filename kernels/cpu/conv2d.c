/* conv2d.c - torch.nn.functional.conv2d on the CPU (NCHW, square stride and
 * padding, dilation 1, groups 1) as im2col + OpenBLAS sgemm.
 *
 * Per image b: out_b [OC, OH*OW] = w [OC, C*KH*KW] x col_b [C*KH*KW, OH*OW].
 * A 1x1 kernel with stride 1 and no padding needs no im2col: x_b itself is the
 * column matrix, so that case is a single direct sgemm per image. The batch
 * loop stays sequential because sgemm already uses every thread; im2col and
 * col2im are split across OpenMP threads by input channel.
 */
#include "cpu_context.h"
#include "cpu_gemm.h"

#include <stdlib.h>
#include <string.h>

static const char *OP_FWD = "conv2d_forward";
static const char *OP_BWD = "conv2d_backward";

typedef struct conv_geom {
    int batch, c, h, w; /* input */
    int oc, kh, kw;     /* weight */
    int oh, ow;         /* output */
    int stride, pad;
    int threads; /* OpenMP threads for im2col, col2im and bias sums */
} conv_geom;

static int conv_rows(const conv_geom *g)
{
    return g->c * g->kh * g->kw;
}
static int conv_pixels(const conv_geom *g)
{
    return g->oh * g->ow;
}
static bool conv_is_direct(const conv_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad == 0;
}

/* The geometry of x [B, C, H, W] and w [OC, C, KH, KW] (checked before the op runs: op_checks.c). */
static void conv_geometry(sdt_backend *be, const sdt_tensor *x, const sdt_tensor *w, int stride, int pad, conv_geom *g)
{
    const int64_t oh = (x->shape[2] + 2 * pad - w->shape[2]) / stride + 1;
    const int64_t ow = (x->shape[3] + 2 * pad - w->shape[3]) / stride + 1;
    *g = (conv_geom){(int)x->shape[0],
                     (int)x->shape[1],
                     (int)x->shape[2],
                     (int)x->shape[3],
                     (int)w->shape[0],
                     (int)w->shape[2],
                     (int)w->shape[3],
                     (int)oh,
                     (int)ow,
                     stride,
                     pad,
                     1};
    g->threads = cpu_threads_for(be, (int64_t)conv_rows(g) * conv_pixels(g));
}

/* The output columns [*lo, *hi) whose input column ox*stride - pad + kx lies
 * inside [0, w): computing the range once keeps bounds checks out of the inner loops. */
static void conv_valid_range(const conv_geom *g, int kx, int *lo, int *hi)
{
    const int off = g->pad - kx; /* ix = ox*stride - off */
    int first = off > 0 ? (off + g->stride - 1) / g->stride : 0;
    int last = (g->w - 1 + off) / g->stride; /* w - 1 + off >= 0 since kx <= kw - 1 and the kernel fits */
    if (g->w - 1 + off < 0) last = -1;
    if (last > g->ow - 1) last = g->ow - 1;
    *lo = first < g->ow ? first : g->ow;
    *hi = last + 1 > *lo ? last + 1 : *lo;
}

/* col [C*KH*KW, OH*OW] from one image x_b [C, H, W]; zero where the window hits padding. */
static void im2col(const conv_geom *g, const float *x, float *col)
{
    const int rows = conv_rows(g), np = conv_pixels(g);
#pragma omp parallel for num_threads(g->threads) schedule(static)
    for (int r = 0; r < rows; r++) {
        const int c = r / (g->kh * g->kw), ky = (r / g->kw) % g->kh, kx = r % g->kw;
        int lo, hi;
        conv_valid_range(g, kx, &lo, &hi);
        const float *xc = x + (int64_t)c * g->h * g->w;
        float *dst = col + (int64_t)r * np;
        for (int oy = 0; oy < g->oh; oy++) {
            const int iy = oy * g->stride - g->pad + ky;
            float *drow = dst + (int64_t)oy * g->ow;
            if (iy < 0 || iy >= g->h) {
                memset(drow, 0, sizeof(float) * (size_t)g->ow);
                continue;
            }
            const float *xrow = xc + (int64_t)iy * g->w;
            const int shift = kx - g->pad; /* ix = ox*stride + shift */
            for (int ox = 0; ox < lo; ox++) drow[ox] = 0.0f;
            if (g->stride == 1 && hi > lo)
                memcpy(drow + lo, xrow + lo + shift, sizeof(float) * (size_t)(hi - lo));
            else
                for (int ox = lo; ox < hi; ox++) drow[ox] = xrow[ox * g->stride + shift];
            for (int ox = hi; ox < g->ow; ox++) drow[ox] = 0.0f;
        }
    }
}

/* dx_b [C, H, W] += the scatter of dcol back through im2col's index map.
 * Threads own whole channels, so no two write the same element. */
static void col2im_add(const conv_geom *g, const float *dcol, float *dx)
{
    const int np = conv_pixels(g);
#pragma omp parallel for num_threads(g->threads) schedule(static)
    for (int c = 0; c < g->c; c++) {
        float *dxc = dx + (int64_t)c * g->h * g->w;
        for (int ky = 0; ky < g->kh; ky++)
            for (int kx = 0; kx < g->kw; kx++) {
                int lo, hi;
                conv_valid_range(g, kx, &lo, &hi);
                const float *src = dcol + ((int64_t)(c * g->kh + ky) * g->kw + kx) * np;
                for (int oy = 0; oy < g->oh; oy++) {
                    const int iy = oy * g->stride - g->pad + ky;
                    if (iy < 0 || iy >= g->h) continue;
                    float *dxrow = dxc + (int64_t)iy * g->w;
                    const float *srow = src + (int64_t)oy * g->ow;
                    const int shift = kx - g->pad;
                    for (int ox = lo; ox < hi; ox++) dxrow[ox * g->stride + shift] += srow[ox];
                }
            }
    }
}

int cpu_conv2d_forward(sdt_backend *be, sdt_tensor *out, const sdt_tensor *x, const sdt_tensor *w, const sdt_tensor *b,
                       int stride, int pad)
{
    conv_geom g;
    conv_geometry(be, x, w, stride, pad, &g);
    const float *xf = cpu_read_f32(be, x, 0);
    const float *wf = cpu_read_f32(be, w, 1);
    const float *bf = cpu_read_f32(be, b, 2);
    float *of = cpu_write_begin(be, out, 3, false);
    if (!xf || !wf || (b && !bf) || !of) return cpu_fail_oom(be, OP_FWD, sdt_tensor_nbytes(out));

    const int rows = conv_rows(&g), np = conv_pixels(&g);
    const bool direct = conv_is_direct(&g);
    float *col = NULL;
    if (!direct && !(col = malloc(sizeof(float) * (size_t)rows * np)))
        return cpu_fail_oom(be, OP_FWD, sizeof(float) * (size_t)rows * np);

    for (int n = 0; n < g.batch; n++) {
        const float *xb = xf + (int64_t)n * g.c * g.h * g.w;
        float *ob = of + (int64_t)n * g.oc * np;
        /* Seeding with the bias lets sgemm add into it (beta = 1). */
        float beta = 0.0f;
        if (bf) {
#pragma omp parallel for num_threads(g.threads) schedule(static)
            for (int o = 0; o < g.oc; o++)
                for (int p = 0; p < np; p++) ob[(int64_t)o * np + p] = bf[o];
            beta = 1.0f;
        }
        if (!direct) im2col(&g, xb, col);
        cpu_sgemm(be, false, false, g.oc, np, rows, 1.0f, wf, rows, direct ? xb : col, np, beta, ob, np);
    }
    free(col);
    cpu_write_end(be, out, of);
    return 0;
}

/* db[o] += sum over images and pixels of dout[n, o, :]. */
static void conv_bias_grad(const conv_geom *g, const float *dout, float *db)
{
    const int np = conv_pixels(g);
#pragma omp parallel for num_threads(g->threads) schedule(static)
    for (int o = 0; o < g->oc; o++) {
        double acc = 0;
        for (int n = 0; n < g->batch; n++) {
            const float *src = dout + ((int64_t)n * g->oc + o) * np;
            for (int p = 0; p < np; p++) acc += src[p];
        }
        db[o] += (float)acc;
    }
}

int cpu_conv2d_backward(sdt_backend *be, sdt_tensor *dx, sdt_tensor *dw, sdt_tensor *db, const sdt_tensor *dout,
                        const sdt_tensor *x, const sdt_tensor *w, int stride, int pad)
{
    conv_geom g;
    conv_geometry(be, x, w, stride, pad, &g);

    const float *dof = cpu_read_f32(be, dout, 0);
    const float *xf = dw ? cpu_read_f32(be, x, 1) : NULL;
    const float *wf = dx ? cpu_read_f32(be, w, 2) : NULL;
    float *dxf = cpu_write_begin(be, dx, 3, true);
    float *dwf = cpu_write_begin(be, dw, 4, true);
    float *dbf = cpu_write_begin(be, db, 5, true);
    if (!dof || (dw && (!xf || !dwf)) || (dx && (!wf || !dxf)) || (db && !dbf))
        return cpu_fail_oom(be, OP_BWD, sdt_tensor_nbytes(x));

    const int rows = conv_rows(&g), np = conv_pixels(&g);
    const bool direct = conv_is_direct(&g);
    float *col = NULL;
    if (!direct && (dx || dw) && !(col = malloc(sizeof(float) * (size_t)rows * np)))
        return cpu_fail_oom(be, OP_BWD, sizeof(float) * (size_t)rows * np);

    for (int n = 0; n < g.batch; n++) {
        const float *dob = dof + (int64_t)n * g.oc * np;
        const int64_t xoff = (int64_t)n * g.c * g.h * g.w;
        if (dw) {
            /* dw [OC, rows] += dout_b [OC, P] x col_b^T [P, rows] */
            if (!direct) im2col(&g, xf + xoff, col);
            cpu_sgemm(be, false, true, g.oc, rows, np, 1.0f, dob, np, direct ? xf + xoff : col, np, 1.0f, dwf, rows);
        }
        if (dx && direct) {
            cpu_sgemm(be, true, false, rows, np, g.oc, 1.0f, wf, rows, dob, np, 1.0f, dxf + xoff, np);
        } else if (dx) {
            /* dcol [rows, P] = w^T x dout_b, then scattered back into dx_b. */
            cpu_sgemm(be, true, false, rows, np, g.oc, 1.0f, wf, rows, dob, np, 0.0f, col, np);
            col2im_add(&g, col, dxf + xoff);
        }
    }
    if (db) conv_bias_grad(&g, dof, dbf);
    free(col);
    cpu_write_end(be, dx, dxf);
    cpu_write_end(be, dw, dwf);
    cpu_write_end(be, db, dbf);
    return 0;
}

/* The same values as zeroing dx and accumulating into it (conv2d_backward's path, one home for the math). */
int cpu_conv2d_input_grad(sdt_backend *be, sdt_tensor *dx, const sdt_tensor *dout, const sdt_tensor *w, int stride,
                          int pad)
{
    sdt_tensor x_shape = *dx;
    x_shape.data = NULL;
    if (cpu_zero(be, dx)) return -1;
    return cpu_conv2d_backward(be, dx, NULL, NULL, dout, &x_shape, w, stride, pad);
}
