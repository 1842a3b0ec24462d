/* test_concat_channels - torch.cat([a, b], dim=1) forward (exact) and backward (da, db
 * accumulate their slices of dout, NULL skipped) on odd shapes, with finite differences. */
#include "fd_check.h"
#include "kernel_test.h"

typedef struct cat_ctx {
    int64_t batch, ca, cb, spatial;
    const double *other; /* the input held fixed while the other is perturbed */
    int perturb_b;       /* 0: x is a, 1: x is b */
} cat_ctx;

static void ref_concat_ab(const double *a, const double *b, double *y, const cat_ctx *c)
{
    int64_t na = c->ca * c->spatial, nb = c->cb * c->spatial;
    for (int64_t n = 0; n < c->batch; n++) {
        for (int64_t i = 0; i < na; i++) y[n * (na + nb) + i] = a[n * na + i];
        for (int64_t i = 0; i < nb; i++) y[n * (na + nb) + na + i] = b[n * nb + i];
    }
}

static void ref_concat(const double *x, double *y, void *arg)
{
    const cat_ctx *c = arg;
    ref_concat_ab(c->perturb_b ? c->other : x, c->perturb_b ? x : c->other, y, c);
}

/* da, db = the slices of dy */
static void ref_split(const double *dy, double *da, double *db, const cat_ctx *c)
{
    int64_t na = c->ca * c->spatial, nb = c->cb * c->spatial;
    for (int64_t n = 0; n < c->batch; n++) {
        for (int64_t i = 0; i < na; i++) da[n * na + i] = dy[n * (na + nb) + i];
        for (int64_t i = 0; i < nb; i++) db[n * nb + i] = dy[n * (na + nb) + na + i];
    }
}

static void check_shape(sdt_backend *be, sdt_test_rng *r, int64_t batch, int64_t ca, int64_t cb, int64_t h, int64_t w)
{
    cat_ctx c = {batch, ca, cb, h * w, NULL, 0};
    int64_t na = batch * ca * h * w, nb = batch * cb * h * w, ny = na + nb;
    float *a = kt_randn(r, na, 1.0), *b = kt_randn(r, nb, 1.0), *y = kt_alloc((size_t)ny * sizeof(float));
    float *dy = kt_randn(r, ny, 1.0);
    kt_grad da = kt_grad_make(r, na), db = kt_grad_make(r, nb);
    sdt_tensor ta = kt_f32(a, 4, batch, ca, h, w), tb = kt_f32(b, 4, batch, cb, h, w);
    sdt_tensor ty = kt_f32(y, 4, batch, ca + cb, h, w), tdy = kt_f32(dy, 4, batch, ca + cb, h, w);
    sdt_tensor tda = kt_f32(da.fresh, 4, batch, ca, h, w), tdb = kt_f32(db.fresh, 4, batch, cb, h, w);
    sdt_tensor tda_acc = kt_f32(da.acc, 4, batch, ca, h, w), tdb_acc = kt_f32(db.acc, 4, batch, cb, h, w);
    double *ad = kt_to_double(a, na), *bd = kt_to_double(b, nb), *dyd = kt_to_double(dy, ny);
    double *yref = kt_alloc((size_t)ny * sizeof(double));
    double *daref = kt_alloc((size_t)na * sizeof(double)), *dbref = kt_alloc((size_t)nb * sizeof(double));
    ref_concat_ab(ad, bd, yref, &c);
    ref_split(dyd, daref, dbref, &c);

    CHECK(be->concat_channels_forward(be, &ty, &ta, &tb) == 0, "concat forward failed: %s", be->error.message);
    CHECK(sdt_rel_err_fd(y, yref, ny) == 0, "concat forward [%lld,%lld+%lld,%lld,%lld] is not exact", (long long)batch,
          (long long)ca, (long long)cb, (long long)h, (long long)w);
    CHECK(be->concat_channels_backward(be, &tda, &tdb, &tdy) == 0, "concat backward failed: %s", be->error.message);
    CHECK(sdt_rel_err_fd(da.fresh, daref, na) == 0 && sdt_rel_err_fd(db.fresh, dbref, nb) == 0,
          "concat backward must give dout's slices exactly");
    /* accumulation, one gradient at a time: a NULL gradient is skipped, the other still filled */
    CHECK(be->concat_channels_backward(be, NULL, &tdb_acc, &tdy) == 0 &&
              be->concat_channels_backward(be, &tda_acc, NULL, &tdy) == 0,
          "concat backward with one gradient NULL failed: %s", be->error.message);
    CHECK(kt_grad_accumulated(&da) && kt_grad_accumulated(&db), "concat backward must accumulate into da and db");

    c.other = bd, c.perturb_b = 0;
    double fda = sdt_fd_check_vjp(ref_concat, &c, ad, na, dyd, ny, daref);
    c.other = ad, c.perturb_b = 1;
    double fdb = sdt_fd_check_vjp(ref_concat, &c, bd, nb, dyd, ny, dbref);
    CHECK(fda < 1e-6 && fdb < 1e-6, "concat: float64 gradients vs finite differences %.3g, %.3g", fda, fdb);
    sdt_tensor wrong = kt_f32(y, 4, batch, ca + cb + 1, h, w);
    CHECK(be->concat_channels_forward(be, &wrong, &ta, &tb) != 0, "concat must reject out with the wrong channels");
    free(a), free(b), free(y), free(dy), free(ad), free(bd), free(dyd), free(yref), free(daref), free(dbref);
    kt_grad_free(&da), kt_grad_free(&db);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("concat_channels");
    sdt_backend *be = kt_backend();
    check_shape(be, &r, 1, 1, 1, 1, 1);
    check_shape(be, &r, 2, 3, 5, 7, 1);
    check_shape(be, &r, 3, 7, 2, 5, 3);
    be->destroy(be);
    return sdt_test_finish("concat_channels");
}
