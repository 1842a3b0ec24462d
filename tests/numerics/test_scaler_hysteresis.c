/* test_scaler_hysteresis.c - the optional extras: Megatron-style hysteresis and a
 * minimum scale, with the reference's worked sequences (gradscaler.md section 6):
 * init 16, factors 2 / 0.5, interval 2, flags 0 0 0 1 0 0 1 1 1 0 0 0 0. */
#include "numerics_fixture.h"

static sdt_backend *be;

static const int flags[13] = {0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0};

static sdt_scaler *scaler_with(int hysteresis, float min_scale, float init, toy *t, const char *name)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    toy_init(t, be, name, 1, 2, &hp, NULL);
    sdt_scaler_config cfg = sdt_scaler_config_default();
    cfg.init_scale = init;
    cfg.growth_interval = 2;
    cfg.hysteresis = hysteresis;
    cfg.min_scale = min_scale;
    sdt_error error = {0};
    sdt_scaler *sc = sdt_scaler_create(be, &cfg, NULL, NULL, &error);
    CHECK(sc != NULL, "create: %s", error.message);
    sdt_scaler_attach(sc, t->opt, &error);
    return sc;
}

static void run(const char *label, int hysteresis, const float *want)
{
    toy t;
    sdt_scaler *sc = scaler_with(hysteresis, 1.0f, 16.0f, &t, label);
    sdt_error error = {0};
    for (int i = 0; i < 13; i++) {
        float raw = flags[i] ? INFINITY : 1.0f;
        bool stepped = true;
        CHECK(scaled_iteration(sc, &t, 1, &raw, &stepped, NULL, &error) == SDT_CORE_OK, "%s %d: %s", label, i,
              error.message);
        CHECK(stepped == !flags[i], "%s %d: every overflow skips the step, even when hysteresis keeps the scale", label,
              i);
        CHECK(sdt_scaler_get_scale(sc) == want[i], "%s iter %d: scale %g, want %g", label, i,
              (double)sdt_scaler_get_scale(sc), (double)want[i]);
    }
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

static void test_min_scale(void)
{
    /* DeepSpeed's case: init 2, hysteresis 1, min 1: an overflow gives 1 (at the minimum),
     * a second stays at 1 and says so again, so the fallback can switch to fp32. */
    toy t;
    sdt_scaler *sc = scaler_with(1, 1.0f, 2.0f, &t, "minimum");
    sdt_error error = {0};
    float raw = INFINITY;
    sdt_scaler_update_info info;
    CHECK(scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error) == SDT_CORE_OK, "%s", error.message);
    CHECK(sdt_scaler_get_scale(sc) == 1.0f && info.at_min_scale && info.backed_off, "2 -> 1 reaches the minimum");
    CHECK(scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error) == SDT_CORE_OK, "%s", error.message);
    CHECK(sdt_scaler_get_scale(sc) == 1.0f && info.at_min_scale, "stays at the minimum and reports it");
    raw = 1.0f;
    CHECK(scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error) == SDT_CORE_OK && !info.at_min_scale,
          "a clean step is not a collapse");
    sdt_scaler_destroy(sc);
    toy_free(&t);
    /* clamped, not just reached: 3 -> 1.5 -> (0.75 clamped to) 1 */
    sc = scaler_with(1, 1.0f, 3.0f, &t, "clamp");
    raw = INFINITY;
    scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error);
    CHECK(sdt_scaler_get_scale(sc) == 1.5f && !info.at_min_scale, "3 -> 1.5 is above the minimum");
    scaled_iteration(sc, &t, 1, &raw, NULL, &info, &error);
    CHECK(sdt_scaler_get_scale(sc) == 1.0f && info.at_min_scale, "1.5 -> 0.75 clamps to 1: %g",
          (double)sdt_scaler_get_scale(sc));
    sdt_scaler_state st;
    sdt_scaler_get_state(sc, &st);
    CHECK(st.min_scale == 1.0f && st.hysteresis == 1, "the extras are in the saved state");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

int main(void)
{
    be = kt_backend();
    const float torch_seq[13] = {16, 32, 32, 16, 16, 32, 16, 8, 4, 4, 8, 8, 16};
    const float megatron_seq[13] = {16, 32, 32, 32, 32, 64, 64, 32, 16, 16, 32, 32, 64};
    run("hysteresis-1-is-torch", 1, torch_seq);
    run("hysteresis-2-megatron", 2, megatron_seq);
    test_min_scale();
    be->destroy(be);
    return sdt_test_finish("scaler_hysteresis");
}
