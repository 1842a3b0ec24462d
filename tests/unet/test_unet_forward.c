/* Forward: finite, deterministic, batch rows independent, inference mode and
 * checkpointing give the same output, measure mode predicts the arena exactly;
 * SD 1-style, SD 2-style and SDXL's tiny configs. */
#include <string.h>

#include "unet_test_util.h"

static int64_t out_numel(const sdt_unet_config *c, const ut_inputs *in)
{
    return in->B * c->out_channels * in->H * in->W;
}

static bool all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void check_config(const sdt_unet_config *cfg, const char *label, sdt_test_rng *rng, sdt_backend *be,
                         const char *dir)
{
    sdt_error error = {0};
    sdt_weights *w = NULL;
    sdt_unet *u = ut_load_random_unet(cfg, rng, dir, label, &w);
    if (!u) return;
    ut_inputs in = ut_make_inputs(cfg, rng, 2, 8, 16, 5);
    int64_t n = out_numel(cfg, &in);
    float *y1 = kt_alloc((size_t)n * 4), *y2 = kt_alloc((size_t)n * 4), *y3 = kt_alloc((size_t)n * 4);
    sdt_unet_options opt = sdt_unet_options_default();
    size_t peak = 0;
    CHECK(ut_run(u, be, &opt, &in, y1, NULL, &peak), "%s forward failed", label);
    CHECK(all_finite(y1, n), "%s: non-finite output", label);
    double mag = 0;
    for (int64_t i = 0; i < n; i++) mag += fabs(y1[i]);
    CHECK(mag / n > 1e-3, "%s: output is (nearly) zero: mean |y| = %g", label, mag / n);
    CHECK(ut_run(u, be, &opt, &in, y2, NULL, NULL), "%s second forward failed", label);
    CHECK(!memcmp(y1, y2, (size_t)n * 4), "%s: forward is not deterministic", label);

    /* Inference mode and checkpointing keep less but compute the same thing. */
    sdt_unet_options inf = opt, ck = opt;
    inf.for_backward = false;
    ck.checkpointing = true;
    size_t peak_inf = 0, peak_ck = 0;
    CHECK(ut_run(u, be, &inf, &in, y2, NULL, &peak_inf), "%s inference forward failed", label);
    CHECK(!memcmp(y1, y2, (size_t)n * 4), "%s: inference forward differs", label);
    CHECK(ut_run(u, be, &ck, &in, y2, NULL, &peak_ck), "%s checkpointed forward failed", label);
    CHECK(!memcmp(y1, y2, (size_t)n * 4), "%s: checkpointed forward differs", label);
    CHECK(peak_ck < peak && peak_inf < peak, "%s: checkpointing/inference do not save memory (%zu, %zu vs %zu)", label,
          peak_ck, peak_inf, peak);

    /* Half-precision activations (weights stay f32): close to f32, and backward runs. */
    for (int d = 0; d < 2; d++) {
        sdt_unet_options half = opt;
        half.act_dtype = d ? SDT_BF16 : SDT_F16;
        float *g = kt_alloc((size_t)sdt_tensor_numel(&in.ctx) * 4);
        int64_t n_y = in.y ? sdt_tensor_numel(&in.yt) : 0;
        float *g_y = n_y ? kt_alloc((size_t)n_y * 4) : NULL;
        in.d_y_out = g_y; /* SDXL: d(y) through label_emb in 16-bit activations too */
        CHECK(ut_run(u, be, &half, &in, y2, g, NULL), "%s %s forward/backward failed", label, d ? "bf16" : "f16");
        in.d_y_out = NULL;
        CHECK(!n_y || all_finite(g_y, n_y), "%s: %s d(y) not finite", label, d ? "bf16" : "f16");
        free(g_y);
        double e = 0, m = 1e-30;
        for (int64_t i = 0; i < n; i++) {
            e = fmax(e, fabs(y2[i] - y1[i]));
            m = fmax(m, fabs(y1[i]));
        }
        CHECK(e / m < (d ? 1e-1 : 2e-2), "%s: %s output differs from f32 by %g (relative to max)", label,
              d ? "bf16" : "f16", e / m);
        CHECK(all_finite(g, sdt_tensor_numel(&in.ctx)), "%s: %s d(context) not finite", label, d ? "bf16" : "f16");
        free(g);
    }

    /* Each batch row depends only on its own inputs: run row 1 alone. */
    ut_inputs one = in;
    one.B = 1;
    int64_t lat1 = cfg->in_channels * in.H * in.W, ctx1 = in.T * cfg->context_dim;
    one.lat = kt_f32(in.latents + lat1, 4, 1, cfg->in_channels, in.H, in.W);
    one.ts = kt_f32(in.timesteps + 1, 1, 1, 0, 0, 0);
    one.ctx = kt_f32(in.context + ctx1, 3, 1, in.T, cfg->context_dim, 0);
    if (in.y) one.yt = kt_f32(in.y + cfg->adm_in_channels, 2, 1, cfg->adm_in_channels, 0, 0);
    CHECK(ut_run(u, be, &opt, &one, y3, NULL, NULL), "%s batch-1 forward failed", label);
    double diff = 0, ref = 1e-30;
    for (int64_t i = 0; i < n / 2; i++) {
        diff = fmax(diff, fabs(y3[i] - y1[n / 2 + i]));
        ref = fmax(ref, fabs(y1[n / 2 + i]));
    }
    CHECK(diff / ref < 1e-5, "%s: batch row 1 alone differs from the batch of 2 (rel %g)", label, diff / ref);

    /* The arena the measuring pass asked for was used exactly. */
    sdt_arena a;
    size_t need = ut_measure(u, be, &opt, &in, false);
    CHECK(need == peak, "%s: measured %zu bytes, the real run peaked at %zu", label, need, peak);
    size_t by_size = 0, with_bwd = 0;
    CHECK(sdt_unet_measure(u, be, &opt, in.B, in.H, in.W, in.T, false, &by_size, &error) && by_size == peak,
          "%s: sdt_unet_measure gave %zu, the real run %zu (%s)", label, by_size, peak, error.message);
    in.d_y_out = in.y; /* with a label_emb sdt_unet_measure plans the backward that also gives d(y); a measuring
                        * run writes nothing, only that d(y) is asked for matters */
    CHECK(sdt_unet_measure(u, be, &opt, in.B, in.H, in.W, in.T, true, &with_bwd, &error) &&
              with_bwd == ut_measure(u, be, &opt, &in, true) && with_bwd > by_size,
          "%s: sdt_unet_measure with backward gave %zu", label, with_bwd);
    in.d_y_out = NULL;
    CHECK(sdt_arena_init(&a, be, need - 1024), "arena init");
    sdt_tensor out;
    bool ok = sdt_unet_forward(u, be, &a, &opt, &in.lat, &in.ts, &in.ctx, ut_y(&in), &out, &error);
    CHECK(!ok && strstr(error.message, "arena"), "%s: a too small arena was not reported: %s", label,
          ok ? "ok" : error.message);
    CHECK(ok || error.code == SDT_ERR_OUT_OF_MEMORY,
          "%s: a too small arena must be OUT_OF_MEMORY (the arena's code), got %s", label,
          sdt_error_code_name(error.code));
    sdt_arena_release(&a);

    /* Bad inputs are errors, not crashes. */
    sdt_arena_init_measure(&a, be);
    sdt_tensor bad = kt_f32(in.latents, 4, 2, cfg->in_channels, 7, 16);
    CHECK(!sdt_unet_forward(u, be, &a, &opt, &bad, &in.ts, &in.ctx, ut_y(&in), &out, &error) &&
              strstr(error.message, "multiple"),
          "%s: latent size not divisible accepted: %s", label, error.message);
    bad = kt_f32(in.context, 3, 2, in.T, cfg->context_dim + 1, 0);
    CHECK(!sdt_unet_forward(u, be, &a, &opt, &in.lat, &in.ts, &bad, ut_y(&in), &out, &error) &&
              strstr(error.message, "context"),
          "%s: wrong context width accepted: %s", label, error.message);
    free(y1);
    free(y2);
    free(y3);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
}

