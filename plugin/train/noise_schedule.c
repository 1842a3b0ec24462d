/* noise_schedule.c - see noise_schedule.h. */
#include "train/noise_schedule.h"

#include <math.h>

void sdt_noise_schedule_init(sdt_noise_schedule *s, double beta_start, double beta_end)
{
    s->steps = SDT_DDPM_STEPS;
    double a = sqrt(beta_start), b = sqrt(beta_end), acc = 1.0;
    for (int i = 0; i < SDT_DDPM_STEPS; i++) {
        double r = a + (b - a) * (double)i / (double)(SDT_DDPM_STEPS - 1);
        acc *= 1.0 - r * r;
        s->alphas_cumprod[i] = acc;
    }
}

void sdt_noise_schedule_init_sd(sdt_noise_schedule *s)
{
    sdt_noise_schedule_init(s, 0.00085, 0.012);
}

void sdt_noise_schedule_rescale_zero_terminal_snr(sdt_noise_schedule *s)
{
    double first = sqrt(s->alphas_cumprod[0]), last = sqrt(s->alphas_cumprod[s->steps - 1]);
    for (int i = 0; i < s->steps; i++) {
        double r = (sqrt(s->alphas_cumprod[i]) - last) * first / (first - last);
        s->alphas_cumprod[i] = r * r;
    }
    s->alphas_cumprod[s->steps - 1] = 0.0; /* exactly, whatever the rounding above */
}

double sdt_noise_schedule_snr(const sdt_noise_schedule *s, int t)
{
    return s->alphas_cumprod[t] / (1.0 - s->alphas_cumprod[t]);
}

void sdt_q_sample(const sdt_noise_schedule *s, int t, const float *x0, const float *noise, float *noisy, int64_t n)
{
    /* ldm keeps sqrt(acp) buffers in float32; computing the factors once in double then
     * rounding matches them. */
    float ca = (float)sqrt(s->alphas_cumprod[t]), cb = (float)sqrt(1.0 - s->alphas_cumprod[t]);
    for (int64_t i = 0; i < n; i++) noisy[i] = ca * x0[i] + cb * noise[i];
}

void sdt_training_target(const sdt_noise_schedule *s, int t, bool v_prediction, const float *x0, const float *noise,
                         float *target, int64_t n)
{
    if (!v_prediction) {
        for (int64_t i = 0; i < n; i++) target[i] = noise[i];
        return;
    }
    float ca = (float)sqrt(s->alphas_cumprod[t]), cb = (float)sqrt(1.0 - s->alphas_cumprod[t]);
    for (int64_t i = 0; i < n; i++) target[i] = ca * noise[i] - cb * x0[i];
}
