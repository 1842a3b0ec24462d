/* ddim_sampler.h - deterministic DDIM (eta = 0) with classifier-free guidance,
 * for the preview images drawn during training.
 *
 * Timesteps follow diffusers' DDIMScheduler as SD configures it: "leading"
 * spacing, steps_offset 1, set_alpha_to_one false. The model is reached through
 * a callback so the sampler knows nothing of UNets or backends.
 */
#ifndef SDT_TRAIN_DDIM_SAMPLER_H
#define SDT_TRAIN_DDIM_SAMPLER_H

#include <stdbool.h>

#include "sdt_error.h"
#include "train/noise_schedule.h"

/* Computes the model output (epsilon or v, as the model predicts) for latents x at
 * timestep t (whole for DDIM, fractional for the k-samplers of sampler.h), conditioned
 * (out_cond) and unconditioned (out_uncond; NULL when guidance is off). Returns 0 on success. */
typedef int (*sdt_denoise_fn)(void *user, const float *x, double timestep, float *out_cond, float *out_uncond);

typedef struct sdt_ddim_config {
    int steps;       /* 1..1000 */
    float cfg_scale; /* 1 = no guidance (one model call per step) */
    bool v_prediction;
} sdt_ddim_config;

/* sdt_ddim_sample's answer to steps outside 1..SDT_DDPM_STEPS (nothing sampled). */
#define SDT_DDIM_BAD_STEPS (-1)

/* steps in 1..SDT_DDPM_STEPS, else false + a VALIDATION sentence naming the count and the range. */
bool sdt_ddim_steps_check(int steps, sdt_error *error);
/* The i-th timestep of a run of `steps` (i = 0 is the noisiest). */
int sdt_ddim_timestep(int steps, int i);
/* x holds the initial noise on entry and the sampled latents on return.
 * scratch needs 3 * n floats. Returns SDT_DDIM_BAD_STEPS for steps outside 1..SDT_DDPM_STEPS
 * (sdt_ddim_steps_check says why), the callback's failure, or 0. */
int sdt_ddim_sample(const sdt_noise_schedule *s, const sdt_ddim_config *cfg, float *x, int64_t n, float *scratch,
                    sdt_denoise_fn fn, void *user);

#endif
