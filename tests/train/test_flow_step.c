/* test_flow_step.c - the rectified-flow objective of a training sample (train/flow_step.h):
 *  - the family's defaults (SD3: logit_normal(0, 1), constant shift 3; Flux: the resolution shift, weighting none)
 *    from the ABI's defaults, and each 1.9 option overriding them (flow_shift a constant shift for Flux too);
 *  - an unknown timestep_sampling / flow_weighting is a VALIDATION sentence naming the field;
 *  - a sample: t is flow_match's draw for (seed, draw) (Flux's with (h/2)(w/2) image tokens), x_t = (1 - t) x0 +
 *    t noise, the target noise - x0, the weight times the weighting at t, the timestep 1000 t; the same draw gives
 *    the same bytes, another draw another t. */
#include <math.h>
#include <string.h>

#include "sdt_test.h"
#include "train/flow_step.h"
#include "train/train_options.h"

static sdt_train_options defaults(void)
{
    sdt_train_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    sdt_train_options_set_defaults(&o, NULL);
    return o;
}

static void check_options(void)
{
    sdt_train_options o = defaults();
    sdt_flow_objective f;
    sdt_error err = {0};
    CHECK(sdt_flow_objective_from_options(&o, false, "options->", &f, &err) &&
              f.timesteps.density == SDT_FLOW_DENSITY_LOGIT_NORMAL && f.timesteps.logit_mean == 0.0 &&
              f.timesteps.logit_std == 1.0 && f.timesteps.shift_kind == SDT_FLOW_SHIFT_CONSTANT &&
              f.timesteps.shift == SDT_FLOW_SD3_SHIFT && f.weighting == SDT_FLOW_WEIGHT_NONE,
          "SD3's defaults: %s", err.message);
    CHECK(sdt_flow_objective_from_options(&o, true, "options->", &f, &err) &&
              f.timesteps.shift_kind == SDT_FLOW_SHIFT_RESOLUTION && f.timesteps.base_shift == SDT_FLOW_BASE_SHIFT &&
              f.timesteps.max_shift == SDT_FLOW_MAX_SHIFT,
          "Flux's defaults: %s", err.message);
    o.timestep_sampling = "mode";
    o.mode_scale = 0.5;
    o.flow_weighting = "cosmap";
    o.flow_shift = 1.5;
    CHECK(sdt_flow_objective_from_options(&o, true, "options->", &f, &err) &&
              f.timesteps.density == SDT_FLOW_DENSITY_MODE && f.timesteps.mode_scale == 0.5 &&
              f.timesteps.shift_kind == SDT_FLOW_SHIFT_CONSTANT && f.timesteps.shift == 1.5 &&
              f.weighting == SDT_FLOW_WEIGHT_COSMAP,
          "the options over Flux's defaults: %s", err.message);
    o = defaults();
    o.timestep_sampling = "logit_normal";
    o.logit_mean = -0.5;
    o.logit_std = 2.0;
    CHECK(sdt_flow_objective_from_options(&o, false, "options->", &f, &err) && f.timesteps.logit_mean == -0.5 &&
              f.timesteps.logit_std == 2.0,
          "logit_mean and logit_std: %s", err.message);
    o.timestep_sampling = "sigmoid";
    CHECK(!sdt_flow_objective_from_options(&o, false, "options->", &f, &err) && err.code == SDT_ERR_VALIDATION &&
              strstr(err.message, "options->timestep_sampling") && strstr(err.message, "sigmoid"),
          "an unknown density: \"%s\"", err.message);
    o = defaults();
    o.flow_weighting = "snr";
    CHECK(!sdt_flow_objective_from_options(&o, false, "options->", &f, &err) &&
              strstr(err.message, "options->flow_weighting"),
          "an unknown weighting: \"%s\"", err.message);
    char line[256];
    o = defaults();
    CHECK(sdt_flow_objective_from_options(&o, false, "options->", &f, &err), "defaults");
    sdt_flow_objective_describe(&f, line, sizeof line);
    CHECK(strstr(line, "logit_normal(0, 1)") && strstr(line, "constant shift 3") && strstr(line, "none"), "%s", line);
}

static void check_sample(void)
{
    enum { C = 16, H = 6, W = 4, N = C * H * W };
    float x0[N], noise[N], noisy[N], target[N], weight[N], again[N];
    for (int i = 0; i < N; i++) x0[i] = (float)sin(0.37 * i), noise[i] = (float)cos(0.91 * i + 0.2);
    sdt_train_options o = defaults();
    o.flow_weighting = "sigma_sqrt";
    const bool flux_of[2] = {false, true};
    for (int k = 0; k < 2; k++) {
        sdt_flow_objective f;
        sdt_error err = {0};
        CHECK(sdt_flow_objective_from_options(&o, flux_of[k], "options->", &f, &err), "%s", err.message);
        for (int i = 0; i < N; i++) weight[i] = 0.5f;
        float ts = 0, ts2 = 0;
        double t = sdt_flow_objective_sample(&f, 42, 7, H, W, x0, noise, noisy, target, weight, N, &ts);
        double want_t = sdt_flow_draw_t(&f.timesteps, (H / 2) * (W / 2), 42, 7);
        CHECK(t == want_t && t > 0 && t < 1, "t %.9g is flow_match's draw %.9g", t, want_t);
        CHECK(ts == (float)(1000.0 * t), "the timestep is 1000 t (%g)", ts);
        double worst = 0, lw = sdt_flow_loss_weight(SDT_FLOW_WEIGHT_SIGMA_SQRT, t);
        for (int i = 0; i < N; i++) {
            worst = fmax(worst, fabs(noisy[i] - ((1 - t) * x0[i] + t * noise[i])));
            worst = fmax(worst, fabs(target[i] - (noise[i] - x0[i])));
            worst = fmax(worst, fabs(weight[i] - 0.5 * (float)lw));
        }
        CHECK(worst < 1e-6, "x_t, the velocity and the weight (largest difference %g)", worst);
        sdt_flow_objective_sample(&f, 42, 7, H, W, x0, noise, again, target, NULL, N, &ts2);
        CHECK(memcmp(again, noisy, sizeof noisy) == 0 && ts2 == ts, "the same draw, the same bytes");
        sdt_flow_objective_sample(&f, 42, 8, H, W, x0, noise, again, target, NULL, N, &ts2);
        CHECK(ts2 != ts, "another draw, another t");
    }
}

int main(void)
{
    check_options();
    check_sample();
    return sdt_test_finish("test_flow_step");
}
