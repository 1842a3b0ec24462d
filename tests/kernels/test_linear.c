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
    float *x = op_rand(rng, n * c, 1.0), *w = op_rand(rng, oc * c, 0.5), *b = op_rand(rng, oc, 0.5);
    /* x is stored in xdtype for real; the reference sees the stored (rounded) values. */
    uint16_t *x16 = malloc((size_t)(n * c) * 2);
    if (xdtype != SDT_F32) {
        sdt_store_f32(x, x16, xdtype, n * c);
        sdt_load_f32(x16, xdtype, x, n * c);
    }
    const int64_t xs[3] = {bt0, bt1, c}, ws[2] = {oc, c}, bs[1] = {oc}, os[3] = {bt0, bt1, oc};
    sdt_tensor tx = sdt_tensor_make(xdtype == SDT_F32 ? (void *)x : (void *)x16, xdtype, SDT_DEVICE_CPU, 3, xs);
    sdt_tensor tw = op_tensor(w, 2, ws), tb = op_tensor(b, 1, bs);
    float *out = op_rand(rng, n * oc, 1.0); /* garbage: forward must overwrite */
    sdt_tensor tout = op_tensor(out, 3, os);
    CHECK(be->linear_forward(be, &tout, &tx, &tw, bias ? &tb : NULL) == 0, "%s forward failed: %s", what, be->error);

    double *dout_d = NULL;
    float *dout = op_rand(rng, n * oc, 1.0);
    dout_d = op_to_double(dout, n * oc);
    lin_ref r = {n, c, oc, op_to_double(x, n * c), op_to_double(w, oc * c), bias ? op_to_double(b, oc) : NULL,
                 dout_d};
    double *ref = op_zeros_d(n * oc);
    lin_forward_ref(&r, ref);
    op_check_forward(what, out, ref, n * oc);

    float *dx = op_rand(rng, n * c, 1.0), *dw = op_rand(rng, oc * c, 1.0), *db = op_rand(rng, oc, 1.0);
    float *dx0 = op_copy(dx, n * c), *dw0 = op_copy(dw, oc * c), *db0 = op_copy(db, oc);
    sdt_tensor tdout = op_tensor(dout, 3, os), tdx = op_tensor(dx, 3, xs), tdw = op_tensor(dw, 2, ws),
               tdb = op_tensor(db, 1, bs);
    CHECK(be->linear_backward(be, &tdx, &tdw, bias ? &tdb : NULL, &tdout, &tx, &tw) == 0, "%s backward failed: %s",
          what, be->error);
    double *gdx = op_zeros_d(n * c), *gdw = op_zeros_d(oc * c), *gdb = op_zeros_d(oc);
    lin_backward_ref(&r, gdx, gdw, gdb);
    char name[128];
    snprintf(name, sizeof name, "%s dx", what);
    op_check_grad(name, dx, dx0, gdx, n * c, lin_loss, &r, r.x);
    snprintf(name, sizeof name, "%s dw", what);
    op_check_grad(name, dw, dw0, gdw, oc * c, lin_loss, &r, r.w);
    if (bias) {
        snprintf(name, sizeof name, "%s db", what);
        op_check_grad(name, db, db0, gdb, oc, lin_loss, &r, r.b);
    }
    free(x); free(x16); free(w); free(b); free(out); free(dout); free(dout_d); free(ref);
    free(dx); free(dw); free(db); free(dx0); free(dw0); free(db0); free(gdx); free(gdw); free(gdb);
    free(r.x); free(r.w); free(r.b);
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
    sdt_backend *be = sdt_backend_cpu_create(2);
    if (!be) return 1;
    run_case(be, &rng, 1, 1, 1, 1, true, SDT_F32);
    run_case(be, &rng, 2, 7, 13, 5, true, SDT_F32);
    run_case(be, &rng, 1, 3, 17, 11, false, SDT_F32);
    run_case(be, &rng, 3, 5, 9, 7, true, SDT_F16);
    run_case(be, &rng, 2, 4, 9, 6, true, SDT_BF16);
    check_rejects(be);
    be->destroy(be);
    return sdt_test_finish("test_linear");
}
