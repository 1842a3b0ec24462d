/* test_linear.c - linear (torch.nn.functional.linear) forward and backward on the CPU
 * against a float64 reference and finite differences. */
#include "op_check.h"

typedef struct lin_ref {
    int64_t n, c, oc;
    double *x, *w, *b; /* b may be NULL */
    const double *dout;
} lin_ref;

static void lin_forward_ref(const lin_ref *r, double *out)
{
    for (int64_t i = 0; i < r->n; i++)
        for (int64_t o = 0; o < r->oc; o++) {
            double s = r->b ? r->b[o] : 0.0;
            for (int64_t k = 0; k < r->c; k++) s += r->x[i * r->c + k] * r->w[o * r->c + k];
            out[i * r->oc + o] = s;
        }
}

static double lin_loss(const double *param, void *ctx)
{
    (void)param; /* param is one of r's arrays, perturbed in place */
    const lin_ref *r = ctx;
    double *out = op_zeros_d(r->n * r->oc);
    lin_forward_ref(r, out);
    double l = sdt_fd_dot(out, r->dout, r->n * r->oc);
    free(out);
    return l;
}

static void lin_backward_ref(const lin_ref *r, double *dx, double *dw, double *db)
{
    for (int64_t i = 0; i < r->n; i++)
        for (int64_t o = 0; o < r->oc; o++) {
            const double d = r->dout[i * r->oc + o];
            for (int64_t k = 0; k < r->c; k++) {
                dx[i * r->c + k] += d * r->w[o * r->c + k];
                dw[o * r->c + k] += d * r->x[i * r->c + k];
            }
            db[o] += d;
        }
}