/* A NaN weight: anomaly mode names the first layer whose output is not finite. */
static void check_anomaly(sdt_test_rng *rng, sdt_backend *be, const char *dir)
{
    sdt_error error = {0};
    sdt_unet_config cfg = sdt_unet_config_tiny();
    ut_poison_key = SDT_UNET_KEY_PREFIX "middle_block.1.transformer_blocks.0.ff.net.2.bias";
    sdt_weights *w = ut_random_unet(&cfg, rng, dir, "poisoned", NULL, NULL, NULL, 0);
    ut_poison_key = NULL;
    sdt_unet *u = sdt_unet_load(&cfg, w, &error);
    CHECK(u != NULL, "load: %s", error.message);
    if (!u) return;
    ut_inputs in = ut_make_inputs(&cfg, rng, 1, 8, 8, 3);
    sdt_unet_options opt = sdt_unet_options_default();
    opt.anomaly_check = true;
    sdt_arena a;
    CHECK(sdt_arena_init(&a, be, ut_measure(u, be, &opt, &in, false)), "arena");
    sdt_tensor out;
    CHECK(!sdt_unet_forward(u, be, &a, &opt, &in.lat, &in.ts, &in.ctx, ut_y(&in), &out, &error) &&
              strstr(error.message, "non-finite") && strstr(error.message, "middle_block.1"),
          "anomaly mode did not name middle_block.1: %s", error.message);
    sdt_arena_rewind(&a, 0);
    opt.anomaly_check = false;
    CHECK(sdt_unet_forward(u, be, &a, &opt, &in.lat, &in.ts, &in.ctx, ut_y(&in), &out, &error), "forward: %s",
          error.message);
    int64_t bad = 0;
    be->count_nonfinite(be, &out, &bad);
    CHECK(bad > 0, "a NaN weight did not reach the output");
    sdt_arena_release(&a);
    ut_free_inputs(&in);
    sdt_unet_free(u);
    sdt_weights_close(w);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("unet_forward");
    sdt_backend *be = kt_backend();
    char *dir = ut_tmpdir();
    ut_check_tiny_configs(check_config, &rng, be, dir);
    check_anomaly(&rng, be, dir);
    ut_cleanup(dir);
    be->destroy(be);
    return sdt_test_finish("unet_forward");
}
