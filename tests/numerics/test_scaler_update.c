/* test_scaler_update.c - the GradScaler update rule with the reference's numbers
 * (gradscaler.md 3.1 behaviours 1-8 and 10), driven through the full
 * scale -> backward -> step -> update path of one optimizer. */
#include <float.h>

#include "numerics_fixture.h"

static sdt_backend *be;

/* Runs flags[i] (0 clean, 1 inf, 2 NaN) and checks the scale and tracker after each update. */
static void check_sequence(const char *label, float init, double gf, double bf, int64_t gi, const int *flags,
                           const float *want_scale, const int64_t *want_tracker, int n)
{
    toy t;
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(&t, be, "seq", 1, 3, &hp, NULL);
    sdt_scaler *sc = make_scaler(be, init, gf, bf, gi, false, NULL, NULL);
    sdt_error error = {0};
    CHECK(sdt_scaler_attach(sc, t.opt, &error) == SDT_CORE_OK, "%s: attach: %s", label, error.message);
    for (int i = 0; i < n; i++) {
        float raw = flags[i] == 0 ? 1.0f : (flags[i] == 1 ? INFINITY : NAN);
        sdt_scaler_update_info info;
        sdt_core_status st = scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error);
        CHECK(st == SDT_CORE_OK, "%s iter %d: %s", label, i, error.message);
        CHECK(sdt_scaler_get_scale(sc) == want_scale[i], "%s iter %d: scale %.9g, want %.9g", label, i,
              (double)sdt_scaler_get_scale(sc), (double)want_scale[i]);
        if (want_tracker)
            CHECK(sdt_scaler_growth_tracker(sc) == want_tracker[i], "%s iter %d: tracker %lld, want %lld", label, i,
                  (long long)sdt_scaler_growth_tracker(sc), (long long)want_tracker[i]);
        CHECK(info.found_inf == (flags[i] != 0), "%s iter %d: found_inf %d", label, i, info.found_inf);
    }
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 1: defaults and the state before any scale_loss. */
static void test_defaults(void)
{
    sdt_scaler_config cfg = sdt_scaler_config_default();
    CHECK(cfg.enabled && cfg.init_scale == 65536.0f && cfg.growth_factor == 2.0 && cfg.backoff_factor == 0.5 &&
              cfg.growth_interval == 2000 && cfg.hysteresis == 1 && cfg.min_scale == 0.0f && !cfg.shared,
          "defaults differ from torch.amp.GradScaler()");
    sdt_error error = {0};
    sdt_scaler *sc = sdt_scaler_create(be, &cfg, NULL, NULL, &error);
    CHECK(sc && sdt_scaler_get_scale(sc) == 65536.0f, "get_scale before scale() must be 65536");
    sdt_scaler_state st;
    sdt_scaler_get_state(sc, &st);
    CHECK(st.enabled && st.scale == 65536.0f && st.growth_factor == 2.0 && st.backoff_factor == 0.5 &&
              st.growth_interval == 2000 && st.growth_tracker == 0,
          "state_dict before scale() differs from {65536, 2, 0.5, 2000, 0}");
    sdt_scaler_destroy(sc);
}

