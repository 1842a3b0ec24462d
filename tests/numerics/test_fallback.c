/* test_fallback.c - the NaN/Inf fallback state machine: the one-shot fp32 switch,
 * lr backoff, scale collapse, skip counting and the stop after N in a row. */
#include <string.h>

#include "train/fallback.h"
#include "sdt_test.h"

static void expect_sequence(const char *label, sdt_fallback *fb, const double *losses, const sdt_fallback_action *want,
                            int n)
{
    for (int i = 0; i < n; i++) {
        sdt_fallback_action got = sdt_fallback_on_loss(fb, i + 1, losses[i]);
        CHECK(got == want[i], "%s step %d (loss %g): action %d, want %d", label, i + 1, losses[i], got, want[i]);
    }
}

static void test_mixed_precision_run(void)
{
    sdt_fallback_config cfg = sdt_fallback_config_default(true);
    cfg.max_consecutive = 3;
    sdt_fallback fb;
    sdt_error error = {0};
    CHECK(sdt_fallback_init(&fb, &cfg, &error) == SDT_CORE_OK, "%s", error.message);
    CHECK(sdt_fallback_lr_multiplier(&fb) == 1.0 && !fb.fired && fb.fired_at_step == -1, "starts unfired");
    const double L[] = {0.5, 0.4, NAN, 0.3, INFINITY, 0.2, NAN, -INFINITY, NAN, 0.1};
    const sdt_fallback_action A[] = {SDT_FALLBACK_CONTINUE, SDT_FALLBACK_CONTINUE, SDT_FALLBACK_SWITCH_TO_FP32,
                                     SDT_FALLBACK_CONTINUE, SDT_FALLBACK_SKIP,     SDT_FALLBACK_CONTINUE,
                                     SDT_FALLBACK_SKIP,     SDT_FALLBACK_SKIP,     SDT_FALLBACK_STOP,
                                     SDT_FALLBACK_STOP};
    expect_sequence("mixed", &fb, L, A, 10);
    CHECK(fb.fired && fb.fired_at_step == 3 && fb.fired_by == SDT_FALLBACK_TRIGGER_NONFINITE_LOSS,
          "fired once at step 3");
    CHECK(sdt_fallback_lr_multiplier(&fb) == 0.5, "lr multiplied by the default lr_backoff 0.5");
    CHECK(fb.nonfinite_total == 5 && fb.consecutive == 3 && fb.stopped, "5 non-finite in total, 3 in a row, stopped");
    char msg[512];
    sdt_fallback_describe(&fb, SDT_FALLBACK_STOP, 9, msg, sizeof msg);
    CHECK(strstr(msg, "3 non-finite losses in a row") && strstr(msg, "last good state"), "stop sentence: %s", msg);
    sdt_fallback_describe(&fb, SDT_FALLBACK_SWITCH_TO_FP32, 3, msg, sizeof msg);
    CHECK(strstr(msg, "fp32") && strstr(msg, "0.5"), "switch sentence: %s", msg);
}

static void test_fp32_run_never_switches(void)
{
    sdt_fallback_config cfg = sdt_fallback_config_default(false);
    cfg.max_consecutive = 2;
    sdt_fallback fb;
    sdt_fallback_init(&fb, &cfg, NULL);
    const double L[] = {NAN, 1.0, NAN, NAN};
    const sdt_fallback_action A[] = {SDT_FALLBACK_SKIP, SDT_FALLBACK_CONTINUE, SDT_FALLBACK_SKIP, SDT_FALLBACK_STOP};
    expect_sequence("fp32", &fb, L, A, 4);
    CHECK(!fb.fired && sdt_fallback_lr_multiplier(&fb) == 1.0, "an fp32 run has nothing to fall back to");
    CHECK(sdt_fallback_on_scale_collapse(&fb, 5) == SDT_FALLBACK_STOP, "a stopped run stays stopped");
}

static void test_scale_collapse(void)
{
    sdt_fallback_config cfg = sdt_fallback_config_default(true);
    cfg.lr_backoff = 0.25;
    sdt_fallback fb;
    sdt_fallback_init(&fb, &cfg, NULL);
    CHECK(sdt_fallback_on_loss(&fb, 1, 0.7) == SDT_FALLBACK_CONTINUE, "finite");
    CHECK(sdt_fallback_on_scale_collapse(&fb, 2) == SDT_FALLBACK_SWITCH_TO_FP32, "collapse to the minimum scale fires");
    CHECK(fb.fired_by == SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE && fb.fired_at_step == 2, "recorded trigger and step");
    CHECK(sdt_fallback_lr_multiplier(&fb) == 0.25, "configured lr_backoff");
    CHECK(sdt_fallback_on_scale_collapse(&fb, 3) == SDT_FALLBACK_CONTINUE, "fires at most once");
    CHECK(sdt_fallback_on_loss(&fb, 4, NAN) == SDT_FALLBACK_SKIP, "after firing, a NaN is only skipped");
    CHECK(fb.nonfinite_total == 1, "collapses are not NaN losses");
    char msg[512];
    sdt_fallback_describe(&fb, SDT_FALLBACK_SWITCH_TO_FP32, 2, msg, sizeof msg);
    CHECK(strstr(msg, "minimum") != NULL, "the sentence says the scale collapsed: %s", msg);
}

static void test_resume_and_validation(void)
{
    sdt_fallback_config cfg = sdt_fallback_config_default(true);
    sdt_fallback fb, resumed;
    sdt_fallback_init(&fb, &cfg, NULL);
    sdt_fallback_on_loss(&fb, 7, NAN);
    memcpy(&resumed, &fb, sizeof fb); /* the plain struct is the checkpoint */
    CHECK(sdt_fallback_on_loss(&resumed, 8, NAN) == SDT_FALLBACK_SKIP && resumed.consecutive == 2,
          "a resumed run remembers that the fallback fired");
    sdt_error error = {0};
    cfg.lr_backoff = 0.0;
    CHECK(sdt_fallback_init(&fb, &cfg, &error) == SDT_CORE_INVALID_CONFIG && strstr(error.message, "lr_backoff"),
          "lr_backoff 0: %s", error.message);
    cfg.lr_backoff = 1.5;
    CHECK(sdt_fallback_init(&fb, &cfg, &error) == SDT_CORE_INVALID_CONFIG, "lr_backoff > 1");
    cfg.lr_backoff = 0.5;
    cfg.max_consecutive = 0;
    CHECK(sdt_fallback_init(&fb, &cfg, &error) == SDT_CORE_INVALID_CONFIG && strstr(error.message, "max_consecutive"),
          "%s", error.message);
}

int main(void)
{
    test_mixed_precision_run();
    test_fp32_run_never_switches();
    test_scale_collapse();
    test_resume_and_validation();
    return sdt_test_finish("fallback");
}
