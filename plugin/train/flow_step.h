/* flow_step.h - the rectified-flow objective of one training sample as the job draws it (SD3/SD3.5, Flux.1):
 * ABI 1.9's options over the family's defaults, then per sample t (a pure function of seed and draw, so a resumed
 * run repeats it), x_t, the velocity target, the loss weight and the transformer's timestep. It is to the flow
 * families what noise_schedule.h's q_sample and target are to the UNet families in train_job_step.c; the math is
 * flow_match.h's. */
#ifndef SDT_TRAIN_FLOW_STEP_H
#define SDT_TRAIN_FLOW_STEP_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "sdtrain.h"
#include "train/flow_match.h"

typedef struct sdt_flow_objective {
    sdt_flow_timesteps timesteps;
    sdt_flow_weighting weighting;
} sdt_flow_objective;

/* The family's defaults (SD3: logit_normal(0, 1), constant shift 3.0; Flux: logit_normal(0, 1), the resolution
 * shift), overridden by what o sets: timestep_sampling, logit_mean, logit_std, mode_scale, flow_shift (> 0: a
 * constant shift, for either family), flow_weighting. A name that is not one is a VALIDATION sentence naming
 * field + the option ("options->timestep_sampling"). */
bool sdt_flow_objective_from_options(const sdt_train_options *o, bool flux, const char *field, sdt_flow_objective *out,
                                     sdt_error *error);

/* One sample of n = C h w latent values (h, w the latent's sides; Flux's shift reads (h/2)(w/2) image tokens):
 * t drawn for (seed, draw), noisy = (1 - t) x0 + t noise, target = noise - x0, weight[i] *= the weighting at t
 * (weight NULL: not kept), *timestep = 1000 t. Returns t. */
double sdt_flow_objective_sample(const sdt_flow_objective *f, uint64_t seed, uint64_t draw, int h, int w,
                                 const float *x0, const float *noise, float *noisy, float *target, float *weight,
                                 int64_t n, float *timestep);

/* One line for the log: "rectified flow: logit_normal(0, 1) timesteps, constant shift 3, weighting none". */
void sdt_flow_objective_describe(const sdt_flow_objective *f, char *buf, size_t size);

#endif
