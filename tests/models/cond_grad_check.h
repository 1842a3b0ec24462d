/* cond_grad_check.h - the gradient check the text-conditioned transformer tests share (header only:
 * test_mmdit, test_flux): a loss L(context, pooled) = sum(dout * out) of the model's forward and its gradients
 * to the context [nc values] and the pooled vector [np], checked against central differences of the forward,
 * along a random direction over each and per element for the context. */
#ifndef SDT_TEST_MODELS_COND_GRAD_CHECK_H
#define SDT_TEST_MODELS_COND_GRAD_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_test_util.h"

/* The loss at ctx and pooled (c: the test's model and fixed inputs); with dctx and dpooled, its gradients too. */
typedef double (*cond_grad_loss)(const void *c, const float *ctx, const float *pooled, float *dctx, float *dpooled);

/* (L(x + h u) - L(x - h u)) / 2h against g . u for a random u over x (which is ctx or pooled). */
static inline void cond_grad_directional(cond_grad_loss loss, const void *c, sdt_test_rng *rng, float *ctx,
                                         float *pooled, float *x, const float *g, int n, const char *what)
{
    const double h = 1e-2;
    float *u = mt_alloc(sizeof(float) * n), *x0 = mt_alloc(sizeof(float) * n);
    sdt_test_fill_normal(rng, u, n, 1.0);
    memcpy(x0, x, sizeof(float) * n);
    double an = 0, un = 0;
    for (int i = 0; i < n; i++) an += (double)g[i] * u[i], un += fabs((double)g[i] * u[i]);
    for (int i = 0; i < n; i++) x[i] = x0[i] + (float)h * u[i];
    double lp = loss(c, ctx, pooled, NULL, NULL);
    for (int i = 0; i < n; i++) x[i] = x0[i] - (float)h * u[i];
    double lm = loss(c, ctx, pooled, NULL, NULL);
    memcpy(x, x0, sizeof(float) * n);
    double fd = (lp - lm) / (2 * h), rel = fabs(fd - an) / fmax(un, 1e-12);
    printf("%s: directional analytic %.6g fd %.6g (rel %.3g)\n", what, an, fd, rel);
    CHECK(rel < 2e-3, "%s: directional derivative %.6g differs from central differences %.6g", what, an, fd);
    free(u), free(x0);
}

/* Random ctx [nc] and pooled [np]: both gradients nonzero, both along a random direction, every context element. */
static inline void cond_grad_check(cond_grad_loss loss, const void *c, sdt_test_rng *rng, int nc, int np)
{
    float *ctx = mt_alloc(sizeof(float) * nc), *pooled = mt_alloc(sizeof(float) * np);
    float *dctx = mt_alloc(sizeof(float) * nc), *dpooled = mt_alloc(sizeof(float) * np);
    sdt_test_fill_normal(rng, ctx, nc, 1.0);
    sdt_test_fill_normal(rng, pooled, np, 1.0);
    loss(c, ctx, pooled, dctx, dpooled);
    double gmax = 0, pmax = 0;
    for (int i = 0; i < nc; i++) gmax = fmax(gmax, fabs(dctx[i]));
    for (int i = 0; i < np; i++) pmax = fmax(pmax, fabs(dpooled[i]));
    CHECK(gmax > 0 && pmax > 0, "a gradient is all zero (context %g, pooled %g)", gmax, pmax);
    cond_grad_directional(loss, c, rng, ctx, pooled, ctx, dctx, nc, "context");
    cond_grad_directional(loss, c, rng, ctx, pooled, pooled, dpooled, np, "pooled");
    /* every context element */
    const double h = 1e-2;
    int bad = 0;
    for (int i = 0; i < nc; i++) {
        float keep = ctx[i];
        ctx[i] = keep + (float)h;
        double a = loss(c, ctx, pooled, NULL, NULL);
        ctx[i] = keep - (float)h;
        double b = loss(c, ctx, pooled, NULL, NULL);
        ctx[i] = keep;
        double e = (a - b) / (2 * h);
        if (fabs(e - dctx[i]) > 5e-3 * gmax + 1e-5 && bad++ < 5)
            printf("context element %d analytic %.6g fd %.6g\n", i, dctx[i], e);
    }
    CHECK(bad == 0, "%d of %d context-gradient elements differ from central differences", bad, nc);
    free(ctx), free(pooled), free(dctx), free(dpooled);
}

#endif
