/* d(context) against central finite differences of the forward (f32, so a step of 3e-2, where roundoff and truncation balance, a
 * directional derivative along random directions plus single elements, with
 * tolerances for f32 roundoff), checkpointing giving the identical gradient,
 * and measure mode covering forward + backward exactly. */
#include <string.h>

#include "unet_test_util.h"

/* (L(c + h v) - L(c - h v)) / 2h, perturbing the context in place. */
static double fd_along(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, const double *v,
                       double h)
{
    int64_t n = sdt_tensor_numel(&in->ctx);
    float *saved = kt_copy(in->context, n);
    for (int64_t i = 0; i < n; i++) in->context[i] = (float)(saved[i] + h * v[i]);
    double up = ut_loss(u, be, opt, in);
    for (int64_t i = 0; i < n; i++) in->context[i] = (float)(saved[i] - h * v[i]);
    double down = ut_loss(u, be, opt, in);
    memcpy(in->context, saved, (size_t)n * sizeof *saved);
    free(saved);
    return (up - down) / (2 * h);
}

static void check_config(const sdt_unet_config *cfg, const char *label, sdt_test_rng *rng, sdt_backend *be,
                         const char *dir)
{
    sdt_error error = {0};
    sdt_weights *w = ut_random_unet(cfg, rng, dir, label, NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(cfg, w, &error);
    CHECK(u != NULL, "%s load: %s", label, error.message);
    if (!u) return;
    ut_inputs in = ut_make_inputs(cfg, rng, 2, 8, 8, 4);
    int64_t n = sdt_tensor_numel(&in.ctx);
    float *g = kt_alloc((size_t)n * 4), *g_ck = kt_alloc((size_t)n * 4);
    sdt_unet_options opt = sdt_unet_options_default();
    size_t peak = 0;
    CHECK(ut_run(u, be, &opt, &in, NULL, g, &peak), "%s backward failed", label);
    double gmax = 0;
    for (int64_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[i]));
    CHECK(gmax > 0 && isfinite(gmax), "%s: d(context) is zero or not finite (max %g)", label, gmax);
    CHECK(ut_measure(u, be, &opt, &in, true) == peak, "%s: measured forward+backward differs from the real peak",
          label);

    /* Directional derivatives along 3 random unit directions. */
    double *v = kt_alloc((size_t)n * sizeof *v);
    for (int d = 0; d < 3; d++) {
        double norm = 0, dot = 0;
        for (int64_t i = 0; i < n; i++) {
            v[i] = sdt_test_normal(rng);
            norm += v[i] * v[i];
        }
        norm = sqrt(norm);
        for (int64_t i = 0; i < n; i++) {
            v[i] /= norm;
            dot += v[i] * g[i];
        }
        double fd = fd_along(u, be, &opt, &in, v, 3e-2);
        double gnorm = 0;
        for (int64_t i = 0; i < n; i++) gnorm += (double)g[i] * g[i];
        double rel = fabs(fd - dot) / sqrt(gnorm);
        printf("%s: direction %d: analytic %.6g, finite difference %.6g, error / |g| %.2e\n", label, d, dot, fd, rel);
        CHECK(rel < 1e-3, "%s: directional derivative %d off: analytic %g vs fd %g", label, d, dot, fd);
    }
    /* A handful of single elements, including the largest gradient. */
    int64_t idx[5];
    idx[0] = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(g[i]) > fabs(g[idx[0]])) idx[0] = i;
    for (int k = 1; k < 5; k++) idx[k] = (int64_t)(sdt_test_uniform(rng) * (double)n);
    for (int k = 0; k < 5; k++) {
        memset(v, 0, (size_t)n * sizeof *v);
        v[idx[k]] = 1;
        double fd = fd_along(u, be, &opt, &in, v, 3e-2);
        double rel = fabs(fd - g[idx[k]]) / gmax;
        CHECK(rel < 5e-3, "%s: d(context)[%lld] = %g but finite differences give %g (rel to max %g)", label,
              (long long)idx[k], g[idx[k]], fd, rel);
    }

    /* Checkpointing recomputes the same numbers. */
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    size_t peak_ck = 0;
    CHECK(ut_run(u, be, &ck, &in, NULL, g_ck, &peak_ck), "%s checkpointed backward failed", label);
    CHECK(!memcmp(g, g_ck, (size_t)n * 4), "%s: checkpointing changed d(context)", label);
    CHECK(peak_ck < peak, "%s: checkpointing did not reduce the peak (%zu vs %zu)", label, peak_ck, peak);
    printf("%s: arena peak %zu bytes, %zu with checkpointing\n", label, peak, peak_ck);

    /* Backward on a rewound arena, or without a forward that saved, is an error. */
    sdt_arena real;
    CHECK(sdt_arena_init(&real, be, peak), "arena");
    sdt_tensor y;
    CHECK(sdt_unet_forward(u, be, &real, &opt, &in.lat, &in.ts, &in.ctx, NULL, &y, &error), "forward: %s", error.message);
    sdt_arena_rewind(&real, 0);
    CHECK(!sdt_unet_backward(u, be, &real, &y, &in.ctx, NULL, &error) && strstr(error.message, "rewound"),
          "backward on a rewound arena accepted: %s", error.message);
    sdt_arena_release(&real);
    sdt_arena m;
    sdt_arena_init_measure(&m, be);
    sdt_unet_options inf = opt;
    inf.for_backward = false;
    sdt_tensor out;
    CHECK(sdt_unet_forward(u, be, &m, &inf, &in.lat, &in.ts, &in.ctx, NULL, &out, &error), "inference forward");
    CHECK(!sdt_unet_backward(u, be, &m, &out, &in.ctx, NULL, &error) && strstr(error.message, "for_backward"),
          "backward after an inference forward accepted: %s", error.message);
    free(v);
    free(g);
    free(g_ck);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_grad");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    sdt_unet_config tiny = sdt_unet_config_tiny();
    check_config(&tiny, "tiny", &rng, be, dir);
    sdt_unet_config tiny2 = ut_config_tiny_linear();
    check_config(&tiny2, "tiny-linear", &rng, be, dir);
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_grad");
}
