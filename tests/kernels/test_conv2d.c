/* test_conv2d.c - conv2d (torch.nn.functional.conv2d, NCHW) forward and backward on
 * the CPU against a direct float64 convolution and finite differences: 3x3 pad 1,
 * 3x3 stride 2 pad 1, 1x1 (the direct-GEMM path), 1x1 stride 2 and odd sizes. */
#include "op_check.h"

typedef struct conv_ref {
    int64_t n, c, h, w, oc, k, oh, ow;
    int stride, pad;
    double *x, *wt, *b; /* b may be NULL */
    const double *dout;
} conv_ref;

/* Calls visit(r, out_index, x_index, w_index) for every multiply of the convolution. */
#define CONV_FOR_EACH(r, BODY)                                                                                         \
    for (int64_t nn = 0; nn < (r)->n; nn++)                                                                            \
        for (int64_t o = 0; o < (r)->oc; o++)                                                                          \
            for (int64_t oy = 0; oy < (r)->oh; oy++)                                                                   \
                for (int64_t ox = 0; ox < (r)->ow; ox++) {                                                             \
                    const int64_t oi = ((nn * (r)->oc + o) * (r)->oh + oy) * (r)->ow + ox;                             \
                    for (int64_t ci = 0; ci < (r)->c; ci++)                                                            \
                        for (int64_t ky = 0; ky < (r)->k; ky++)                                                        \
                            for (int64_t kx = 0; kx < (r)->k; kx++) {                                                  \
                                const int64_t iy = oy * (r)->stride - (r)->pad + ky;                                   \
                                const int64_t ix = ox * (r)->stride - (r)->pad + kx;                                   \
                                if (iy < 0 || iy >= (r)->h || ix < 0 || ix >= (r)->w) continue;                        \
                                const int64_t xi = ((nn * (r)->c + ci) * (r)->h + iy) * (r)->w + ix;                   \
                                const int64_t wi = ((o * (r)->c + ci) * (r)->k + ky) * (r)->k + kx;                    \
                                BODY                                                                                   \
                            }                                                                                          \
                }

static void conv_forward_ref(const conv_ref *r, double *out)
{
    const int64_t np = r->oh * r->ow;
    for (int64_t i = 0; i < r->n * r->oc * np; i++) out[i] = r->b ? r->b[(i / np) % r->oc] : 0.0;
    CONV_FOR_EACH(r, { out[oi] += r->x[xi] * r->wt[wi]; })
}

static double conv_loss(const double *param, void *ctx)
{
    (void)param;
    const conv_ref *r = ctx;
    const int64_t no = r->n * r->oc * r->oh * r->ow;
    double *out = op_zeros_d(no);
    conv_forward_ref(r, out);
    double l = sdt_fd_dot(out, r->dout, no);
    free(out);
    return l;
}

static void conv_backward_ref(const conv_ref *r, double *dx, double *dw, double *db)
{
    const int64_t np = r->oh * r->ow;
    for (int64_t i = 0; i < r->n * r->oc * np; i++) db[(i / np) % r->oc] += r->dout[i];
    CONV_FOR_EACH(r, {
        dx[xi] += r->dout[oi] * r->wt[wi];
        dw[wi] += r->dout[oi] * r->x[xi];
    })
}

