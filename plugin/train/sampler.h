/* sampler.h - the samplers of previews and of sdt-host generate, one home for all of them:
 * DDIM (eta 0, ddim_sampler.h), and Euler ancestral and DPM++ 2M with Karras sigmas as
 * k-diffusion defines them (sample_euler_ancestral, sample_dpmpp_2m, get_sigmas_karras) on
 * k-diffusion's CompVis wrappers of the DDPM schedule:
 *   sigma_t = sqrt((1 - acp[t]) / acp[t]); the model sees x * 1/sqrt(sigma^2 + 1) at the
 *   (fractional) timestep whose log-sigma interpolates sigma (sigma_to_t);
 *   denoised = x - sigma * eps (epsilon models), or
 *   denoised = x / (sigma^2 + 1) - v * sigma / sqrt(sigma^2 + 1) (v models).
 * Euler ancestral uses the model's own sigmas (get_sigmas: t = linspace(999, 0, steps)); DPM++ 2M
 * uses Karras sigmas (rho 7) between the model's smallest and largest sigma, as A1111 does. Both
 * start from unit noise times the first sigma and end at sigma 0. Euler ancestral's fresh noise
 * comes from the counter-based RNG (seed, SDT_RNG_PREVIEW, after the initial noise), so a seed
 * gives the same image on every backend and thread count. */
#ifndef SDT_TRAIN_SAMPLER_H
#define SDT_TRAIN_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"
#include "train/ddim_sampler.h"
#include "train/noise_schedule.h"

typedef enum sdt_sampler_kind {
    SDT_SAMPLER_DDIM = 0,
    SDT_SAMPLER_EULER_A = 1,
    SDT_SAMPLER_DPMPP_2M_KARRAS = 2,
} sdt_sampler_kind;

#define SDT_SAMPLER_NAMES "ddim, euler_a or dpmpp_2m_karras"

/* name NULL or "" is DDIM (the default); an unknown name is false + a VALIDATION sentence that
 * names `field` and the samplers there are. */
bool sdt_sampler_parse(const char *name, const char *field, sdt_sampler_kind *out, sdt_error *error);
const char *sdt_sampler_name(sdt_sampler_kind kind);

typedef struct sdt_sampler_config {
    sdt_sampler_kind kind;
    int steps;       /* 1..1000 */
    float cfg_scale; /* 1 = no guidance */
    bool v_prediction;
    uint64_t seed; /* Euler ancestral's fresh noise; the caller draws the initial noise with counter base 0 */
} sdt_sampler_config;

/* k-diffusion's sigma of the model's timestep t (0..999) and the reverse (fractional t). */
double sdt_sampler_sigma_of_t(const sdt_noise_schedule *s, double t);
double sdt_sampler_t_of_sigma(const sdt_noise_schedule *s, double sigma);
/* The steps + 1 sigmas (the last is 0) a k-sampler walks: the model's (euler_a) or Karras's (dpmpp_2m_karras). */
void sdt_sampler_sigmas(const sdt_noise_schedule *s, sdt_sampler_kind kind, int steps, double *sigmas);
/* Karras et al. (2022): (max^(1/rho) + i/(n-1) (min^(1/rho) - max^(1/rho)))^rho, i = 0..n-1, then 0. */
void sdt_sampler_karras_sigmas(int n, double sigma_min, double sigma_max, double rho, double *sigmas);

/* x holds unit normal noise on entry (counter base 0 of the seed's SDT_RNG_PREVIEW stream) and the
 * sampled latents on return. scratch needs 4 * n floats. fn is called with the model's input (x
 * scaled by c_in for the k-samplers) and the timestep (fractional for the k-samplers). Returns
 * SDT_DDIM_BAD_STEPS for steps outside 1..SDT_DDPM_STEPS, SDT_SAMPLER_OUT_OF_MEMORY, the
 * callback's failure, or 0. */
/* sdt_sampler_run's answer when the host has no memory for the k-samplers' float64 state. */
#define SDT_SAMPLER_OUT_OF_MEMORY (-2)

int sdt_sampler_run(const sdt_noise_schedule *s, const sdt_sampler_config *cfg, float *x, int64_t n, float *scratch,
                    sdt_denoise_fn fn, void *user);

#endif
