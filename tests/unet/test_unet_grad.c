/* d(context) (and on SDXL d(y)) against central finite differences of the forward (f32, so a step of 3e-2, where roundoff and truncation balance, a
 * directional derivative along random directions plus single elements, with
 * tolerances for f32 roundoff), checkpointing giving the identical gradient,
 * and measure mode covering forward + backward exactly. */
#include <string.h>

#include "unet_test_util.h"

/* (L(x + h v) - L(x - h v)) / 2h, perturbing the input x (n floats: the context or y) in place. */
static double fd_along_input(sdt_unet *u, sdt_backend *be, const sdt_unet_options *opt, ut_inputs *in, float *x,
                             int64_t n, const double *v, double h)
{
    float *saved = kt_copy(x, n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(saved[i] + h * v[i]);
    double up = ut_loss(u, be, opt, in);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(saved[i] - h * v[i]);
    double down = ut_loss(u, be, opt, in);
    memcpy(x, saved, (size_t)n * sizeof *saved);
    free(saved);
    return (up - down) / (2 * h);
}

/* g = d(input) (n floats at x: the context or y) against finite differences: 3 directional derivatives
 * along random unit directions, then single elements (the largest gradient and 4 random ones). */
static void check_against_fd(sdt_unet *u, sdt_backend *be, ut_inputs *in, float *x, int64_t n, const float *g,
                             sdt_test_rng *rng, const char *label, const char *what)
{
    sdt_unet_options opt = sdt_unet_options_default();
    double gmax = 0, gnorm = 0;
    for (int64_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(g[i]));
        gnorm += (double)g[i] * g[i];
    }
    gnorm = sqrt(gnorm);
    CHECK(gmax > 0 && isfinite(gmax), "%s: %s is zero or not finite (max %g)", label, what, gmax);
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
        double fd = fd_along_input(u, be, &opt, in, x, n, v, 3e-2);
        double rel = fabs(fd - dot) / gnorm;
        printf("%s: %s direction %d: analytic %.6g, finite difference %.6g, error / |g| %.2e\n", label, what, d, dot,
               fd, rel);
        CHECK(rel < 1e-3, "%s: %s directional derivative %d off: analytic %g vs fd %g", label, what, d, dot, fd);
    }
    int64_t idx[5] = {0};
    for (int64_t i = 0; i < n; i++)
        if (fabs(g[i]) > fabs(g[idx[0]])) idx[0] = i;
    for (int k = 1; k < 5; k++) idx[k] = (int64_t)(sdt_test_uniform(rng) * (double)n);
    for (int k = 0; k < 5; k++) {
        memset(v, 0, (size_t)n * sizeof *v);
        v[idx[k]] = 1;
        double fd = fd_along_input(u, be, &opt, in, x, n, v, 3e-2);
        double rel = fabs(fd - g[idx[k]]) / gmax;
        CHECK(rel < 5e-3, "%s: %s[%lld] = %g but finite differences give %g (rel to max %g)", label, what,
              (long long)idx[k], g[idx[k]], fd, rel);
    }
    free(v);
}

/* SDXL: d(y) through label_emb and every ResBlock's emb_layers against finite differences (3 random
 * directions, the largest element and 4 random ones); asking for it leaves d(context) bit for bit as it
 * was; checkpointing gives the same d(y); measure covers the larger backward. */
static void check_y_gradient(sdt_unet *u, sdt_backend *be, ut_inputs *in, const float *g_ctx, sdt_test_rng *rng,
                             const char *label)
{
    int64_t n = sdt_tensor_numel(&in->yt), nc = sdt_tensor_numel(&in->ctx);
    float *gy = kt_alloc((size_t)n * 4), *gy_ck = kt_alloc((size_t)n * 4), *g_ctx2 = kt_alloc((size_t)nc * 4);
    sdt_unet_options opt = sdt_unet_options_default();
    size_t peak = 0;
    in->d_y_out = gy;
    CHECK(ut_run(u, be, &opt, in, NULL, g_ctx2, &peak), "%s backward with d(y) failed", label);
    CHECK(!memcmp(g_ctx, g_ctx2, (size_t)nc * 4), "%s: asking for d(y) changed d(context)", label);
    CHECK(ut_measure(u, be, &opt, in, true) == peak,
          "%s: measured forward+backward with d(y) differs from the real peak", label);
    in->d_y_out = NULL;
    check_against_fd(u, be, in, in->y, n, gy, rng, label, "d(y)");
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    in->d_y_out = gy_ck;
    CHECK(ut_run(u, be, &ck, in, NULL, g_ctx2, NULL), "%s checkpointed backward with d(y) failed", label);
    in->d_y_out = NULL;
    CHECK(!memcmp(gy, gy_ck, (size_t)n * 4), "%s: checkpointing changed d(y)", label);
    free(gy);
    free(gy_ck);
    free(g_ctx2);
}