static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc,
                     int64_t k, int stride, int pad, sdt_dtype xdtype)
{
    char what[128];
    snprintf(what, sizeof what, "conv2d x[%lld,%lld,%lld,%lld] %lldx%lld->%lld stride %d pad %d x:%s", (long long)n,
             (long long)c, (long long)h, (long long)w, (long long)k, (long long)k, (long long)oc, stride, pad,
             sdt_dtype_name(xdtype));
    conv_ref r = {n,      c,   h,    w,    oc,   k,   (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1,
                  stride, pad, NULL, NULL, NULL, NULL};
    const int64_t nx = n * c * h * w, nw = oc * c * k * k, no = n * oc * r.oh * r.ow;
    float *x = kt_randn(rng, nx, 1.0), *wt = kt_randn(rng, nw, 0.5), *b = kt_randn(rng, oc, 0.5);
    void *x16 = op_store_as(x, nx, xdtype);
    const int64_t xs[4] = {n, c, h, w}, wsh[4] = {oc, c, k, k}, bs[1] = {oc}, os[4] = {n, oc, r.oh, r.ow};
    sdt_tensor tx = sdt_tensor_make(x16, xdtype, SDT_DEVICE_CPU, 4, xs);
    sdt_tensor tw = op_tensor(wt, 4, wsh), tb = op_tensor(b, 1, bs);
    float *out = kt_randn(rng, no, 1.0);
    sdt_tensor tout = op_tensor(out, 4, os);
    CHECK(be->conv2d_forward(be, &tout, &tx, &tw, &tb, stride, pad) == 0, "%s forward failed: %s", what,
          be->error.message);

    float *dout = kt_randn(rng, no, 1.0);
    r.x = kt_to_double(x, nx);
    r.wt = kt_to_double(wt, nw);
    r.b = kt_to_double(b, oc);
    r.dout = kt_to_double(dout, no);
    double *ref = op_zeros_d(no);
    conv_forward_ref(&r, ref);
    op_check_forward(what, out, ref, no);

    kt_grad g_dx = kt_grad_make(rng, nx), g_dw = kt_grad_make(rng, nw), g_db = kt_grad_make(rng, oc);
    sdt_tensor tdout = op_tensor(dout, 4, os);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdx = op_tensor(op_grad_buf(&g_dx, pass), 4, xs), tdw = op_tensor(op_grad_buf(&g_dw, pass), 4, wsh),
                   tdb = op_tensor(op_grad_buf(&g_db, pass), 1, bs);
        CHECK(be->conv2d_backward(be, &tdx, &tdw, &tdb, &tdout, &tx, &tw, stride, pad) == 0, "%s backward failed: %s",
              what, be->error.message);
    }
    double *gdx = op_zeros_d(nx), *gdw = op_zeros_d(nw), *gdb = op_zeros_d(oc);
    conv_backward_ref(&r, gdx, gdw, gdb);
    char name[160];
    snprintf(name, sizeof name, "%s dx", what);
    op_check_grad(name, &g_dx, gdx, conv_loss, &r, r.x);
    snprintf(name, sizeof name, "%s dw", what);
    op_check_grad(name, &g_dw, gdw, conv_loss, &r, r.wt);
    snprintf(name, sizeof name, "%s db", what);
    op_check_grad(name, &g_db, gdb, conv_loss, &r, r.b);
    /* the frozen conv's input gradient, written over whatever dx held */
    float *dx_only = kt_randn(rng, nx, 1.0);
    sdt_tensor tdx_only = op_tensor(dx_only, 4, xs);
    CHECK(be->conv2d_input_grad(be, &tdx_only, &tdout, &tw, stride, pad) == 0, "%s input_grad failed: %s", what,
          be->error.message);
    snprintf(name, sizeof name, "%s input_grad", what);
    op_check_forward(name, dx_only, gdx, nx);
    free(dx_only);
    op_store_free(x16, x);
    free(x);
    free(wt);
    free(b);
    free(out);
    free(dout);
    free(ref);
    kt_grad_free(&g_dx);
    kt_grad_free(&g_dw);
    kt_grad_free(&g_db);
    free(gdx);
    free(gdw);
    free(gdb);
    free(r.x);
    free(r.wt);
    free(r.b);
    free((void *)r.dout);
}

static void check_rejects(sdt_backend *be)
{
    float buf[256] = {0};
    const int64_t xs[4] = {1, 3, 4, 4}, ws_bad[4] = {2, 5, 3, 3}, os[4] = {1, 2, 4, 4}, os_bad[4] = {1, 2, 3, 4};
    const int64_t ws[4] = {2, 3, 3, 3};
    sdt_tensor x = op_tensor(buf, 4, xs), wb = op_tensor(buf, 4, ws_bad), w = op_tensor(buf, 4, ws);
    sdt_tensor out = op_tensor(buf, 4, os), outb = op_tensor(buf, 4, os_bad);
    op_check_rejects(be, be->conv2d_forward(be, &out, &x, &wb, NULL, 1, 1), "conv2d_forward",
                     "w with the wrong input channels");
    op_check_rejects(be, be->conv2d_forward(be, &outb, &x, &w, NULL, 1, 1), "conv2d_forward",
                     "an output of the wrong spatial size");
    op_check_rejects(be, be->conv2d_forward(be, &out, &x, &w, NULL, 0, 1), "conv2d_forward", "stride 0");
}

int main(void)
{
    printf("op: conv2d\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_conv2d");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 2, 3, 7, 5, 4, 3, 1, 1, SDT_F32);  /* 3x3 pad 1, odd sizes */
    run_case(be, &rng, 1, 1, 1, 1, 1, 3, 1, 1, SDT_F32);  /* everything 1 */
    run_case(be, &rng, 2, 2, 7, 6, 3, 3, 2, 1, SDT_F32);  /* 3x3 stride 2 pad 1 (downsample) */
    run_case(be, &rng, 2, 5, 3, 7, 11, 1, 1, 0, SDT_F32); /* 1x1: direct GEMM, no im2col */
    run_case(be, &rng, 1, 3, 5, 5, 2, 1, 2, 0, SDT_F32);  /* 1x1 stride 2 through im2col */
    run_case(be, &rng, 1, 2, 7, 8, 3, 3, 3, 2, SDT_F32);  /* stride 3 pad 2: windows hanging over both edges */
    run_case(be, &rng, 1, 3, 5, 4, 2, 3, 1, 1, SDT_F16);  /* f16 input storage */
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_conv2d");
}
