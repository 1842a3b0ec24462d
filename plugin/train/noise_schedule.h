/* noise_schedule.h - the DDPM forward process SD was trained with.
 *
 * LDM's "scaled linear" schedule: betas = linspace(sqrt(0.00085), sqrt(0.012), 1000)^2,
 * computed in float64 like ldm's register_schedule, alphas_cumprod kept as float64.
 * Training noises latents with it (q_sample) and builds the target: the noise
 * itself (epsilon prediction, SD 1.x) or the velocity (v-prediction, SD 2.x 768).
 */
#ifndef SDT_TRAIN_NOISE_SCHEDULE_H
#define SDT_TRAIN_NOISE_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#define SDT_DDPM_STEPS 1000

typedef struct sdt_noise_schedule {
    int steps;
    double alphas_cumprod[SDT_DDPM_STEPS];
} sdt_noise_schedule;

void sdt_noise_schedule_init(sdt_noise_schedule *s, double beta_start, double beta_end);
/* SD's defaults: 0.00085, 0.012. */
void sdt_noise_schedule_init_sd(sdt_noise_schedule *s);
/* Zero terminal SNR (Lin et al. 2023, "Common Diffusion Noise Schedules and Sample Steps are
 * Flawed", Algorithm 1): sqrt(acp) shifted so the last is 0 and scaled so the first is unchanged,
 * acp = its square. The last timestep is then pure noise; only v-prediction can learn it. */
void sdt_noise_schedule_rescale_zero_terminal_snr(sdt_noise_schedule *s);
/* The signal-to-noise ratio at t: acp[t] / (1 - acp[t]) (0 at a zero-terminal-SNR's last step). */
double sdt_noise_schedule_snr(const sdt_noise_schedule *s, int t);

/* noisy = sqrt(acp[t]) * x0 + sqrt(1 - acp[t]) * noise, over n elements. */
void sdt_q_sample(const sdt_noise_schedule *s, int t, const float *x0, const float *noise, float *noisy, int64_t n);
/* The training target: noise (epsilon) or sqrt(acp) * noise - sqrt(1 - acp) * x0 (v). */
void sdt_training_target(const sdt_noise_schedule *s, int t, bool v_prediction, const float *x0, const float *noise,
                         float *target, int64_t n);

#endif
