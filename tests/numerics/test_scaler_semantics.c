/* test_scaler_semantics.c - GradScaler behaviours beyond the update rule, with the
 * reference's numbers (gradscaler.md 3.1: 12-17, 19-21, 23, 26, 28, 29). */
#include "numerics_fixture.h"

static sdt_backend *be;
static sdt_test_rng rng;

static sdt_adamw_hparams adamw(void)
{
    sdt_adamw_hparams hp = sdt_adamw_hparams_torch_default();
    hp.lr = 0.1f;
    return hp;
}

/* 12: two optimizers share one scale; an inf only in B's grads: A steps, B does not,
 * found A = 0, B = 1, S 128 -> 64 (exactly one backoff), T = 0. */
static void test_two_optimizers(void)
{
    toy ab[2];
    sdt_adamw_hparams hp = adamw();
    toy_init(&ab[0], be, "embedding", 1, 4, &hp, &rng);
    toy_init(&ab[1], be, "hypernetwork", 2, 4, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 128.0f, 2.0, 0.5, 1, true, NULL, NULL);
    sdt_error error = {0};
    CHECK(sdt_scaler_attach(sc, ab[0].opt, &error) == SDT_CORE_OK, "attach a: %s", error.message);
    CHECK(sdt_scaler_attach(sc, ab[1].opt, &error) == SDT_CORE_OK, "attach b: %s", error.message);
    float *a0 = toy_snapshot(&ab[0]), *b0 = toy_snapshot(&ab[1]);
    double scaled;
    sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
    for (int k = 0; k < 2; k++) {
        toy_zero(&ab[k]);
        toy_backward_random(&ab[k], &rng, sdt_scaler_get_scale(sc), NULL);
    }
    ab[1].grad[1][2] = INFINITY;
    bool stepped[2] = {false, false};
    CHECK(sdt_scaler_unscale(sc, ab[0].opt, &error) == SDT_CORE_OK, "unscale a: %s", error.message);
    CHECK(sdt_scaler_step(sc, ab[0].opt, &stepped[0], &error) == SDT_CORE_OK, "step a: %s", error.message);
    CHECK(sdt_scaler_step(sc, ab[1].opt, &stepped[1], &error) == SDT_CORE_OK, "step b: %s", error.message);
    CHECK(stepped[0] && !stepped[1], "A must step and B must be skipped (%d %d)", stepped[0], stepped[1]);
    CHECK(!sdt_scaler_found_inf(sc, ab[0].opt) && sdt_scaler_found_inf(sc, ab[1].opt), "found_inf A 0, B 1");
    CHECK(!toy_params_equal(&ab[0], a0) && toy_params_equal(&ab[1], b0), "A's params change, B's do not");
    CHECK(sdt_optimizer_step_count(ab[0].opt) == 1 && sdt_optimizer_step_count(ab[1].opt) == 0, "step counts 1 and 0");
    sdt_scaler_update_info info;
    CHECK(sdt_scaler_update(sc, &info, &error) == SDT_CORE_OK, "update: %s", error.message);
    CHECK(sdt_scaler_get_scale(sc) == 64.0f && sdt_scaler_growth_tracker(sc) == 0 && info.backed_off,
          "scale %g tracker %lld, want 64 and 0", (double)sdt_scaler_get_scale(sc),
          (long long)sdt_scaler_growth_tracker(sc));
    CHECK(sdt_scaler_stage_of(sc, ab[0].opt) == SDT_SCALER_READY &&
              sdt_scaler_stage_of(sc, ab[1].opt) == SDT_SCALER_READY,
          "update puts every optimizer back to READY");
    free(a0);
    free(b0);
    sdt_scaler_destroy(sc);
    toy_free(&ab[0]);
    toy_free(&ab[1]);
}

/* 13 and 15: init 128, gf 2, gi 1, 4 iterations with an inf at iteration 2: scales
 * 256 512 256 512, and the params equal an fp32 control that simply skipped
 * iteration 2. With clip (15) the unscaled grads are clipped after unscale and the
 * norm before unscale is exactly S times the norm after. */
