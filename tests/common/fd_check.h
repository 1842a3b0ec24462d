/* fd_check.h - float64 helpers for checking an op's backward (header only).
 *
 * The pattern every kernel test follows:
 *   1. write the op's float64 reference forward  y = f(x)  and backward  dx = J^T dy;
 *   2. pick a fixed random dy and define the scalar loss L(x) = sum(dy * f(x))
 *      (sdt_fd_dot), so dL/dx is exactly what the backward computes;
 *   3. sdt_fd_check() compares the float64 analytic gradient with central finite
 *      differences of L (should be < 1e-6), and the f32 backward is compared with
 *      the float64 analytic gradient (sdt_rel_err_fd from sdt_test.h, < 1e-4).
 */
#ifndef SDT_FD_CHECK_H
#define SDT_FD_CHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "sdt_test.h"

/* A scalar loss of the (perturbed) parameter vector x; ctx carries everything else. */
typedef double (*sdt_fd_loss_fn)(const double *x, void *ctx);

/* Central-difference step: truncation ~h^2, roundoff ~1e-16/h, both far below 1e-6. */
#define SDT_FD_STEP 1e-5

static inline double sdt_fd_dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static inline void sdt_fd_to_double(const float *src, double *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* grad[i] = (L(x + h e_i) - L(x - h e_i)) / 2h. x is perturbed in place and restored. */
static inline void sdt_fd_gradient(sdt_fd_loss_fn loss, void *ctx, double *x, int64_t n, double h, double *grad)
{
    for (int64_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + h;
        double up = loss(x, ctx);
        x[i] = saved - h;
        double down = loss(x, ctx);
        x[i] = saved;
        grad[i] = (up - down) / (2.0 * h);
    }
}

/* Relative error (max-norm, as sdt_rel_err_dd) of `analytic` against finite differences
 * of `loss` at x. Returns +inf if memory runs out, so the caller's CHECK fails. */
static inline double sdt_fd_check(sdt_fd_loss_fn loss, void *ctx, double *x, int64_t n, const double *analytic)
{
    double *fd = malloc((size_t)(n > 0 ? n : 1) * sizeof *fd);
    if (!fd) return INFINITY;
    sdt_fd_gradient(loss, ctx, x, n, SDT_FD_STEP, fd);
    double err = sdt_rel_err_dd(analytic, fd, n);
    free(fd);
    return err;
}

/* ---- vector-Jacobian products of a forward y = f(x) ----
 * Most ops are checked this way: the loss is L(x) = sum(dy * f(x)) for a fixed dy, whose
 * gradient is J^T dy, exactly what a backward returns. For ops with several inputs, wrap
 * the forward once per input (the others held fixed in ctx) and check each. */
typedef void (*sdt_fd_forward_fn)(const double *x, double *y, void *ctx);

typedef struct sdt_fd_vjp {
    sdt_fd_forward_fn forward;
    void *ctx;
    const double *dy;
    double *y; /* scratch of ny doubles */
    int64_t ny;
} sdt_fd_vjp;

static inline double sdt_fd_vjp_loss(const double *x, void *arg)
{
    sdt_fd_vjp *v = arg;
    v->forward(x, v->y, v->ctx);
    return sdt_fd_dot(v->dy, v->y, v->ny);
}

/* Relative error of analytic_dx (the float64 backward's J^T dy) against finite differences. */
static inline double sdt_fd_check_vjp(sdt_fd_forward_fn forward, void *ctx, double *x, int64_t nx, const double *dy,
                                      int64_t ny, const double *analytic_dx)
{
    sdt_fd_vjp v = {forward, ctx, dy, malloc((size_t)(ny > 0 ? ny : 1) * sizeof(double)), ny};
    if (!v.y) return INFINITY;
    double err = sdt_fd_check(sdt_fd_vjp_loss, &v, x, nx, analytic_dx);
    free(v.y);
    return err;
}

#endif
