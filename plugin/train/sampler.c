/* sampler.c - see sampler.h. */
#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/rng.h"

static const char *const sampler_names[] = {"ddim", "euler_a", "dpmpp_2m_karras"};

bool sdt_sampler_parse(const char *name, const char *field, sdt_sampler_kind *out, sdt_error *error)
{
    *out = SDT_SAMPLER_DDIM;
    if (!name || !name[0]) return true;
    for (int k = 0; k < (int)(sizeof sampler_names / sizeof sampler_names[0]); k++)
        if (strcmp(name, sampler_names[k]) == 0) {
            *out = (sdt_sampler_kind)k;
            return true;
        }
    return sdt_fail(error, SDT_ERR_VALIDATION,
                    "%s is \"%s\"; it must be one of " SDT_SAMPLER_NAMES " (the default is ddim).", field, name);
}

const char *sdt_sampler_name(sdt_sampler_kind kind)
{
    return (unsigned)kind < sizeof sampler_names / sizeof sampler_names[0] ? sampler_names[kind] : "?";
}

static double log_sigma_at(const sdt_noise_schedule *s, int t)
{
    double a = s->alphas_cumprod[t];
    return 0.5 * log((1.0 - a) / a);
}

double sdt_sampler_sigma_of_t(const sdt_noise_schedule *s, double t)
{
    /* k-diffusion's t_to_sigma: log-sigma interpolated linearly between neighbouring timesteps. */
    int lo = (int)floor(t), hi = (int)ceil(t);
    if (lo < 0) lo = 0;
    if (hi > SDT_DDPM_STEPS - 1) hi = SDT_DDPM_STEPS - 1;
    double w = t - floor(t);
    return exp((1.0 - w) * log_sigma_at(s, lo) + w * log_sigma_at(s, hi));
}

double sdt_sampler_t_of_sigma(const sdt_noise_schedule *s, double sigma)
{
    /* k-diffusion's sigma_to_t: the last timestep whose log-sigma is <= log(sigma) (at most 998),
     * and the clamped linear weight towards the next one. */
    double ls = log(sigma);
    int lo = 0;
    for (int t = 0; t < SDT_DDPM_STEPS; t++)
        if (ls - log_sigma_at(s, t) >= 0) lo = t;
    if (lo > SDT_DDPM_STEPS - 2) lo = SDT_DDPM_STEPS - 2;
    double l = log_sigma_at(s, lo), h = log_sigma_at(s, lo + 1);
    double w = (l - ls) / (l - h);
    w = w < 0 ? 0 : w > 1 ? 1 : w;
    return (1.0 - w) * lo + w * (lo + 1);
}

void sdt_sampler_karras_sigmas(int n, double sigma_min, double sigma_max, double rho, double *sigmas)
{
    double min_inv = pow(sigma_min, 1.0 / rho), max_inv = pow(sigma_max, 1.0 / rho);
    for (int i = 0; i < n; i++) {
        double ramp = n > 1 ? (double)i / (n - 1) : 0.0;
        sigmas[i] = pow(max_inv + ramp * (min_inv - max_inv), rho);
    }
    sigmas[n] = 0.0;
}

void sdt_sampler_sigmas(const sdt_noise_schedule *s, sdt_sampler_kind kind, int steps, double *sigmas)
{
    if (kind == SDT_SAMPLER_DPMPP_2M_KARRAS) {
        sdt_sampler_karras_sigmas(steps, exp(log_sigma_at(s, 0)), exp(log_sigma_at(s, SDT_DDPM_STEPS - 1)), 7.0,
                                  sigmas);
        return;
    }
    /* get_sigmas(n): t = linspace(t_max, 0, n), then 0 appended. */
    double t_max = SDT_DDPM_STEPS - 1;
    for (int i = 0; i < steps; i++) {
        double t = steps > 1 ? t_max - t_max * (double)i / (steps - 1) : t_max;
        sigmas[i] = sdt_sampler_sigma_of_t(s, t);
    }
    sigmas[steps] = 0.0;
}

/* The guided denoised estimate at sigma: the model on x * c_in at sigma's timestep, the CFG mix of
 * its two outputs, converted by the CompVis (eps) or CompVis-V wrapper. */
