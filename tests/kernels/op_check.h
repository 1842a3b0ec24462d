/* op_check.h - the comparison steps the op tests share (header only).
 *
 * Each op test writes its float64 reference forward and analytic backward; this
 * header (on top of kernel_test.h's backend and buffers) supplies the two-stage
 * gradient check (f32 backward vs float64 analytic, float64 analytic vs central
 * finite differences of the float64 reference) with the tolerances.
 * Backward runs twice (kernel_test.h's kt_grad): into zeros for the comparison,
 * and into random values to prove it accumulates (+=) instead of overwriting.
 */
#ifndef SDT_OP_CHECK_H
#define SDT_OP_CHECK_H

#include <string.h>

#include "fd_check.h"
#include "kernel_test.h"

#define OP_FWD_TOL 1e-5 /* f32 forward vs float64 reference */
#define OP_BWD_TOL 1e-4 /* f32 backward vs float64 analytic gradient */
#define OP_FD_TOL 1e-6  /* float64 analytic gradient vs finite differences */

static inline double *op_zeros_d(int64_t n)
{
    return kt_alloc((size_t)n * sizeof(double));
}

static inline sdt_tensor op_tensor(void *data, int ndim, const int64_t *shape)
{
    return sdt_tensor_make(data, SDT_F32, SDT_DEVICE_CPU, ndim, shape);
}

/* The data for a tensor of `dtype` holding x: x itself for f32, else a new 16-bit
 * buffer; x is rounded to the stored values so the float64 reference sees exactly
 * what the op reads. Release with op_store_free. */
static inline void *op_store_as(float *x, int64_t n, sdt_dtype dtype)
{
    if (dtype == SDT_F32) return x;
    void *buf = kt_alloc((size_t)n * sdt_dtype_size(dtype));
    sdt_store_f32(x, buf, dtype, n);
    sdt_load_f32(buf, dtype, x, n);
    return buf;
}

static inline void op_store_free(void *stored, float *x)
{
    if (stored != x) free(stored);
}

/* Forward: f32 output vs float64 reference. */
static inline void op_check_forward(const char *what, const float *got, const double *ref, int64_t n)
{
    double err = sdt_rel_err_fd(got, ref, n);
    CHECK(err < OP_FWD_TOL, "%s forward: relative error %.3g >= %g", what, err, OP_FWD_TOL);
}

/* The buffer a backward pass writes: pass 0 into zeros (the pure gradient),
 * pass 1 into random values (which must end as base + gradient). */
static inline float *op_grad_buf(kt_grad *g, int pass)
{
    return pass ? g->acc : g->fresh;
}

/* max |acc - (base + fresh)| over the larger of max |base| and max |fresh|.
 * Ops that add several contributions into one element (col2im, repeated token
 * ids, sgemm with beta = 1) round in another order than base + fresh, so this is
 * looser than kt_grad_accumulated's one-rounding test; overwriting gives ~1. */
static inline double op_accumulation_err(const kt_grad *g)
{
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < g->n; i++) {
        const double d = fabs((double)g->acc[i] - ((double)g->base[i] + (double)g->fresh[i]));
        if (d > num || d != d) num = d;
        if (fabs(g->base[i]) > den) den = fabs(g->base[i]);
        if (fabs(g->fresh[i]) > den) den = fabs(g->fresh[i]);
    }
    return num / den;
}

/* One gradient after both passes: the pure f32 gradient must match the float64
 * analytic one, that must match finite differences of `loss` over `param` (the
 * float64 input the gradient belongs to), and pass 1 must have accumulated. */
static inline void op_check_grad(const char *what, const kt_grad *g, const double *analytic, sdt_fd_loss_fn loss,
                                 void *ctx, double *param)
{
    double err = sdt_rel_err_fd(g->fresh, analytic, g->n);
    CHECK(err < OP_BWD_TOL, "%s: f32 backward vs float64 analytic relative error %.3g >= %g", what, err, OP_BWD_TOL);
    double fd = sdt_fd_check(loss, ctx, param, g->n, analytic);
    CHECK(fd < OP_FD_TOL, "%s: float64 analytic vs finite differences relative error %.3g >= %g", what, fd, OP_FD_TOL);
    double acc = op_accumulation_err(g);
    CHECK(acc < OP_FWD_TOL,
          "%s: backward into random values is not base + gradient (relative error %.3g): "
          "it must accumulate",
          what, acc);
}

/* One written gradient (kt_grad_make_garbage) after both passes: the f32 gradient written over NaN
 * must match the float64 analytic one, that must match finite differences, and the pass over 1e30
 * must have written the same bits: the op neither reads nor skips an element of its gradient. */
static inline void op_check_written_grad(const char *what, const kt_grad *g, const double *analytic,
                                         sdt_fd_loss_fn loss, void *ctx, double *param)
{
    double err = sdt_rel_err_fd(g->fresh, analytic, g->n);
    CHECK(err < OP_BWD_TOL, "%s: f32 backward (written over NaN) vs float64 analytic relative error %.3g >= %g", what,
          err, OP_BWD_TOL);
    double fd = sdt_fd_check(loss, ctx, param, g->n, analytic);
    CHECK(fd < OP_FD_TOL, "%s: float64 analytic vs finite differences relative error %.3g >= %g", what, fd, OP_FD_TOL);
    CHECK(kt_grad_written(g), "%s: backward over NaN and over 1e30 differ: it must write its gradient, not read it",
          what);
}

