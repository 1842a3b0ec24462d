/* op_check.h - the comparison steps the op tests share (header only).
 *
 * Each op test writes its float64 reference forward and analytic backward; this
 * header supplies the rest: random buffers, float64 copies, and the two-stage
 * gradient check (f32 backward vs float64 analytic, float64 analytic vs central
 * finite differences of the float64 reference) with the tolerances.
 * Gradients are pre-filled with random values before backward runs, so the
 * check also proves backward accumulates (+=) instead of overwriting.
 */
#ifndef SDT_OP_CHECK_H
#define SDT_OP_CHECK_H

#include <string.h>

#include "fd_check.h"
#include "ops.h"
#include "sdt_test.h"

#define OP_FWD_TOL 1e-5  /* f32 forward vs float64 reference */
#define OP_BWD_TOL 1e-4  /* f32 backward vs float64 analytic gradient */
#define OP_FD_TOL 1e-6   /* float64 analytic gradient vs finite differences */

static inline float *op_rand(sdt_test_rng *rng, int64_t n, double scale)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    if (!x) abort(); /* a test, not library code: out of memory ends it */
    sdt_test_fill_normal(rng, x, n, scale);
    return x;
}

static inline double *op_to_double(const float *x, int64_t n)
{
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) abort();
    sdt_fd_to_double(x, d, n);
    return d;
}

static inline double *op_zeros_d(int64_t n)
{
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    if (!d) abort();
    return d;
}

static inline float *op_copy(const float *x, int64_t n)
{
    float *c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);
    if (!c) abort();
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

static inline sdt_tensor op_tensor(void *data, int ndim, const int64_t *shape)
{
    return sdt_tensor_make(data, SDT_F32, SDT_DEVICE_CPU, ndim, shape);
}

/* Forward: f32 output vs float64 reference. */
static inline void op_check_forward(const char *what, const float *got, const double *ref, int64_t n)
{
    double err = sdt_rel_err_fd(got, ref, n);
    CHECK(err < OP_FWD_TOL, "%s forward: relative error %.3g >= %g", what, err, OP_FWD_TOL);
}

/* One gradient: (after - before) is what backward accumulated; it must match the
 * float64 analytic gradient, and that must match finite differences of `loss`
 * taken over `param` (the float64 input the gradient belongs to). */
static inline void op_check_grad(const char *what, const float *after, const float *before, const double *analytic,
                                 int64_t n, sdt_fd_loss_fn loss, void *ctx, double *param)
{
    float *added = malloc((size_t)(n > 0 ? n : 1) * sizeof *added);
    if (!added) abort();
    for (int64_t i = 0; i < n; i++) added[i] = after[i] - before[i];
    double err = sdt_rel_err_fd(added, analytic, n);
    CHECK(err < OP_BWD_TOL, "%s: f32 backward vs float64 analytic relative error %.3g >= %g", what, err, OP_BWD_TOL);
    free(added);
    double fd = sdt_fd_check(loss, ctx, param, n, analytic);
    CHECK(fd < OP_FD_TOL, "%s: float64 analytic vs finite differences relative error %.3g >= %g", what, fd,
          OP_FD_TOL);
}

/* A call that must fail with a sentence naming the op. */
static inline void op_check_rejects(sdt_backend *be, int rc, const char *op, const char *why)
{
    CHECK(rc != 0, "%s accepted %s", op, why);
    CHECK(rc == 0 || strstr(be->error, op) != NULL, "%s error for %s does not name the op: '%s'", op, why,
          be->error);
    if (rc != 0) printf("  rejected %s: %s\n", why, be->error);
    fflush(stdout);
}

#endif