static int denoised_at(const sdt_noise_schedule *s, const sdt_sampler_config *cfg, const float *x, int64_t n,
                       double sigma, float *scratch, double *denoised, sdt_denoise_fn fn, void *user)
{
    float *cond = scratch, *uncond = scratch + n, *input = scratch + 2 * n;
    bool guided = cfg->cfg_scale != 1.0f;
    double c_in = 1.0 / sqrt(sigma * sigma + 1.0);
    for (int64_t k = 0; k < n; k++) input[k] = (float)(x[k] * c_in);
    int rc = fn(user, input, sdt_sampler_t_of_sigma(s, sigma), cond, guided ? uncond : NULL);
    if (rc) return rc;
    double c_skip = 1.0 / (sigma * sigma + 1.0), c_out_v = -sigma * c_in;
    for (int64_t k = 0; k < n; k++) {
        double out = guided ? uncond[k] + cfg->cfg_scale * ((double)cond[k] - uncond[k]) : cond[k];
        denoised[k] = cfg->v_prediction ? x[k] * c_skip + out * c_out_v : x[k] - sigma * out;
    }
    return 0;
}

/* sample_euler_ancestral, eta 1, s_noise 1. */
static int euler_ancestral(const sdt_noise_schedule *s, const sdt_sampler_config *cfg, const double *sigmas, float *x,
                           int64_t n, float *scratch, double *denoised, sdt_denoise_fn fn, void *user)
{
    float *noise = scratch + 3 * n;
    for (int i = 0; i < cfg->steps; i++) {
        int rc = denoised_at(s, cfg, x, n, sigmas[i], scratch, denoised, fn, user);
        if (rc) return rc;
        double from = sigmas[i], to = sigmas[i + 1];
        double up = sqrt(to * to * (from * from - to * to) / (from * from));
        if (up > to) up = to;
        double down = sqrt(to * to - up * up), dt = down - from;
        if (to > 0) sdt_rng_normal_fill(cfg->seed, SDT_RNG_PREVIEW, (uint64_t)(i + 1) * (uint64_t)n, noise, n);
        for (int64_t k = 0; k < n; k++) {
            double d = (x[k] - denoised[k]) / from, v = x[k] + d * dt;
            x[k] = (float)(to > 0 ? v + noise[k] * up : v);
        }
    }
    return 0;
}

/* sample_dpmpp_2m: t = -log(sigma), h = t_next - t; second order from the previous denoised. */
static int dpmpp_2m(const sdt_noise_schedule *s, const sdt_sampler_config *cfg, const double *sigmas, float *x,
                    int64_t n, float *scratch, double *denoised, double *old_denoised, sdt_denoise_fn fn, void *user)
{
    for (int i = 0; i < cfg->steps; i++) {
        int rc = denoised_at(s, cfg, x, n, sigmas[i], scratch, denoised, fn, user);
        if (rc) return rc;
        if (sigmas[i + 1] == 0.0) { /* exp(-inf) = 0, -expm1(-inf) = 1: x becomes the denoised estimate */
            for (int64_t k = 0; k < n; k++) x[k] = (float)denoised[k];
            continue;
        }
        double t = -log(sigmas[i]), t_next = -log(sigmas[i + 1]), h = t_next - t;
        double ratio = sigmas[i + 1] / sigmas[i], mix = -expm1(-h);
        bool first = i == 0;
        double r = first ? 0 : (t - (-log(sigmas[i - 1]))) / h;
        for (int64_t k = 0; k < n; k++) {
            double d =
                first ? denoised[k] : (1.0 + 1.0 / (2.0 * r)) * denoised[k] - (1.0 / (2.0 * r)) * old_denoised[k];
            x[k] = (float)(ratio * x[k] + mix * d);
        }
        memcpy(old_denoised, denoised, (size_t)n * sizeof(double));
    }
    return 0;
}

int sdt_sampler_run(const sdt_noise_schedule *s, const sdt_sampler_config *cfg, float *x, int64_t n, float *scratch,
                    sdt_denoise_fn fn, void *user)
{
    if (cfg->steps < 1 || cfg->steps > SDT_DDPM_STEPS) return SDT_DDIM_BAD_STEPS;
    if (cfg->kind == SDT_SAMPLER_DDIM) {
        sdt_ddim_config dc = {cfg->steps, cfg->cfg_scale, cfg->v_prediction};
        return sdt_ddim_sample(s, &dc, x, n, scratch, fn, user);
    }
    double sigmas[SDT_DDPM_STEPS + 1];
    sdt_sampler_sigmas(s, cfg->kind, cfg->steps, sigmas);
    double *denoised = malloc((size_t)n * 2 * sizeof(double));
    if (!denoised) return SDT_SAMPLER_OUT_OF_MEMORY;
    for (int64_t k = 0; k < n; k++) x[k] = (float)(x[k] * sigmas[0]);
    int rc = cfg->kind == SDT_SAMPLER_EULER_A
                 ? euler_ancestral(s, cfg, sigmas, x, n, scratch, denoised, fn, user)
                 : dpmpp_2m(s, cfg, sigmas, x, n, scratch, denoised, denoised + n, fn, user);
    free(denoised);
    return rc;
}
