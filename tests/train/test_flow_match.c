/* test_flow_match.c - rectified flow (train/flow_match.h) and its Euler sampler (train/flow_sampler.h):
 * the formulas against tests/train/flow_reference.py (diffusers' and kohya's, in torch float64; skipped
 * with a line where python3-torch is missing), the timestep distributions' moments and quantiles over
 * many draws (fixed seed), and the sampler on analytic flows whose endpoints are known. */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flow_math.h"
#include "sdt_test.h"
#include "torch_python.h"
#include "train/flow_match.h"
#include "train/flow_sampler.h"

static double ours(const char *kind, double a, double b, double c, bool *known)
{
    *known = true;
    sdt_flow_timesteps f = sdt_flow_timesteps_sd3();
    if (strcmp(kind, "shift") == 0) {
        f.shift = b;
        return sdt_flow_shift(&f, 0, a);
    }
    if (strcmp(kind, "mu") == 0) {
        f.base_shift = b;
        f.max_shift = c;
        return sdt_flow_resolution_mu(&f, a);
    }
    if (strcmp(kind, "time_shift") == 0) return sdt_flow_shift_exponential(a, b);
    if (strcmp(kind, "weight") == 0) return sdt_flow_loss_weight((sdt_flow_weighting)(int)a, b);
    if (strcmp(kind, "logit_normal") == 0) {
        f.logit_mean = b;
        f.logit_std = c;
        return sdt_flow_density_value(&f, 0.5, a);
    }
    if (strcmp(kind, "mode") == 0) {
        f.density = SDT_FLOW_DENSITY_MODE;
        f.mode_scale = b;
        return sdt_flow_density_value(&f, a, 0);
    }
    if (strncmp(kind, "sigmas_", 7) == 0) {
        sdt_flow_sampler_config cfg = {.steps = (int)a, .cfg_scale = 1, .shift = sdt_flow_timesteps_sd3()};
        if (strcmp(kind, "sigmas_mu") == 0) {
            /* a Flux config whose image token count gives mu b */
            cfg.shift = sdt_flow_timesteps_flux();
            cfg.shift.base_shift = b;
            cfg.shift.max_shift = b;
            cfg.image_seq_len = 1000;
        } else {
            cfg.shift.shift = b;
            cfg.sd3_spacing = strcmp(kind, "sigmas_sd3") == 0;
        }
        double sigmas[SDT_FLOW_MAX_STEPS + 1];
        sdt_flow_sampler_sigmas(&cfg, sigmas);
        return sigmas[(int)c];
    }
    *known = false;
    return 0;
}

