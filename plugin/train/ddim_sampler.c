/* ddim_sampler.c - see ddim_sampler.h. */
#include "train/ddim_sampler.h"

#include <math.h>
#include <stddef.h>

bool sdt_ddim_steps_check(int steps, sdt_error *error)
{
    if (steps >= 1 && steps <= SDT_DDPM_STEPS) return true;
    return sdt_fail(error, SDT_ERR_VALIDATION,
                    "The preview sampler was asked for %d steps; it takes 1 to %d (the default is 20).", steps,
                    SDT_DDPM_STEPS);
}

int sdt_ddim_timestep(int steps, int i)
{
    if (steps < 1 || steps > SDT_DDPM_STEPS) return 0; /* no division by 0; callers check first */
    int ratio = SDT_DDPM_STEPS / steps;
    return (steps - 1 - i) * ratio + 1; /* steps_offset = 1 */
}

int sdt_ddim_sample(const sdt_noise_schedule *s, const sdt_ddim_config *cfg, float *x, int64_t n, float *scratch,
                    sdt_denoise_fn fn, void *user)
{
    if (cfg->steps < 1 || cfg->steps > SDT_DDPM_STEPS) return SDT_DDIM_BAD_STEPS;
    float *cond = scratch, *uncond = scratch + n, *eps = scratch + 2 * n;
    bool guided = cfg->cfg_scale != 1.0f;
    int ratio = SDT_DDPM_STEPS / cfg->steps;
    for (int i = 0; i < cfg->steps; i++) {
        int t = sdt_ddim_timestep(cfg->steps, i);
        int prev = t - ratio;
        int rc = fn(user, x, t, cond, guided ? uncond : NULL);
        if (rc) return rc;
        double a = s->alphas_cumprod[t];
        /* set_alpha_to_one = false: the final step lands on acp[0], not 1. */
        double ap = prev >= 0 ? s->alphas_cumprod[prev] : s->alphas_cumprod[0];
        double sa = sqrt(a), sb = sqrt(1.0 - a), sap = sqrt(ap), sbp = sqrt(1.0 - ap);
        for (int64_t k = 0; k < n; k++) {
            double out = guided ? uncond[k] + cfg->cfg_scale * (cond[k] - uncond[k]) : cond[k];
            double x0, e;
            if (cfg->v_prediction) {
                x0 = sa * x[k] - sb * out;
                e = sa * out + sb * x[k];
            } else {
                e = out;
                x0 = (x[k] - sb * e) / sa;
            }
            eps[k] = (float)e;
            x[k] = (float)(sap * x0 + sbp * e);
        }
    }
    return 0;
}