/* 4 (scaled): a scaled loss is f32(loss) * scale. */
static void test_scale_loss(void)
{
    sdt_scaler *sc = make_scaler(be, 2.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    double out = 0;
    sdt_error error = {0};
    CHECK(sdt_scaler_scale_loss(sc, 4.0, 1, &out, &error) == SDT_CORE_OK && out == 8.0,
          "init 2 x 4.0 must give 8.0, got %g", out);
    CHECK(sdt_scaler_scale_loss(sc, 0.1, 1, &out, &error) == SDT_CORE_OK && out == (double)(0.1f * 2.0f),
          "scaled loss must be computed in fp32");
    sdt_scaler_destroy(sc);
}

/* 10: inv_scale = f32(1 / f64(S)): S = 3 turns a grad of 1.0 into 0.3333333432674408. */
static void test_reciprocal_precision(void)
{
    toy t;
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(&t, be, "recip", 1, 2, &hp, NULL);
    sdt_scaler *sc = make_scaler(be, 3.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_error error = {0};
    toy_begin_scaled(sc, &t);
    t.grad[0][0] = 1.0f;
    t.grad[0][1] = 3.0f;
    sdt_optimizer_note_backward(t.opt, sdt_scaler_get_scale(sc));
    CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
    CHECK((double)t.grad[0][0] == 0.3333333432674408, "1 * inv(3) = %.17g, want 0.3333333432674408",
          (double)t.grad[0][0]);
    CHECK(t.grad[0][1] == 3.0f * (float)(1.0 / 3.0), "3 * inv(3) must be the fp32 product");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 9: the unscale kernel through the scaler: values, inf, -inf, NaN. */
static void test_unscale_values(void)
{
    const float cases[4][3] = {{4, 8, -2}, {4, INFINITY, -2}, {4, -INFINITY, -2}, {NAN, 1, 1}};
    const bool want_found[4] = {false, true, true, true};
    for (int c = 0; c < 4; c++) {
        toy t;
        sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
        toy_init(&t, be, "kernel", 1, 3, &hp, NULL);
        sdt_scaler *sc = make_scaler(be, 4.0f, 2.0, 0.5, 2000, false, NULL, NULL);
        sdt_error error = {0};
        toy_begin_scaled(sc, &t);
        memcpy(t.grad[0], cases[c], sizeof cases[c]);
        sdt_optimizer_note_backward(t.opt, sdt_scaler_get_scale(sc));
        CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
        CHECK(sdt_scaler_found_inf(sc, t.opt) == want_found[c], "case %d: found_inf %d", c,
              sdt_scaler_found_inf(sc, t.opt));
        for (int j = 0; j < 3; j++) {
            float want = cases[c][j] * 0.25f;
            CHECK((isnan(want) && isnan(t.grad[0][j])) || t.grad[0][j] == want, "case %d elem %d: %g, want %g", c, j,
                  (double)t.grad[0][j], (double)want);
        }
        sdt_scaler_destroy(sc);
        toy_free(&t);
    }
}

int main(void)
{
    be = kt_backend();
    test_defaults();
    test_scale_loss();
    test_reciprocal_precision();
    test_unscale_values();
    { /* 2: S 4, gf 2, bf 0.25, gi 2: clean (4, 1), clean (8, 0), inf (2, 0). */
        int f[] = {0, 0, 1};
        float s[] = {4, 8, 2};
        int64_t tr[] = {1, 0, 0};
        check_sequence("update-short", 4.0f, 2.0, 0.25, 2, f, s, tr, 3);
    }
    { /* 3: the long sequence. */
        int f[] = {0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0};
        float s[] = {65536, 65536, 131072, 131072, 65536, 65536, 65536, 32768, 16384, 16384, 16384, 32768};
        int64_t tr[] = {1, 2, 0, 1, 0, 1, 2, 0, 0, 1, 2, 0};
        check_sequence("update-long", 65536.0f, 2.0, 0.5, 3, f, s, tr, 12);
    }
    { /* 4: non-power-of-two factors, fp32 results. */
        int f[] = {1, 0, 1};
        float s[] = {300.0f, 900.0f, 270.0f};
        int64_t tr[] = {0, 0, 0};
        check_sequence("non-pow2", 1000.0f, 3.0, 0.3, 1, f, s, tr, 3);
    }
    { /* 5: no growth past FLT_MAX; tracker resets although growth was suppressed. */
        float big = ldexpf(1.0f, 127);
        int f[] = {0, 0, 1, 0, 0};
        float s[] = {big, big, ldexpf(1.0f, 126), big, big};
        int64_t tr[] = {0, 0, 0, 0, 0};
        check_sequence("growth-cap", big, 2.0, 0.5, 1, f, s, tr, 5);
        int f2[] = {0, 0};
        float s2[] = {1e38f, 1e38f};
        check_sequence("growth-cap-1e38", 1e38f, 16.0, 0.5, 1, f2, s2, tr, 2);
    }
    { /* 6: NaN grads count as overflow like inf: S 8 -> 4 -> 2. */
        int f[] = {2, 1, 0, 0};
        float s[] = {4, 2, 2, 4};
        int64_t tr[] = {0, 0, 1, 0};
        check_sequence("nan-is-overflow", 8.0f, 2.0, 0.5, 2, f, s, tr, 4);
    }
    { /* 6: found_inf summed over two optimizers (2.0) still gives ONE backoff. */
        toy a, b;
        sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
        toy_init(&a, be, "a", 1, 2, &hp, NULL);
        toy_init(&b, be, "b", 1, 2, &hp, NULL);
        toy both[2] = {a, b};
        sdt_scaler *sc = make_scaler(be, 8.0f, 2.0, 0.5, 2000, true, NULL, NULL);
        sdt_error error = {0};
        sdt_scaler_attach(sc, both[0].opt, &error);
        sdt_scaler_attach(sc, both[1].opt, &error);
        float raw[2] = {INFINITY, NAN};
        CHECK(scaled_iteration(sc, both, 2, raw, NULL, NULL, &error) == SDT_CORE_OK, "two-inf: %s", error.message);
        CHECK(sdt_scaler_get_scale(sc) == 4.0f, "two overflowing optimizers: scale %g, want 4 (one backoff)",
              (double)sdt_scaler_get_scale(sc));
        sdt_scaler_destroy(sc);
        toy_free(&both[0]);
        toy_free(&both[1]);
    }
    { /* 8 (improved): torch lets the scale underflow to 0 and stay there; here the backoff
       * that would leave an unusable scale is an error and the scale stays put. */
        toy t;
        sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
        toy_init(&t, be, "tiny", 1, 1, &hp, NULL);
        float start = ldexpf(1.0f, -126);
        sdt_scaler *sc = make_scaler(be, start, 2.0, 0.5, 2000, false, NULL, NULL);
        sdt_error error = {0};
        sdt_scaler_attach(sc, t.opt, &error);
        float raw = INFINITY;
        CHECK(scaled_iteration(sc, &t, 1, &raw, NULL, NULL, &error) == SDT_CORE_OK, "2^-126 -> 2^-127 is usable: %s",
              error.message);
        CHECK(sdt_scaler_get_scale(sc) == ldexpf(1.0f, -127), "scale %g", (double)sdt_scaler_get_scale(sc));
        sdt_core_status st = scaled_iteration(sc, &t, 1, &raw, NULL, NULL, &error);
        CHECK(st == SDT_CORE_SCALE_UNDERFLOW,
              "2^-128 (1/scale overflows fp32) must be SDT_CORE_SCALE_UNDERFLOW, got %s", sdt_core_status_name(st));
        CHECK(strstr(error.message, "'tiny'") && strstr(error.message, "min_scale"),
              "underflow sentence must name the optimizer and the fix: %s", error.message);
        CHECK(sdt_scaler_get_scale(sc) == ldexpf(1.0f, -127), "scale must be unchanged after the underflow error");
        CHECK(sdt_scaler_stage_of(sc, t.opt) == SDT_SCALER_READY, "records must be cleared after update");
        sdt_scaler_destroy(sc);
        toy_free(&t);
    }
    sdt_backend *b = be;
    b->destroy(b);
    return sdt_test_finish("scaler_update");
}