/* x [bt0, bt1, c] (stored as xdtype), w [oc, c], optional bias. */
static void run_case(sdt_backend *be, sdt_test_rng *rng, int64_t bt0, int64_t bt1, int64_t c, int64_t oc, bool bias,
                     sdt_dtype xdtype)
{
    char what[96];
    snprintf(what, sizeof what, "linear x[%lld,%lld,%lld] w[%lld,%lld]%s x:%s", (long long)bt0, (long long)bt1,
             (long long)c, (long long)oc, (long long)c, bias ? " +b" : "", sdt_dtype_name(xdtype));
    const int64_t n = bt0 * bt1;
    float *x = kt_randn(rng, n * c, 1.0), *w = kt_randn(rng, oc * c, 0.5), *b = kt_randn(rng, oc, 0.5);
    /* x is stored in xdtype for real; the reference sees the stored (rounded) values. */
    void *x16 = op_store_as(x, n * c, xdtype);
    const int64_t xs[3] = {bt0, bt1, c}, ws[2] = {oc, c}, bs[1] = {oc}, os[3] = {bt0, bt1, oc};
    sdt_tensor tx = sdt_tensor_make(x16, xdtype, SDT_DEVICE_CPU, 3, xs);
    sdt_tensor tw = op_tensor(w, 2, ws), tb = op_tensor(b, 1, bs);
    float *out = kt_randn(rng, n * oc, 1.0); /* garbage: forward must overwrite */
    sdt_tensor tout = op_tensor(out, 3, os);
    CHECK(be->linear_forward(be, &tout, &tx, &tw, bias ? &tb : NULL) == 0, "%s forward failed: %s", what,
          be->error.message);

    double *dout_d = NULL;
    float *dout = kt_randn(rng, n * oc, 1.0);
    dout_d = kt_to_double(dout, n * oc);
    lin_ref r = {n, c, oc, kt_to_double(x, n * c), kt_to_double(w, oc * c), bias ? kt_to_double(b, oc) : NULL, dout_d};
    double *ref = op_zeros_d(n * oc);
    lin_forward_ref(&r, ref);
    op_check_forward(what, out, ref, n * oc);

    kt_grad g_dx = kt_grad_make(rng, n * c), g_dw = kt_grad_make(rng, oc * c), g_db = kt_grad_make(rng, oc);
    sdt_tensor tdout = op_tensor(dout, 3, os);
    for (int pass = 0; pass < 2; pass++) {
        sdt_tensor tdx = op_tensor(op_grad_buf(&g_dx, pass), 3, xs), tdw = op_tensor(op_grad_buf(&g_dw, pass), 2, ws),
                   tdb = op_tensor(op_grad_buf(&g_db, pass), 1, bs);
        CHECK(be->linear_backward(be, &tdx, &tdw, bias ? &tdb : NULL, &tdout, &tx, &tw) == 0, "%s backward failed: %s",
              what, be->error.message);
    }
    double *gdx = op_zeros_d(n * c), *gdw = op_zeros_d(oc * c), *gdb = op_zeros_d(oc);
    lin_backward_ref(&r, gdx, gdw, gdb);
    char name[128];
    snprintf(name, sizeof name, "%s dx", what);
    op_check_grad(name, &g_dx, gdx, lin_loss, &r, r.x);
    snprintf(name, sizeof name, "%s dw", what);
    op_check_grad(name, &g_dw, gdw, lin_loss, &r, r.w);
    if (bias) {
        snprintf(name, sizeof name, "%s db", what);
        op_check_grad(name, &g_db, gdb, lin_loss, &r, r.b);
    }
    /* out = x w^T + b + residual, written over out's garbage */
    float *res = kt_randn(rng, n * oc, 1.0), *out_r = kt_randn(rng, n * oc, 1.0);
    sdt_tensor tres = op_tensor(res, 3, os), tout_r = op_tensor(out_r, 3, os);
    CHECK(be->linear_residual_forward(be, &tout_r, &tx, &tw, bias ? &tb : NULL, &tres) == 0,
          "%s residual forward failed: %s", what, be->error.message);
    double *ref_r = op_zeros_d(n * oc);
    for (int64_t i = 0; i < n * oc; i++) ref_r[i] = ref[i] + res[i];
    snprintf(name, sizeof name, "%s + residual", what);
    op_check_forward(name, out_r, ref_r, n * oc);
    free(res), free(out_r), free(ref_r);
    /* the frozen layer's input gradient, written over whatever dx held */
    float *dx_only = kt_randn(rng, n * c, 1.0);
    sdt_tensor tdx_only = op_tensor(dx_only, 3, xs);
    CHECK(be->linear_input_grad(be, &tdx_only, &tdout, &tw) == 0, "%s input_grad failed: %s", what, be->error.message);
    snprintf(name, sizeof name, "%s input_grad", what);
    op_check_forward(name, dx_only, gdx, n * c);
    free(dx_only);
    op_store_free(x16, x);
    free(x);
    free(w);
    free(b);
    free(out);
    free(dout);
    free(dout_d);
    free(ref);
    kt_grad_free(&g_dx);
    kt_grad_free(&g_dw);
    kt_grad_free(&g_db);
    free(gdx);
    free(gdw);
    free(gdb);
    free(r.x);
    free(r.w);
    free(r.b);
}

static void check_rejects(sdt_backend *be)
{
    float buf[64] = {0};
    const int64_t xs[2] = {3, 4}, ws_bad[2] = {5, 6}, os[2] = {3, 5};
    sdt_tensor x = op_tensor(buf, 2, xs), w = op_tensor(buf, 2, ws_bad), out = op_tensor(buf, 2, os);
    op_check_rejects(be, be->linear_forward(be, &out, &x, &w, NULL), "linear_forward", "w with the wrong C");
}

int main(void)
{
    printf("op: linear\n");
    sdt_test_rng rng = sdt_test_rng_from_env("test_linear");
    sdt_backend *be = kt_backend();
    run_case(be, &rng, 1, 1, 1, 1, false, SDT_F32); /* one product: with a bias, x*w + b could cancel to ~0 */
    run_case(be, &rng, 2, 7, 13, 5, true, SDT_F32);
    run_case(be, &rng, 1, 3, 17, 11, false, SDT_F32);
    run_case(be, &rng, 3, 5, 9, 7, true, SDT_F16);
    run_case(be, &rng, 2, 4, 9, 6, true, SDT_BF16);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_linear");
}