static void test_formulas_vs_torch(void)
{
    if (!tp_torch_available()) {
        printf("python3-torch is not available: the flow formulas are not compared with diffusers' and kohya's\n");
        return;
    }
    char *args[] = {NULL};
    int status = -1;
    char *out = tp_run_script(SDT_SOURCE_DIR, "tests/train/flow_reference.py", args, &status);
    CHECK(status == 0 && out, "flow_reference.py failed");
    char **lines = g_strsplit(out ? out : "", "\n", -1);
    int cases = 0;
    for (char **l = lines; *l && **l; l++) {
        char **f = g_strsplit(*l, " ", -1);
        if (g_strv_length(f) != 5) {
            CHECK(0, "flow_reference.py line \"%s\" has not 5 fields", *l);
            g_strfreev(f);
            continue;
        }
        double a = g_ascii_strtod(f[1], NULL), b = g_ascii_strtod(f[2], NULL), c = g_ascii_strtod(f[3], NULL);
        double want = g_ascii_strtod(f[4], NULL);
        bool known;
        double got = ours(f[0], a, b, c, &known);
        CHECK(known, "flow_reference.py case %s is not one the test knows", f[0]);
        double err = fabs(got - want) / fmax(1.0, fabs(want));
        CHECK(err < 1e-12, "%s(%g, %g, %g): ours %.17g, torch %.17g", f[0], a, b, c, got, want);
        cases++;
        g_strfreev(f);
    }
    CHECK(cases > 250, "flow_reference.py printed %d cases, want every one of its ~300", cases);
    g_strfreev(lines);
    g_free(out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define DRAWS 200000

/* DRAWS values of t (sorted on return), all in (0, 1). */
static double *draw_many(const sdt_flow_timesteps *f, double seq, uint64_t seed)
{
    double *t = malloc(sizeof(double) * DRAWS);
    int outside = 0;
    for (int i = 0; i < DRAWS; i++) {
        t[i] = sdt_flow_draw_t(f, seq, seed, (uint64_t)i);
        outside += !(t[i] > 0 && t[i] < 1);
    }
    CHECK(outside == 0, "%d of %d draws outside (0, 1)", outside, DRAWS);
    qsort(t, DRAWS, sizeof(double), cmp_double);
    return t;
}

static double quantile(const double *sorted, double q)
{
    return sorted[(int)(q * (DRAWS - 1))];
}

/* The empirical q-quantiles of the draws against the exact ones (quantile_fn of q): for 200k draws the
 * q-quantile's standard error is sqrt(q (1 - q) / n) / density, well under 0.005 here. */
static void check_quantiles(const char *what, const double *sorted, double (*exact)(const sdt_flow_timesteps *, double),
                            const sdt_flow_timesteps *f)
{
    static const double qs[] = {0.05, 0.25, 0.5, 0.75, 0.95};
    for (int k = 0; k < 5; k++) {
        double got = quantile(sorted, qs[k]), want = exact(f, qs[k]);
        CHECK(fabs(got - want) < 0.005, "%s: %.2f-quantile %.5f, exact %.5f", what, qs[k], got, want);
    }
}

/* Inverse normal CDF by bisection on erfc (tests only). */
static double probit(double q)
{
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / sqrt(2.0)) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static double seq_for_quantiles = 0;

/* Every density is monotone in its draw and every shift monotone in t, so quantiles map through. */
static double exact_quantile(const sdt_flow_timesteps *f, double q)
{
    double t;
    if (f->density == SDT_FLOW_DENSITY_LOGIT_NORMAL)
        t = sdt_flow_density_value(f, 0, probit(q));
    else if (f->density == SDT_FLOW_DENSITY_MODE)
        t = sdt_flow_density_value(f, 1.0 - q, 0); /* mode's map falls: its q-quantile is f(1 - q) */
    else
        t = q;
    return sdt_flow_shift(f, seq_for_quantiles, t);
}

static void test_distributions(void)
{
    const uint64_t seed = 4242;
    sdt_flow_timesteps f = sdt_flow_timesteps_sd3();

    f.density = SDT_FLOW_DENSITY_UNIFORM;
    f.shift_kind = SDT_FLOW_SHIFT_NONE;
    double *t = draw_many(&f, 0, seed);
    double mean = 0, var = 0;
    for (int i = 0; i < DRAWS; i++) mean += t[i];
    mean /= DRAWS;
    for (int i = 0; i < DRAWS; i++) var += (t[i] - mean) * (t[i] - mean);
    var /= DRAWS - 1;
    CHECK(fabs(mean - 0.5) < 0.003, "uniform: mean %.5f, want 0.5", mean);
    CHECK(fabs(var - 1.0 / 12) < 0.002, "uniform: variance %.5f, want 1/12", var);
    check_quantiles("uniform", t, exact_quantile, &f);
    free(t);

    f.density = SDT_FLOW_DENSITY_LOGIT_NORMAL;
    f.logit_mean = 0.3;
    f.logit_std = 0.8;
    t = draw_many(&f, 0, seed);
    mean = var = 0;
    for (int i = 0; i < DRAWS; i++) mean += log(t[i] / (1 - t[i]));
    mean /= DRAWS;
    for (int i = 0; i < DRAWS; i++) var += pow(log(t[i] / (1 - t[i])) - mean, 2);
    var /= DRAWS - 1;
    CHECK(fabs(mean - 0.3) < 0.01, "logit_normal(0.3, 0.8): logit mean %.5f, want 0.3", mean);
    CHECK(fabs(sqrt(var) - 0.8) < 0.01, "logit_normal(0.3, 0.8): logit std %.5f, want 0.8", sqrt(var));
    check_quantiles("logit_normal(0.3, 0.8)", t, exact_quantile, &f);
    free(t);

    f.density = SDT_FLOW_DENSITY_MODE;
    f.mode_scale = 1.29;
    t = draw_many(&f, 0, seed);
    check_quantiles("mode(1.29)", t, exact_quantile, &f);
    free(t);

    f = sdt_flow_timesteps_sd3();
    t = draw_many(&f, 0, seed);
    CHECK(fabs(quantile(t, 0.5) - 0.75) < 0.005, "SD3 default: median %.5f, want shift 3 of 0.5 = 0.75",
          quantile(t, 0.5));
    check_quantiles("SD3 default (logit_normal, shift 3)", t, exact_quantile, &f);
    free(t);

    f = sdt_flow_timesteps_flux();
    seq_for_quantiles = 4096; /* a 1024x1024 image: 128x128 latents, 64x64 packed tokens */
    t = draw_many(&f, 4096, seed);
    double want = exp(1.15) / (exp(1.15) + 1);
    CHECK(fabs(quantile(t, 0.5) - want) < 0.005, "Flux at 4096 tokens: median %.5f, want e^1.15/(e^1.15+1) %.5f",
          quantile(t, 0.5), want);
    check_quantiles("Flux default at 4096 tokens", t, exact_quantile, &f);
    free(t);
    seq_for_quantiles = 0;

    /* Pure functions of (seed, draw). */
    CHECK(sdt_flow_draw_t(&f, 1024, 7, 11) == sdt_flow_draw_t(&f, 1024, 7, 11), "a draw repeats");
    CHECK(sdt_flow_draw_t(&f, 1024, 7, 11) != sdt_flow_draw_t(&f, 1024, 8, 11), "seeds differ");
    CHECK(sdt_flow_draw_t(&f, 1024, 7, 11) != sdt_flow_draw_t(&f, 1024, 7, 12), "draws differ");
}

/* Identities that hold whatever torch says (and run without it). */
static void test_identities(void)
{
    sdt_flow_timesteps f = sdt_flow_timesteps_flux();
    CHECK(fabs(sdt_flow_resolution_mu(&f, 256) - 0.5) < 1e-15, "mu at 256 tokens is base_shift");
    CHECK(fabs(sdt_flow_resolution_mu(&f, 4096) - 1.15) < 1e-15, "mu at 4096 tokens is max_shift");
    for (double t = 0.05; t < 1; t += 0.1) {
        CHECK(fabs(sdt_flow_shift_constant(t, 1.0) - t) < 1e-15, "shift 1 is the identity");
        CHECK(fabs(sdt_flow_shift_exponential(t, 0.0) - t) < 1e-15, "mu 0 is the identity");
        /* e^mu / (e^mu + 1/t - 1) is the constant shift with shift e^mu */
        CHECK(fabs(sdt_flow_shift_exponential(t, log(3.0)) - sdt_flow_shift_constant(t, 3.0)) < 1e-14,
              "the exponential shift with mu = ln 3 is SD3's shift 3 (t %g)", t);
        CHECK(sdt_flow_shift_constant(t, 3.0) > t, "shift 3 moves t towards noise");
    }
    CHECK(sdt_flow_shift_constant(1.0, 3.0) == 1.0 && sdt_flow_shift_exponential(1.0, 1.15) == 1.0, "1 stays 1");
    CHECK(fabs(sdt_flow_loss_weight(SDT_FLOW_WEIGHT_SIGMA_SQRT, 0.5) - 4.0) < 1e-15, "sigma_sqrt: sigma^-2");
    CHECK(fabs(sdt_flow_loss_weight(SDT_FLOW_WEIGHT_COSMAP, 0.5) - 4.0 / 3.14159265358979323846) < 1e-15,
          "cosmap at 1/2: 2 / (pi / 2)");
    CHECK(sdt_flow_loss_weight(SDT_FLOW_WEIGHT_NONE, 0.3) == 1.0, "none: 1");
}

static void test_noisy_and_target(void)
{
    float x0[3] = {1.0f, -2.0f, 0.5f}, noise[3] = {0.25f, 4.0f, -1.0f}, noisy[3], target[3];
    sdt_flow_noisy(0.25, x0, noise, noisy, 3);
    sdt_flow_target(x0, noise, target, 3);
    for (int i = 0; i < 3; i++) {
        CHECK(fabsf(noisy[i] - (0.75f * x0[i] + 0.25f * noise[i])) < 1e-6f, "noisy[%d] = %g", i, noisy[i]);
        CHECK(target[i] == noise[i] - x0[i], "target[%d] = %g", i, target[i]);
    }
    sdt_flow_noisy(0.0, x0, noise, noisy, 3);
    CHECK(memcmp(noisy, x0, sizeof x0) == 0, "t = 0 is the data");
    sdt_flow_noisy(1.0, x0, noise, noisy, 3);
    CHECK(memcmp(noisy, noise, sizeof noise) == 0, "t = 1 is the noise");
    CHECK(sdt_flow_model_timestep(0.25) == 250.0, "the model sees 1000 t");
}

/* Analytic flows. x0 ~ N(m, s^2) per element, noise ~ N(0, 1): x_t has mean (1 - t) m and variance
 * V(t) = (1 - t)^2 s^2 + t^2, and the exact velocity E[noise - x0 | x_t = x] is
 * -m + (x - (1 - t) m) V'(t) / (2 V(t)); its ODE from x(1) = z ends at x(0) = m + s z. With s = 0
 * (all data at m) the velocity z - m is constant along a path: Euler is exact at any step count. */
typedef struct flow_case {
    double m_cond, m_uncond, s;
    double guidance_seen;
    double timesteps[SDT_FLOW_MAX_STEPS];
    int calls, fail_at;
} flow_case;

static void exact_velocity(double m, double s, const float *x, double t, float *v, int64_t n)
{
    double V = (1 - t) * (1 - t) * s * s + t * t, dV = -2 * (1 - t) * s * s + 2 * t;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(-m + (x[i] - (1 - t) * m) * dV / (2 * V));
}

static int analytic_velocity(void *user, const float *x, double timestep, double guidance, float *cond, float *uncond)
{
    flow_case *c = user;
    if (c->calls == c->fail_at) return 7;
    c->timesteps[c->calls++] = timestep;
    c->guidance_seen = guidance;
    double t = timestep / 1000.0;
    exact_velocity(c->m_cond, c->s, x, t, cond, 64);
    if (uncond) exact_velocity(c->m_uncond, c->s, x, t, uncond, 64);
    return 0;
}

static void test_sampler_exact_flows(void)
{
    float z[64], x[64], scratch[128];
    for (int i = 0; i < 64; i++) z[i] = (float)((i * 37 % 64) - 32) / 16.0f;
    sdt_flow_timesteps shifts[2] = {sdt_flow_timesteps_sd3(), sdt_flow_timesteps_flux()};
    int step_counts[3] = {1, 4, 28};
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) {
            sdt_flow_sampler_config cfg = {
                .steps = step_counts[j], .cfg_scale = 1, .guidance = 3.5f, .shift = shifts[k], .image_seq_len = 1024};
            flow_case c = {.m_cond = 0.75, .s = 0, .fail_at = -1};
            memcpy(x, z, sizeof z);
            CHECK(sdt_flow_sample(&cfg, x, 64, scratch, analytic_velocity, &c) == 0, "sampling runs");
            double worst = 0;
            for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(x[i] - 0.75));
            CHECK(worst < 1e-5, "point data, shift %d, %d steps: worst endpoint error %g", k, cfg.steps, worst);
            CHECK(c.calls == cfg.steps, "one call a step without cfg (%d for %d)", c.calls, cfg.steps);
            CHECK(c.guidance_seen == 3.5, "the distilled guidance reaches the model (%g)", c.guidance_seen);
            double sigmas[SDT_FLOW_MAX_STEPS + 1];
            sdt_flow_sampler_sigmas(&cfg, sigmas);
            CHECK(fabs(c.timesteps[0] - 1000.0) < 1e-9, "the first timestep is 1000 (%g)", c.timesteps[0]);
            for (int i = 0; i < c.calls; i++)
                CHECK(c.timesteps[i] == 1000.0 * sigmas[i], "timestep %d is 1000 sigma", i);
        }

    /* Classifier-free guidance: uncond + 4 (cond - uncond) of two point flows is the point flow to
     * m_u + 4 (m_c - m_u) = -0.25 + 4 * 1 = 3.75. */
    sdt_flow_sampler_config cfg = {.steps = 6, .cfg_scale = 4, .shift = shifts[0]};
    flow_case c = {.m_cond = 0.75, .m_uncond = -0.25, .s = 0, .fail_at = -1};
    memcpy(x, z, sizeof z);
    CHECK(sdt_flow_sample(&cfg, x, 64, scratch, analytic_velocity, &c) == 0, "guided sampling runs");
    double worst = 0;
    for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(x[i] - 3.75));
    CHECK(worst < 1e-5, "guided point flows: worst endpoint error %g", worst);

    /* Gaussian data: Euler converges to m + s z, first order in the step size. */
    double err[2];
    int steps[2] = {50, 200};
    for (int r = 0; r < 2; r++) {
        sdt_flow_sampler_config g = {.steps = steps[r], .cfg_scale = 1, .shift = shifts[0]};
        flow_case gc = {.m_cond = 0.5, .s = 0.6, .fail_at = -1};
        memcpy(x, z, sizeof z);
        CHECK(sdt_flow_sample(&g, x, 64, scratch, analytic_velocity, &gc) == 0, "sampling runs");
        err[r] = 0;
        for (int i = 0; i < 64; i++) err[r] = fmax(err[r], fabs(x[i] - (0.5 + 0.6 * z[i])));
    }
    CHECK(err[1] < 0.02, "Gaussian data, 200 steps: worst endpoint error %g", err[1]);
    CHECK(err[1] < err[0] / 2.5 && err[1] > 0, "Euler is first order: error %g at 50 steps, %g at 200", err[0], err[1]);
}