/* The statistics a norm's forward saves, checked as "<what> mean" and "<what> rstd". */
static inline void op_check_norm_stats(const char *what, const float *mean, const double *ref_mean, const float *rstd,
                                       const double *ref_rstd, int64_t n)
{
    char name[160];
    snprintf(name, sizeof name, "%s mean", what);
    op_check_forward(name, mean, ref_mean, n);
    snprintf(name, sizeof name, "%s rstd", what);
    op_check_forward(name, rstd, ref_rstd, n);
}

/* A norm's gradients (each as op_check_grad): dx over x, and when affine dgamma and dbeta. */
static inline void op_check_norm_grads(const char *what, bool affine, const kt_grad *dx, const kt_grad *dgamma,
                                       const kt_grad *dbeta, const double *gx, const double *gg, const double *gb,
                                       sdt_fd_loss_fn loss, void *ctx, double *x, double *gamma, double *beta)
{
    char name[160];
    snprintf(name, sizeof name, "%s dx", what);
    op_check_grad(name, dx, gx, loss, ctx, x);
    if (!affine) return;
    snprintf(name, sizeof name, "%s dgamma", what);
    op_check_grad(name, dgamma, gg, loss, ctx, gamma);
    snprintf(name, sizeof name, "%s dbeta", what);
    op_check_grad(name, dbeta, gb, loss, ctx, beta);
}

/* A norm op's test case (groupnorm, layernorm): n elements of x in c channels, `stats` saved statistics.
 * Inputs drawn from the rng in one fixed order (x shifted by x_offset, then stored as xdtype; the outputs
 * and gradients prefilled with random values, so an op that skips an element is caught), float64 references
 * and analytic gradients zeroed for the test's own reference to fill. */
typedef struct op_norm_case {
    float *x, *gamma, *beta, *y, *mean, *rstd, *dout;
    void *x_stored;                          /* x as the op reads it (op_store_as) */
    double *ref, *ref_mean, *ref_rstd;       /* the float64 forward */
    double *x64, *gamma64, *beta64, *dout64; /* float64 copies for the reference (gamma, beta: NULL unless affine) */
    kt_grad dx, dgamma, dbeta;               /* the op's gradients, both passes */
    double *gx, *ggamma, *gbeta;             /* the float64 analytic gradients */
} op_norm_case;

static inline op_norm_case op_norm_case_make(sdt_test_rng *rng, int64_t n, int64_t c, int64_t stats, double x_offset,
                                             sdt_dtype xdtype, bool affine)
{
    op_norm_case k;
    k.x = kt_randn(rng, n, 1.0), k.gamma = kt_randn(rng, c, 1.0), k.beta = kt_randn(rng, c, 1.0);
    if (x_offset != 0)
        for (int64_t i = 0; i < n; i++) k.x[i] += (float)x_offset;
    k.x_stored = op_store_as(k.x, n, xdtype);
    k.y = kt_randn(rng, n, 1.0), k.mean = kt_randn(rng, stats, 1.0), k.rstd = kt_randn(rng, stats, 1.0);
    k.dout = kt_randn(rng, n, 1.0);
    k.x64 = kt_to_double(k.x, n), k.dout64 = kt_to_double(k.dout, n);
    k.gamma64 = affine ? kt_to_double(k.gamma, c) : NULL, k.beta64 = affine ? kt_to_double(k.beta, c) : NULL;
    k.ref = op_zeros_d(n), k.ref_mean = op_zeros_d(stats), k.ref_rstd = op_zeros_d(stats);
    k.dx = kt_grad_make(rng, n), k.dgamma = kt_grad_make(rng, c), k.dbeta = kt_grad_make(rng, c);
    k.gx = op_zeros_d(n), k.ggamma = op_zeros_d(c), k.gbeta = op_zeros_d(c);
    return k;
}

static inline void op_norm_case_free(op_norm_case *k)
{
    op_store_free(k->x_stored, k->x);
    float *floats[7] = {k->x, k->gamma, k->beta, k->y, k->mean, k->rstd, k->dout};
    for (int i = 0; i < 7; i++) free(floats[i]);
    double *doubles[10] = {k->x64,      k->gamma64,  k->beta64, k->dout64, k->ref,
                           k->ref_mean, k->ref_rstd, k->gx,     k->ggamma, k->gbeta};
    for (int i = 0; i < 10; i++) free(doubles[i]);
    kt_grad_free(&k->dx);
    kt_grad_free(&k->dgamma);
    kt_grad_free(&k->dbeta);
}

/* A call that must fail with a sentence naming the op. */
static inline void op_check_rejects(sdt_backend *be, int rc, const char *op, const char *why)
{
    CHECK(rc != 0, "%s accepted %s", op, why);
    CHECK(rc == 0 || strstr(be->error.message, op) != NULL, "%s error for %s does not name the op: '%s'", op, why,
          be->error.message);
    if (rc != 0) printf("  rejected %s: %s\n", why, be->error.message);
    fflush(stdout);
}

#endif
