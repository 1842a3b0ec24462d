/* flow_step.c - see flow_step.h. */
#include "train/flow_step.h"

#include <stdio.h>

#include "c_numeric.h"

bool sdt_flow_objective_from_options(const sdt_train_options *o, bool flux, const char *field, sdt_flow_objective *out,
                                     sdt_error *error)
{
    sdt_flow_objective f = {.timesteps = flux ? sdt_flow_timesteps_flux() : sdt_flow_timesteps_sd3(),
                            .weighting = SDT_FLOW_WEIGHT_NONE};
    char name[96];
    snprintf(name, sizeof name, "%stimestep_sampling", field);
    if (!sdt_flow_density_parse(o->timestep_sampling, name, &f.timesteps.density, error)) return false;
    snprintf(name, sizeof name, "%sflow_weighting", field);
    if (!sdt_flow_weighting_parse(o->flow_weighting, name, &f.weighting, error)) return false;
    f.timesteps.logit_mean = o->logit_mean;
    f.timesteps.logit_std = o->logit_std;
    f.timesteps.mode_scale = o->mode_scale;
    if (o->flow_shift > 0.0) { /* the user's constant shift replaces the family's (kohya's discrete_flow_shift) */
        f.timesteps.shift_kind = SDT_FLOW_SHIFT_CONSTANT;
        f.timesteps.shift = o->flow_shift;
    }
    if (!sdt_flow_timesteps_check(&f.timesteps, "the rectified-flow options", error)) return false;
    *out = f;
    return true;
}

double sdt_flow_objective_sample(const sdt_flow_objective *f, uint64_t seed, uint64_t draw, int h, int w,
                                 const float *x0, const float *noise, float *noisy, float *target, float *weight,
                                 int64_t n, float *timestep)
{
    double image_tokens = (double)(h / 2) * (double)(w / 2); /* the transformers' 2 x 2 patches */
    double t = sdt_flow_draw_t(&f->timesteps, image_tokens, seed, draw);
    sdt_flow_noisy(t, x0, noise, noisy, n);
    sdt_flow_target(x0, noise, target, n);
    if (weight && f->weighting != SDT_FLOW_WEIGHT_NONE) {
        float lw = (float)sdt_flow_loss_weight(f->weighting, t);
        for (int64_t i = 0; i < n; i++) weight[i] *= lw;
    }
    *timestep = (float)sdt_flow_model_timestep(t);
    return t;
}

void sdt_flow_objective_describe(const sdt_flow_objective *f, char *buf, size_t size)
{
    const sdt_flow_timesteps *t = &f->timesteps;
    char density[96], shift[96];
    if (t->density == SDT_FLOW_DENSITY_LOGIT_NORMAL)
        sdt_c_snprintf(density, sizeof density, "logit_normal(%g, %g)", t->logit_mean, t->logit_std);
    else if (t->density == SDT_FLOW_DENSITY_MODE)
        sdt_c_snprintf(density, sizeof density, "mode(scale %g)", t->mode_scale);
    else
        snprintf(density, sizeof density, "uniform");
    if (t->shift_kind == SDT_FLOW_SHIFT_CONSTANT)
        sdt_c_snprintf(shift, sizeof shift, "constant shift %g", t->shift);
    else if (t->shift_kind == SDT_FLOW_SHIFT_RESOLUTION)
        sdt_c_snprintf(shift, sizeof shift, "resolution shift (mu %g at 256 to %g at 4096 image tokens)", t->base_shift,
                       t->max_shift);
    else
        snprintf(shift, sizeof shift, "no shift");
    snprintf(buf, size, "rectified flow: %s timesteps, %s, loss weighting %s", density, shift,
             sdt_flow_weighting_name(f->weighting));
}