static void test_refusals(void)
{
    sdt_error e = {0};
    float x[64] = {0}, scratch[128];
    sdt_flow_sampler_config cfg = {.steps = 0, .cfg_scale = 1, .shift = sdt_flow_timesteps_sd3()};
    flow_case c = {.fail_at = -1};
    CHECK(sdt_flow_sample(&cfg, x, 64, scratch, analytic_velocity, &c) == SDT_FLOW_BAD_STEPS && c.calls == 0,
          "0 steps refused");
    CHECK(!sdt_flow_steps_check(1001, &e) && strstr(e.message, "1001"), "1001 steps: \"%s\"", e.message);
    cfg.steps = 5;
    c.fail_at = 2;
    CHECK(sdt_flow_sample(&cfg, x, 64, scratch, analytic_velocity, &c) == 7, "the callback's failure comes back");

    sdt_flow_density d = SDT_FLOW_DENSITY_MODE;
    CHECK(sdt_flow_density_parse(NULL, "timestep_sampling", &d, &e) && d == SDT_FLOW_DENSITY_MODE, "NULL keeps");
    CHECK(sdt_flow_density_parse("logit_normal", "timestep_sampling", &d, &e) && d == SDT_FLOW_DENSITY_LOGIT_NORMAL,
          "logit_normal parses");
    CHECK(!sdt_flow_density_parse("sigmoid", "timestep_sampling", &d, &e) && strstr(e.message, "timestep_sampling") &&
              strstr(e.message, "logit_normal"),
          "unknown density: \"%s\"", e.message);
    sdt_flow_weighting w = SDT_FLOW_WEIGHT_NONE;
    CHECK(sdt_flow_weighting_parse("cosmap", "weighting_scheme", &w, &e) && w == SDT_FLOW_WEIGHT_COSMAP,
          "cosmap parses");
    CHECK(!sdt_flow_weighting_parse("snr", "weighting_scheme", &w, &e) && strstr(e.message, "sigma_sqrt"),
          "unknown weighting: \"%s\"", e.message);
    CHECK(strcmp(sdt_flow_weighting_name(SDT_FLOW_WEIGHT_SIGMA_SQRT), "sigma_sqrt") == 0, "names");

    sdt_flow_timesteps f = sdt_flow_timesteps_sd3();
    CHECK(sdt_flow_timesteps_check(&f, "flow", &e), "SD3's defaults pass");
    f = sdt_flow_timesteps_flux();
    CHECK(sdt_flow_timesteps_check(&f, "flow", &e), "Flux's defaults pass");
    f.logit_std = 0;
    CHECK(!sdt_flow_timesteps_check(&f, "flow", &e) && strstr(e.message, "logit_std"), "std 0: \"%s\"", e.message);
    f = sdt_flow_timesteps_sd3();
    f.shift = -1;
    CHECK(!sdt_flow_timesteps_check(&f, "flow", &e) && strstr(e.message, "shift"), "shift -1: \"%s\"", e.message);
    f = sdt_flow_timesteps_sd3();
    f.mode_scale = 2.0;
    CHECK(!sdt_flow_timesteps_check(&f, "flow", &e) && strstr(e.message, "mode_scale"), "mode 2: \"%s\"", e.message);
    f.mode_scale = 1.75;
    CHECK(sdt_flow_timesteps_check(&f, "flow", &e), "mode 1.75 passes");
}

int main(void)
{
    test_formulas_vs_torch();
    test_identities();
    test_distributions();
    test_noisy_and_target();
    test_sampler_exact_flows();
    test_refusals();
    return sdt_test_finish("test_flow_match");
}
