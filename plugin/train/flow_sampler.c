/* flow_sampler.c - see flow_sampler.h. */
#include "train/flow_sampler.h"

bool sdt_flow_steps_check(int steps, sdt_error *error)
{
    if (steps >= 1 && steps <= SDT_FLOW_MAX_STEPS) return true;
    return sdt_fail(error, SDT_ERR_VALIDATION, "the flow sampler's step count is %d; it must be 1 to %d.", steps,
                    SDT_FLOW_MAX_STEPS);
}

void sdt_flow_sampler_sigmas(const sdt_flow_sampler_config *cfg, double *sigmas)
{
    int n = cfg->steps;
    /* numpy's linspace(start, end, n): start + i (end - start) / (n - 1), the last exactly end. */
    double start = 1.0, end = 1.0 / n;
    if (cfg->sd3_spacing) end = sdt_flow_shift(&cfg->shift, cfg->image_seq_len, 1.0 / SDT_FLOW_MAX_STEPS);
    for (int i = 0; i < n; i++) {
        double s = n == 1 ? start : i == n - 1 ? end : start + (double)i * (end - start) / (double)(n - 1);
        sigmas[i] = sdt_flow_shift(&cfg->shift, cfg->image_seq_len, s);
    }
    sigmas[n] = 0.0;
}

int sdt_flow_sample(const sdt_flow_sampler_config *cfg, float *x, int64_t n, float *scratch, sdt_flow_velocity_fn fn,
                    void *user)
{
    if (cfg->steps < 1 || cfg->steps > SDT_FLOW_MAX_STEPS) return SDT_FLOW_BAD_STEPS;
    double sigmas[SDT_FLOW_MAX_STEPS + 1];
    sdt_flow_sampler_sigmas(cfg, sigmas);
    bool guided = cfg->cfg_scale != 1.0f;
    float *cond = scratch, *uncond = scratch + n;
    for (int i = 0; i < cfg->steps; i++) {
        int rc = fn(user, x, sdt_flow_model_timestep(sigmas[i]), cfg->guidance, cond, guided ? uncond : NULL);
        if (rc) return rc;
        /* diffusers' step: prev_sample = sample + (sigma_next - sigma) * model_output, in float32. */
        float dt = (float)(sigmas[i + 1] - sigmas[i]);
        for (int64_t j = 0; j < n; j++) {
            float v = guided ? uncond[j] + cfg->cfg_scale * (cond[j] - uncond[j]) : cond[j];
            x[j] += dt * v;
        }
    }
    return 0;
}
