/* flow_sampler.h - the flow-matching Euler sampler of SD3/SD3.5 and Flux.1 previews (next to
 * sampler.h's DDPM samplers), as diffusers' FlowMatchEulerDiscreteScheduler walks it:
 *   sigmas: linspace(1, 1/N, N) as FluxPipeline passes them, or (sd3_spacing) what
 *           StableDiffusion3Pipeline gets from set_timesteps(N) without sigmas: linspace from 1 down
 *           to the scheduler's own shifted 1/1000; then the family's shift (SD3 constant, Flux
 *           resolution mu: flow_match.h), then a final 0;
 *   step:   x += (sigma_next - sigma) v, v the model's velocity at timestep 1000 sigma;
 *   guidance: classifier-free, v = v_uncond + cfg (v_cond - v_uncond) (one call when cfg is 1);
 *           Flux dev's distilled guidance is a model input, passed through to the callback.
 * The model is reached through a callback, so the sampler is tested on analytic flows. */
#ifndef SDT_TRAIN_FLOW_SAMPLER_H
#define SDT_TRAIN_FLOW_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"
#include "train/flow_match.h"

/* The velocity at x for model timestep `timestep` (1000 sigma) and distilled guidance `guidance`
 * (Flux dev's; 0 where the model takes none), conditioned (out_cond) and unconditioned (out_uncond,
 * NULL when cfg is off). Returns 0 on success, else the sampler stops and returns it. */
typedef int (*sdt_flow_velocity_fn)(void *user, const float *x, double timestep, double guidance, float *out_cond,
                                    float *out_uncond);

typedef struct sdt_flow_sampler_config {
    int steps;       /* 1..1000 */
    float cfg_scale; /* 1 = no classifier-free guidance (one call per step) */
    float guidance;  /* Flux dev's distilled guidance (3.5 in FluxPipeline), passed through */
    /* The shift: kind NONE, CONSTANT (shift) or RESOLUTION (base_shift, max_shift); the density fields are unused. */
    sdt_flow_timesteps shift;
    double image_seq_len; /* the image token count (resolution shift only) */
    bool sd3_spacing; /* linspace(1, shifted 1/1000) then shifted again, as set_timesteps(N) does (SD3's previews) */
} sdt_flow_sampler_config;

/* sdt_flow_sample's answer to steps outside 1..1000 (nothing sampled). */
#define SDT_FLOW_BAD_STEPS (-1)
#define SDT_FLOW_MAX_STEPS 1000

/* steps in 1..SDT_FLOW_MAX_STEPS, else false + a VALIDATION sentence naming the count and the range. */
bool sdt_flow_steps_check(int steps, sdt_error *error);
/* The steps + 1 sigmas the sampler walks, from (about) 1 down to a final 0. */
void sdt_flow_sampler_sigmas(const sdt_flow_sampler_config *cfg, double *sigmas);
/* x holds unit normal noise on entry (the latents at sigma 1) and the sampled latents on return.
 * scratch needs 2 n floats. Returns SDT_FLOW_BAD_STEPS, the callback's failure, or 0. */
int sdt_flow_sample(const sdt_flow_sampler_config *cfg, float *x, int64_t n, float *scratch, sdt_flow_velocity_fn fn,
                    void *user);

#endif
