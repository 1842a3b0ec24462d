/* row_gradient_check.h - the text-encoder tests' check of a token-row gradient: for each table alone (a wrong
 * table cannot hide behind the others), d(loss)/d(rows) along a random direction by central differences
 * (h = 1e-3) against the analytic gradient, within 1e-2 of the summed magnitudes (header only). */
#ifndef SDT_ROW_GRADIENT_CHECK_H
#define SDT_ROW_GRADIENT_CHECK_H

#include "sdt_error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model_test_util.h"
#include "sdt_test.h"

/* The loss with table `table`'s rows replaced by `rows` (the others as they are); false with the sentence in
 * *error when the forward fails. */
typedef bool (*rg_loss_fn)(void *ctx, int table, const float *rows, double *loss, sdt_error *error);

/* Table e has n[e] values base[e], analytic gradient grad[e], and is called names[e]. */
static inline void rg_check_tables(sdt_test_rng *rng, int tables, const int *n, const float *const *base,
                                   const float *const *grad, const char *const *names, rg_loss_fn loss, void *ctx)
{
    sdt_error error = {0};
    for (int e = 0; e < tables; e++) {
        float *dir = mt_alloc((size_t)n[e] * sizeof(float)), *moved = mt_alloc((size_t)n[e] * sizeof(float));
        sdt_test_fill_normal(rng, dir, n[e], 1.0);
        double analytic = 0, scale = 0;
        for (int i = 0; i < n[e]; i++)
            analytic += (double)grad[e][i] * dir[i], scale += fabs((double)grad[e][i] * dir[i]);
        const double h = 1e-3;
        double l[2] = {0, 0};
        bool ok = true;
        for (int s = 0; s < 2 && ok; s++) {
            for (int i = 0; i < n[e]; i++) moved[i] = (float)(base[e][i] + (s ? -h : h) * dir[i]);
            ok = loss(ctx, e, moved, &l[s], &error);
            CHECK(ok, "%s: forward for finite differences: %s", names[e], error.message);
        }
        double fd = (l[0] - l[1]) / (2 * h), rel = fabs(fd - analytic) / fmax(scale, 1e-12);
        printf("%s: analytic %.6g, central differences %.6g (rel %.3g)\n", names[e], analytic, fd, rel);
        CHECK(scale > 0, "%s: the row gradient is zero", names[e]);
        CHECK(rel <= 1e-2, "%s: the row gradient disagrees with finite differences: %.6g vs %.6g", names[e], analytic,
              fd);
        free(dir), free(moved);
    }
}

#endif