static void run_scaling_case(bool clip)
{
    enum { ITERS = 4, SKIP = 2 };
    toy ctl, amp;
    sdt_adamw_hparams hp = adamw();
    uint64_t seed = sdt_test_next(&rng);
    sdt_test_rng r1 = {seed}, r2 = {seed};
    toy_init(&ctl, be, "control", 2, 8, &hp, &r1);
    toy_init(&amp, be, "scaled", 2, 8, &hp, &r2);
    sdt_scaler *sc = make_scaler(be, 128.0f, 2.0, 0.5, 1, false, NULL, NULL);
    sdt_error error = {0};
    sdt_scaler_attach(sc, amp.opt, &error);
    const float want[ITERS] = {256, 512, 256, 512};
    float raw[2 * 8];
    for (int it = 0; it < ITERS; it++) {
        double scaled;
        sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
        float s = sdt_scaler_get_scale(sc);
        toy_zero(&amp);
        toy_backward_random(&amp, &rng, s, raw);
        toy_zero(&ctl);
        for (int i = 0; i < 2; i++) memcpy(ctl.grad[i], raw + i * 8, 8 * sizeof(float));
        sdt_optimizer_note_backward(ctl.opt, 1.0f);
        if (it == SKIP) amp.grad[1][3] = INFINITY;
        if (clip) {
            double scaled_norm = 0, norm = 0;
            sdt_optimizer_grad_norm(amp.opt, &scaled_norm, &error);
            CHECK(sdt_scaler_unscale(sc, amp.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
            CHECK(sdt_optimizer_clip_grad_norm(amp.opt, 1.0, false, &norm, &error) == SDT_CORE_OK, "clip: %s",
                  error.message);
            if (it != SKIP) {
                /* exact in exact arithmetic; the backend's parallel double sum may round its last bit differently */
                CHECK(fabs(scaled_norm - norm * s) <= 1e-12 * scaled_norm,
                      "norm before unscale %.17g must be S x norm after %.17g", scaled_norm, norm);
                double ctl_norm;
                CHECK(sdt_optimizer_clip_grad_norm(ctl.opt, 1.0, false, &ctl_norm, &error) == SDT_CORE_OK,
                      "clip control");
                CHECK(fabs(ctl_norm - norm) <= 1e-12 * norm, "control norm %.17g vs unscaled %.17g", ctl_norm, norm);
            }
        }
        bool stepped = false;
        CHECK(sdt_scaler_step(sc, amp.opt, &stepped, &error) == SDT_CORE_OK, "step: %s", error.message);
        CHECK(stepped == (it != SKIP), "iteration %d stepped=%d", it, stepped);
        if (it != SKIP)
            CHECK(sdt_optimizer_step(ctl.opt, &error) == SDT_CORE_OK, "control step: %s", error.message);
        else
            sdt_optimizer_note_skipped_step(ctl.opt);
        CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update: %s", error.message);
        CHECK(sdt_scaler_get_scale(sc) == want[it], "%s iteration %d: scale %g, want %g", clip ? "clip" : "plain", it,
              (double)sdt_scaler_get_scale(sc), (double)want[it]);
    }
    float *c = toy_snapshot(&ctl);
    CHECK(toy_params_equal(&amp, c), "%s: params must equal the fp32 control bit for bit (power-of-two scales)",
          clip ? "clip" : "plain");
    free(c);
    sdt_scaler_destroy(sc);
    toy_free(&ctl);
    toy_free(&amp);
}

/* 14: accumulation: loss/2 over two micro-batches, step + update every 2nd of 4
 * batches: 2 updates, scales 256 then 512, and the scale is constant in between. */
static void test_accumulation(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "accum", 1, 4, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 128.0f, 2.0, 0.5, 1, false, NULL, NULL);
    sdt_error error = {0};
    sdt_scaler_attach(sc, t.opt, &error);
    const float want[2] = {256, 512};
    int updates = 0;
    toy_zero(&t);
    for (int batch = 0; batch < 4; batch++) {
        double scaled;
        float before = sdt_scaler_get_scale(sc);
        sdt_scaler_scale_loss(sc, 0.5, 1, &scaled, &error);
        toy_backward_fill(&t, sdt_scaler_get_scale(sc), 0.5f);
        if (batch % 2 == 0) {
            CHECK(sdt_scaler_get_scale(sc) == before, "scale must not change between micro-batches");
            continue;
        }
        CHECK(sdt_scaler_step(sc, t.opt, NULL, &error) == SDT_CORE_OK, "step: %s", error.message);
        CHECK(t.grad[0][0] == 1.0f, "two halves must accumulate to an unscaled grad of 1, got %g",
              (double)t.grad[0][0]);
        CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update: %s", error.message);
        CHECK(sdt_scaler_get_scale(sc) == want[updates], "update %d: scale %g", updates,
              (double)sdt_scaler_get_scale(sc));
        updates++;
        toy_zero(&t);
    }
    CHECK(updates == 2 && sdt_optimizer_step_count(t.opt) == 2, "2 unskipped, 0 skipped");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 16: grads overwritten with NaN after unscale are not re-checked: the step runs
 * and the params become NaN; the scale is unchanged. */
static void test_no_recheck_after_unscale(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "recheck", 1, 3, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 65536.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_error error = {0};
    toy_begin_scaled(sc, &t);
    toy_backward_random(&t, &rng, 65536.0f, NULL);
    sdt_scaler_unscale(sc, t.opt, &error);
    for (int j = 0; j < 3; j++) t.grad[0][j] = NAN;
    bool stepped = false;
    CHECK(sdt_scaler_step(sc, t.opt, &stepped, &error) == SDT_CORE_OK && stepped, "step runs: %s", error.message);
    CHECK(isnan(t.param[0][0]), "param must be NaN, as in torch");
    sdt_scaler_update(sc, NULL, &error);
    CHECK(sdt_scaler_get_scale(sc) == 65536.0f, "scale unchanged");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 17: a skipped step leaves params, m, v and the step count untouched:
 * step 1 -> 1 -> 2; S 65536 -> 32768 -> 32768; T 1 -> 0 -> 1. */
static void test_skip_leaves_state(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "adam", 1, 5, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 65536.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_error error = {0};
    sdt_scaler_attach(sc, t.opt, &error);
    const int64_t want_steps[3] = {1, 1, 2};
    const float want_scale[3] = {65536, 32768, 32768};
    const int64_t want_tracker[3] = {1, 0, 1};
    for (int it = 0; it < 3; it++) {
        sdt_tensor *m, *v;
        sdt_optimizer_param_views(t.opt, 0, NULL, NULL, NULL, &m, &v);
        float *p0 = toy_snapshot(&t);
        float m0[5], v0[5];
        memcpy(m0, m->data, sizeof m0);
        memcpy(v0, v->data, sizeof v0);
        double scaled;
        sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
        toy_zero(&t);
        toy_backward_random(&t, &rng, sdt_scaler_get_scale(sc), NULL);
        if (it == 1) t.grad[0][4] = INFINITY;
        bool stepped;
        CHECK(sdt_scaler_step(sc, t.opt, &stepped, &error) == SDT_CORE_OK, "step: %s", error.message);
        CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update: %s", error.message);
        CHECK(sdt_optimizer_step_count(t.opt) == want_steps[it], "iter %d: adam step %lld", it,
              (long long)sdt_optimizer_step_count(t.opt));
        CHECK(sdt_scaler_get_scale(sc) == want_scale[it] && sdt_scaler_growth_tracker(sc) == want_tracker[it],
              "iter %d: S %g T %lld", it, (double)sdt_scaler_get_scale(sc), (long long)sdt_scaler_growth_tracker(sc));
        if (it == 1) {
            CHECK(!stepped && toy_params_equal(&t, p0), "skipped step must leave the params untouched");
            CHECK(memcmp(m0, m->data, sizeof m0) == 0 && memcmp(v0, v->data, sizeof v0) == 0,
                  "skipped step must leave m and v untouched");
        } else {
            CHECK(stepped && !toy_params_equal(&t, p0), "clean step must update the params");
        }
        free(p0);
    }
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 19: state round trip: s0(3, 4, .5, 2) -> {3, 4, .5, 2, 0}; after one clean step
 * the tracker is 1; loading into s1(6, 7, .8, 1) makes s1 report exactly those;
 * then scale_loss(4) gives 12. The empty state of a disabled scaler is refused. */
static void test_state_round_trip(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "state", 1, 2, &hp, &rng);
    sdt_scaler *s0 = make_scaler(be, 3.0f, 4.0, 0.5, 2, false, NULL, NULL);
    sdt_scaler *s1 = make_scaler(be, 6.0f, 7.0, 0.8, 1, false, NULL, NULL);
    sdt_error error = {0};
    sdt_scaler_state st;
    sdt_scaler_get_state(s0, &st);
    CHECK(st.scale == 3.0f && st.growth_factor == 4.0 && st.backoff_factor == 0.5 && st.growth_interval == 2 &&
              st.growth_tracker == 0,
          "state of s0");
    sdt_scaler_attach(s0, t.opt, &error);
    float raw = 1.0f;
    scaled_iteration(s0, &t, 1, &raw, NULL, NULL, &error);
    sdt_scaler_get_state(s0, &st);
    CHECK(st.growth_tracker == 1 && st.scale == 3.0f, "after one clean step: tracker %lld",
          (long long)st.growth_tracker);
    CHECK(sdt_scaler_set_state(s1, &st, &error) == SDT_CORE_OK, "load: %s", error.message);
    sdt_scaler_state st1;
    sdt_scaler_get_state(s1, &st1);
    CHECK(memcmp(&st, &st1, sizeof st) == 0, "loaded state must read back identically");
    double scaled;
    sdt_scaler_scale_loss(s1, 4.0, 1, &scaled, &error);
    CHECK(scaled == 12.0, "after loading, 4 scales to %g, want 12", scaled);

    sdt_scaler_config off = sdt_scaler_config_default();
    off.enabled = false;
    off.growth_factor = 0.5; /* 20: a disabled scaler validates nothing */
    sdt_scaler *disabled = sdt_scaler_create(be, &off, NULL, NULL, &error);
    CHECK(disabled != NULL, "a disabled scaler accepts gf 0.5: %s", error.message);
    sdt_scaler_state empty;
    sdt_scaler_get_state(disabled, &empty);
    CHECK(!empty.enabled, "a disabled scaler's state is empty");
    CHECK(sdt_scaler_set_state(s1, &empty, &error) == SDT_CORE_BAD_STATE, "loading an empty state must fail");
    CHECK(strstr(error.message, "disabled") != NULL, "the sentence must say why: %s", error.message);
    CHECK(sdt_scaler_set_state(disabled, &empty, &error) == SDT_CORE_OK, "a disabled scaler ignores loads");
    sdt_scaler_state bad = st;
    bad.growth_factor = 1.0;
    CHECK(sdt_scaler_set_state(s1, &bad, &error) == SDT_CORE_BAD_STATE, "a loaded growth factor <= 1 must be rejected");
    bad = st;
    bad.growth_tracker = 5;
    CHECK(sdt_scaler_set_state(s1, &bad, &error) == SDT_CORE_BAD_STATE, "a tracker >= interval must be rejected");
    sdt_scaler_destroy(disabled);
    sdt_scaler_destroy(s0);
    sdt_scaler_destroy(s1);
    toy_free(&t);
}

/* 20: a disabled scaler is the identity and its step is the optimizer's step. */
static void test_disabled_identity(void)
{
    toy t, ctl;
    sdt_adamw_hparams hp = adamw();
    uint64_t seed = sdt_test_next(&rng);
    sdt_test_rng r1 = {seed}, r2 = {seed};
    toy_init(&t, be, "plain", 1, 6, &hp, &r1);
    toy_init(&ctl, be, "control", 1, 6, &hp, &r2);
    sdt_scaler_config off = sdt_scaler_config_default();
    off.enabled = false;
    sdt_error error = {0};
    sdt_scaler *sc = sdt_scaler_create(be, &off, NULL, NULL, &error);
    sdt_scaler_attach(sc, t.opt, &error);
    double scaled = 0;
    CHECK(sdt_scaler_scale_loss(sc, 0.123456789, 1, &scaled, &error) == SDT_CORE_OK && scaled == 0.123456789,
          "scale_loss must return the loss unchanged");
    CHECK(sdt_scaler_get_scale(sc) == 1.0f && sdt_scaler_growth_tracker(sc) == 0, "get_scale 1, tracker 0");
    for (int it = 0; it < 3; it++) {
        float raw[6];
        toy_zero(&t);
        toy_zero(&ctl);
        toy_backward_random(&t, &rng, 1.0f, raw);
        memcpy(ctl.grad[0], raw, sizeof raw);
        sdt_optimizer_note_backward(ctl.opt, 1.0f);
        CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale is a no-op");
        CHECK(memcmp(t.grad[0], raw, sizeof raw) == 0, "disabled unscale must not touch the grads");
        bool stepped = false;
        CHECK(sdt_scaler_step(sc, t.opt, &stepped, &error) == SDT_CORE_OK && stepped, "step: %s", error.message);
        sdt_optimizer_step(ctl.opt, &error);
        CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update is a no-op");
    }
    float *c = toy_snapshot(&ctl);
    CHECK(toy_params_equal(&t, c), "disabled scaler step must equal a plain optimizer step");
    free(c);
    sdt_scaler_destroy(sc);
    toy_free(&t);
    toy_free(&ctl);
}

/* 21 and 26: update_to(1024) sets S, keeps T, clears the records; update after an
 * unscale only (no step) counts as clean: init 8, gi 1 gives 16. */
static void test_update_variants(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "upd", 1, 2, &hp, &rng);
    sdt_scaler *sc = make_scaler(be, 8.0f, 2.0, 0.5, 1, false, NULL, NULL);
    sdt_error error = {0};
    double scaled;
    toy_begin_scaled(sc, &t);
    toy_backward_fill(&t, 8.0f, 1.0f);
    CHECK(sdt_scaler_unscale(sc, t.opt, &error) == SDT_CORE_OK, "unscale: %s", error.message);
    CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK && sdt_scaler_get_scale(sc) == 16.0f,
          "update after unscale only: %g, want 16", (double)sdt_scaler_get_scale(sc));
    sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
    toy_zero(&t);
    toy_backward_fill(&t, 16.0f, 1.0f);
    sdt_scaler_unscale(sc, t.opt, &error);
    int64_t tracker = sdt_scaler_growth_tracker(sc);
    CHECK(sdt_scaler_update_to(sc, 1024.0, &error) == SDT_CORE_OK, "update_to: %s", error.message);
    CHECK(sdt_scaler_get_scale(sc) == 1024.0f && sdt_scaler_growth_tracker(sc) == tracker,
          "update_to: S 1024, T unchanged");
    CHECK(sdt_scaler_stage_of(sc, t.opt) == SDT_SCALER_READY, "update_to clears the records");
    CHECK(sdt_scaler_update_to(sc, 0.0, &error) == SDT_CORE_INVALID_CONFIG && strstr(error.message, "'upd'"),
          "update_to(0) must be refused naming the optimizer: %s", error.message);
    CHECK(sdt_scaler_update_to(sc, NAN, &error) == SDT_CORE_INVALID_CONFIG, "update_to(NaN) must be refused");
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 23: fp16 backward overflow (test_graph_grad_scaling): init 4, inputs
 * 5, 20000, 5, 40000; the grad is computed in fp16 (scale x input), so grads are
 * 20, inf, 10, inf; scales 4, 2, 2, 1; trackers 1, 0, 1, 0. */
static void test_fp16_overflow_sequence(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "fp16", 1, 100, &hp, NULL);
    for (int j = 0; j < 100; j++) t.param[0][j] = 1.0f;
    sdt_scaler *sc = make_scaler(be, 4.0f, 2.0, 0.5, 2000, false, NULL, NULL);
    sdt_error error = {0};
    sdt_scaler_attach(sc, t.opt, &error);
    const float inputs[4] = {5, 20000, 5, 40000};
    const float want_grad[4] = {20, INFINITY, 10, INFINITY};
    const float want_scale[4] = {4, 2, 2, 1};
    const int64_t want_tracker[4] = {1, 0, 1, 0};
    for (int it = 0; it < 4; it++) {
        double scaled;
        sdt_scaler_scale_loss(sc, 1.0, 1, &scaled, &error);
        toy_zero(&t);
        /* d loss / d weight.half() = scale * input, held in fp16, then accumulated into the fp32 grad */
        uint16_t h[100];
        float g16[100];
        for (int j = 0; j < 100; j++) h[j] = sdt_f32_to_f16(sdt_scaler_get_scale(sc) * inputs[it]);
        sdt_tensor th = sdt_tensor_make(h, SDT_F16, SDT_DEVICE_CPU, 1, (int64_t[]){100});
        sdt_tensor tg = sdt_tensor_make(g16, SDT_F32, SDT_DEVICE_CPU, 1, (int64_t[]){100});
        CHECK(be->convert(be, &tg, &th) == 0, "convert: %s", be->error.message);
        memcpy(t.grad[0], g16, sizeof g16);
        sdt_optimizer_note_backward(t.opt, sdt_scaler_get_scale(sc));
        CHECK(t.grad[0][7] == want_grad[it], "iter %d: scaled grad %g, want %g", it, (double)t.grad[0][7],
              (double)want_grad[it]);
        CHECK(sdt_scaler_step(sc, t.opt, NULL, &error) == SDT_CORE_OK, "step: %s", error.message);
        CHECK(sdt_scaler_update(sc, NULL, &error) == SDT_CORE_OK, "update: %s", error.message);
        CHECK(sdt_scaler_get_scale(sc) == want_scale[it] && sdt_scaler_growth_tracker(sc) == want_tracker[it],
              "iter %d: S %g T %lld, want %g %lld", it, (double)sdt_scaler_get_scale(sc),
              (long long)sdt_scaler_growth_tracker(sc), (double)want_scale[it], (long long)want_tracker[it]);
    }
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

/* 28 and 29: without zero_grad the next backward adds 4 to the used grad 1 (5, unscaled
 * 1.25) and the scaler warns; two scaled backward passes before one step accumulate
 * to 2 (no warning). */
static void test_accumulation_and_not_zeroed(void)
{
    toy t;
    sdt_adamw_hparams hp = adamw();
    toy_init(&t, be, "stale", 1, 1, &hp, &rng);
    log_sink sink = {0};
    sdt_scaler *sc = make_scaler(be, 4.0f, 2.0, 0.5, 2000, false, log_sink_fn, &sink);
    sdt_error error = {0};
    toy_begin_scaled(sc, &t);
    toy_backward_fill(&t, 4.0f, 1.0f);
    toy_backward_fill(&t, 4.0f, 1.0f);
    sdt_scaler_unscale(sc, t.opt, &error);
    CHECK(t.grad[0][0] == 2.0f, "two backward passes: unscaled grad %g, want 2", (double)t.grad[0][0]);
    sdt_scaler_step(sc, t.opt, NULL, &error);
    sdt_scaler_update(sc, NULL, &error);
    CHECK(sink.warnings == 0, "accumulating before a step is not a warning");

    toy_zero(&t);
    toy_backward_fill(&t, 4.0f, 1.0f);
    sdt_scaler_step(sc, t.opt, NULL, &error);
    CHECK(t.grad[0][0] == 1.0f, "iteration 1: unscaled grad 1");
    sdt_scaler_update(sc, NULL, &error);
    toy_backward_fill(&t, 4.0f, 1.0f); /* no zero_grad */
    CHECK(t.grad[0][0] == 5.0f, "iteration 2 without zero_grad: grad 5");
    CHECK(sdt_scaler_step(sc, t.opt, NULL, &error) == SDT_CORE_OK, "step proceeds like torch: %s", error.message);
    CHECK(t.grad[0][0] == 1.25f, "unscaled grad %g, want 1.25", (double)t.grad[0][0]);
    CHECK(sink.warnings == 1 && strstr(sink.last, "'stale'") && strstr(sink.last, "zero_grad"),
          "a warning naming the optimizer and zero_grad: %s", sink.last);
    sdt_scaler_destroy(sc);
    toy_free(&t);
}

int main(void)
{
    rng = sdt_test_rng_from_env("scaler_semantics");
    be = kt_backend();
    test_two_optimizers();
    run_scaling_case(false);
    run_scaling_case(true);
    test_accumulation();
    test_no_recheck_after_unscale();
    test_skip_leaves_state();
    test_state_round_trip();
    test_disabled_identity();
    test_update_variants();
    test_fp16_overflow_sequence();
    test_accumulation_and_not_zeroed();
    be->destroy(be);
    return sdt_test_finish("scaler_semantics");
}
