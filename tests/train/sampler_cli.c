/* sampler_cli - runs one preview sampler (train/sampler.h) on an analytic denoiser and prints, as
 * JSON, what samplers_vs_kdiffusion.py needs to replay it in float64: the sigmas, the initial and
 * the fresh noise, the model's timesteps and the result.
 *
 * The data: every element x0_k ~ N(mu_k, s^2) (mu of the prompt, or of the empty prompt for the
 * unconditioned branch), so the exact denoiser at noise level sigma is
 * D(x) = mu + s^2 / (s^2 + sigma^2) (x - mu); the "UNet" turns its input and timestep into that
 * D's epsilon or v, as a perfect model would.
 *
 * usage: sampler_cli KIND STEPS CFG V(0|1) SEED */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/rng.h"
#include "train/sampler.h"

enum { N = 6 };
static const double data_spread = 0.5;
static const double mu_cond[N] = {0.8, -0.4, 0.1, 1.2, -1.0, 0.3};
static const double mu_uncond[N] = {0.0, 0.2, -0.3, 0.5, 0.4, -0.6};

typedef struct model {
    const sdt_noise_schedule *s;
    bool v;
    double timesteps[SDT_DDPM_STEPS];
    int calls;
} model;

static void model_output(const model *m, const double *mu, const float *input, double t, float *out)
{
    double sigma = sdt_sampler_sigma_of_t(m->s, t), a = 1.0 / (1.0 + sigma * sigma);
    double ss = data_spread * data_spread;
    for (int k = 0; k < N; k++) {
        double x = input[k] / sqrt(a); /* the VE sample x0 + sigma eps */
        double d = mu[k] + ss / (ss + sigma * sigma) * (x - mu[k]);
        double eps = (x - d) / sigma;
        out[k] = (float)(m->v ? sqrt(a) * eps - sqrt(1.0 - a) * d : eps);
    }
}

static int analytic(void *user, const float *x, double t, float *cond, float *uncond)
{
    model *m = user;
    if (m->calls < SDT_DDPM_STEPS) m->timesteps[m->calls] = t;
    m->calls++;
    model_output(m, mu_cond, x, t, cond);
    if (uncond) model_output(m, mu_uncond, x, t, uncond);
    return 0;
}

static void print_array(const char *name, const double *v, int n, const char *tail)
{
    printf("\"%s\": [", name);
    for (int i = 0; i < n; i++) printf("%s%.17g", i ? ", " : "", v[i]);
    printf("]%s\n", tail);
}

int main(int argc, char **argv)
{
    sdt_sampler_kind kind;
    sdt_error error;
    sdt_error_clear(&error);
    if (argc != 6 || !sdt_sampler_parse(argv[1], "KIND", &kind, &error)) {
        fprintf(stderr, "usage: sampler_cli ddim|euler_a|dpmpp_2m_karras STEPS CFG V(0|1) SEED %s\n", error.message);
        return 2;
    }
    sdt_noise_schedule s;
    sdt_noise_schedule_init_sd(&s);
    sdt_sampler_config cfg = {kind, atoi(argv[2]), (float)atof(argv[3]), atoi(argv[4]) != 0,
                              strtoull(argv[5], NULL, 10)};
    model m = {&s, cfg.v_prediction, {0}, 0};
    float x[N], scratch[4 * N], noise[N];
    sdt_rng_normal_fill(cfg.seed, SDT_RNG_PREVIEW, 0, x, N);
    double d[SDT_DDPM_STEPS + 1];
    printf("{\n");
    for (int k = 0; k < N; k++) d[k] = x[k];
    print_array("initial_noise", d, N, ",");
    printf("\"step_noise\": [");
    for (int i = 0; i < cfg.steps; i++) { /* Euler ancestral's fresh noise of step i (unused by the others) */
        sdt_rng_normal_fill(cfg.seed, SDT_RNG_PREVIEW, (uint64_t)(i + 1) * N, noise, N);
        printf("%s[", i ? ", " : "");
        for (int k = 0; k < N; k++) printf("%s%.9g", k ? ", " : "", noise[k]);
        printf("]");
    }
    printf("],\n");
    if (kind != SDT_SAMPLER_DDIM) {
        sdt_sampler_sigmas(&s, kind, cfg.steps, d);
        print_array("sigmas", d, cfg.steps + 1, ",");
    }
    int rc = sdt_sampler_run(&s, &cfg, x, N, scratch, analytic, &m);
    print_array("timesteps", m.timesteps, m.calls, ",");
    for (int k = 0; k < N; k++) d[k] = x[k];
    print_array("result", d, N, ",");
    print_array("mu_cond", mu_cond, N, ",");
    print_array("mu_uncond", mu_uncond, N, ",");
    printf("\"data_spread\": %.17g, \"calls\": %d, \"rc\": %d\n}\n", data_spread, m.calls, rc);
    return rc == 0 ? 0 : 1;
}