/* y is SDXL's alone: missing for SDXL, given to SD 1/2, or d(y) without a y, each named. */
static void check_y_errors(sdt_backend *be, const char *dir, sdt_test_rng *rng)
{
    sdt_error error = {0};
    sdt_unet_config xl = sdt_unet_config_tiny_sdxl(), sd = sdt_unet_config_tiny();
    sdt_weights *w = ut_random_unet(&xl, rng, dir, "y-errors", NULL, NULL, NULL, 0);
    sdt_unet *u = sdt_unet_load(&xl, w, &error);
    CHECK(u != NULL, "load: %s", error.message);
    if (!u) return;
    ut_inputs in = ut_make_inputs(&xl, rng, 1, 8, 8, 3);
    sdt_arena m;
    sdt_arena_init_measure(&m, be);
    sdt_unet_options opt = sdt_unet_options_default();
    sdt_tensor out;
    CHECK(!sdt_unet_forward(u, be, &m, &opt, &in.lat, &in.ts, &in.ctx, NULL, &out, &error) &&
              strstr(error.message, "needs y") && error.code == SDT_ERR_INVALID_ARGUMENT,
          "SDXL forward without y accepted: %s", error.message);
    sdt_tensor short_y = kt_f32(in.y, 2, 1, xl.adm_in_channels - 1, 0, 0);
    CHECK(!sdt_unet_forward(u, be, &m, &opt, &in.lat, &in.ts, &in.ctx, &short_y, &out, &error) &&
              strstr(error.message, "y must be"),
          "a y of the wrong width accepted: %s", error.message);
    sdt_unet_free(u);
    sdt_weights_close(w);
    w = ut_random_unet(&sd, rng, dir, "y-errors-sd", NULL, NULL, NULL, 0);
    u = sdt_unet_load(&sd, w, &error);
    ut_inputs sin = ut_make_inputs(&sd, rng, 1, 8, 8, 3);
    sdt_tensor y = kt_f32(in.y, 2, 1, xl.adm_in_channels, 0, 0);
    CHECK(u && !sdt_unet_forward(u, be, &m, &opt, &sin.lat, &sin.ts, &sin.ctx, &y, &out, &error) &&
              strstr(error.message, "no label_emb"),
          "SD forward with a y accepted: %s", error.message);
    CHECK(u && sdt_unet_forward(u, be, &m, &opt, &sin.lat, &sin.ts, &sin.ctx, NULL, &out, &error), "forward: %s",
          error.message);
    CHECK(u && !sdt_unet_backward(u, be, &m, &out, &sin.ctx, &y, &error) && strstr(error.message, "d_y = NULL"),
          "SD backward with a d_y accepted: %s", error.message);
    ut_free_inputs(&sin);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
}

static void check_config(const sdt_unet_config *cfg, const char *label, sdt_test_rng *rng, sdt_backend *be,
                         const char *dir)
{
    sdt_error error = {0};
    sdt_weights *w = NULL;
    sdt_unet *u = ut_load_random_unet(cfg, rng, dir, label, &w);
    if (!u) return;
    ut_inputs in = ut_make_inputs(cfg, rng, 2, 8, 8, 4);
    int64_t n = sdt_tensor_numel(&in.ctx);
    float *g = kt_alloc((size_t)n * 4), *g_ck = kt_alloc((size_t)n * 4);
    sdt_unet_options opt = sdt_unet_options_default();
    size_t peak = 0;
    CHECK(ut_run(u, be, &opt, &in, NULL, g, &peak), "%s backward failed", label);
    CHECK(ut_measure(u, be, &opt, &in, true) == peak, "%s: measured forward+backward differs from the real peak",
          label);
    check_against_fd(u, be, &in, in.context, n, g, rng, label, "d(context)");

    /* Checkpointing recomputes the same numbers. */
    sdt_unet_options ck = opt;
    ck.checkpointing = true;
    size_t peak_ck = 0;
    CHECK(ut_run(u, be, &ck, &in, NULL, g_ck, &peak_ck), "%s checkpointed backward failed", label);
    CHECK(!memcmp(g, g_ck, (size_t)n * 4), "%s: checkpointing changed d(context)", label);
    CHECK(peak_ck < peak, "%s: checkpointing did not reduce the peak (%zu vs %zu)", label, peak_ck, peak);
    if (cfg->adm_in_channels > 0) check_y_gradient(u, be, &in, g, rng, label);
    printf("%s: arena peak %zu bytes, %zu with checkpointing\n", label, peak, peak_ck);

    /* Backward on a rewound arena, or without a forward that saved, is an error. */
    sdt_arena real;
    CHECK(sdt_arena_init(&real, be, peak), "arena");
    sdt_tensor y;
    CHECK(sdt_unet_forward(u, be, &real, &opt, &in.lat, &in.ts, &in.ctx, ut_y(&in), &y, &error), "forward: %s",
          error.message);
    sdt_arena_rewind(&real, 0);
    CHECK(!sdt_unet_backward(u, be, &real, &y, &in.ctx, NULL, &error) && strstr(error.message, "rewound"),
          "backward on a rewound arena accepted: %s", error.message);
    sdt_arena_release(&real);
    sdt_arena m;
    sdt_arena_init_measure(&m, be);
    sdt_unet_options inf = opt;
    inf.for_backward = false;
    sdt_tensor out;
    CHECK(sdt_unet_forward(u, be, &m, &inf, &in.lat, &in.ts, &in.ctx, ut_y(&in), &out, &error), "inference forward");
    CHECK(!sdt_unet_backward(u, be, &m, &out, &in.ctx, NULL, &error) && strstr(error.message, "for_backward"),
          "backward after an inference forward accepted: %s", error.message);
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
    ut_check_tiny_configs(check_config, &rng, be, dir);
    check_y_errors(be, dir, &rng);
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_grad");
}
