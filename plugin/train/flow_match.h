/* flow_match.h - rectified flow, the objective SD3/SD3.5 and Flux.1 were trained with (next to
 * noise_schedule.h, the DDPM one of SD 1.x/2.x/XL).
 *
 * t in [0, 1] (diffusers' "sigma"): x_t = (1 - t) x0 + t noise, target noise - x0 (the velocity),
 * model input timestep 1000 t. The per-element math is kernels/flow_math.h (one home for CPU and
 * CUDA); this file draws t and applies it to whole latents on the host.
 *
 * Drawing t: a density as diffusers' compute_density_for_timestep_sampling names them
 * (training_utils.py; SD3 paper, Esser et al. 2024, section 3.1):
 *   uniform       u ~ U(0, 1)
 *   logit_normal  sigmoid(logit_mean + logit_std z), z ~ N(0, 1)  (SD3's lognorm(0, 1))
 *   mode          1 - u - mode_scale (cos^2(pi u / 2) - 1 + u)     (diffusers' default scale 1.29)
 * then a shift: none; constant (SD3's shift, t' = shift t / (1 + (shift - 1) t), SD3.5 uses 3.0;
 * kohya's --timestep_sampling shift with --discrete_flow_shift); or resolution (Flux:
 * mu = calculate_shift(image tokens), t' = e^mu / (e^mu + 1/t - 1); kohya's flux_shift). diffusers'
 * scripts round t to one of the scheduler's 1000 timesteps; t stays continuous here, as kohya's do.
 * Every draw is a pure function of (seed, draw) on SDT_RNG_TIMESTEP: a resumed run repeats it. */
#ifndef SDT_TRAIN_FLOW_MATCH_H
#define SDT_TRAIN_FLOW_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"

typedef enum sdt_flow_density {
    SDT_FLOW_DENSITY_UNIFORM = 0,
    SDT_FLOW_DENSITY_LOGIT_NORMAL = 1,
    SDT_FLOW_DENSITY_MODE = 2,
} sdt_flow_density;
#define SDT_FLOW_DENSITY_NAMES "uniform, logit_normal or mode"

typedef enum sdt_flow_shift_kind {
    SDT_FLOW_SHIFT_NONE = 0,
    SDT_FLOW_SHIFT_CONSTANT = 1,   /* SD3's */
    SDT_FLOW_SHIFT_RESOLUTION = 2, /* Flux's */
} sdt_flow_shift_kind;

/* The values kernels/flow_math.h's sdt_flow_loss_weight_value takes. */
typedef enum sdt_flow_weighting {
    SDT_FLOW_WEIGHT_NONE = 0,
    SDT_FLOW_WEIGHT_SIGMA_SQRT = 1,
    SDT_FLOW_WEIGHT_COSMAP = 2,
} sdt_flow_weighting;
#define SDT_FLOW_WEIGHTING_NAMES "none, sigma_sqrt or cosmap"

/* Flux's resolution shift: mu from (256 tokens, 0.5) to (4096 tokens, 1.15), diffusers'
 * FluxPipeline / scheduler config base_image_seq_len, max_image_seq_len, base_shift, max_shift. */
#define SDT_FLOW_BASE_SEQ_LEN 256.0
#define SDT_FLOW_MAX_SEQ_LEN 4096.0
#define SDT_FLOW_BASE_SHIFT 0.5
#define SDT_FLOW_MAX_SHIFT 1.15
#define SDT_FLOW_SD3_SHIFT 3.0   /* SD3/SD3.5's scheduler_config.json shift */
#define SDT_FLOW_MODE_SCALE 1.29 /* diffusers' --mode_scale default */

/* How t is drawn and shifted. */
typedef struct sdt_flow_timesteps {
    sdt_flow_density density;
    double logit_mean, logit_std; /* logit_normal */
    double mode_scale;            /* mode */
    sdt_flow_shift_kind shift_kind;
    double shift;                 /* constant: > 0 */
    double base_shift, max_shift; /* resolution: mu at 256 and at 4096 image tokens */
} sdt_flow_timesteps;

/* SD3/SD3.5: logit_normal(0, 1), constant shift 3.0. */
sdt_flow_timesteps sdt_flow_timesteps_sd3(void);
/* Flux.1: logit_normal(0, 1), resolution shift 0.5..1.15 (kohya's flux_shift with sigmoid_scale 1). */
sdt_flow_timesteps sdt_flow_timesteps_flux(void);

/* name NULL or "" keeps the default given in *out; unknown is false + a VALIDATION sentence naming
 * `field` and the names there are. */
bool sdt_flow_density_parse(const char *name, const char *field, sdt_flow_density *out, sdt_error *error);
bool sdt_flow_weighting_parse(const char *name, const char *field, sdt_flow_weighting *out, sdt_error *error);
const char *sdt_flow_density_name(sdt_flow_density d);
const char *sdt_flow_weighting_name(sdt_flow_weighting w);
/* Values in range (logit_std > 0, shift > 0, finite numbers), else false + a sentence naming `field`'s member. */
bool sdt_flow_timesteps_check(const sdt_flow_timesteps *f, const char *field, sdt_error *error);

/* The density's t from its inputs: u in (0, 1) (uniform, mode) or z (logit_normal). */
double sdt_flow_density_value(const sdt_flow_timesteps *f, double u, double z);
/* The shift applied to t; image_seq_len is the transformer's image token count (Flux: (h/2)(w/2)
 * of the latents), used by the resolution shift only. */
double sdt_flow_shift(const sdt_flow_timesteps *f, double image_seq_len, double t);
/* Flux's mu for an image token count with this config's base_shift and max_shift. */
double sdt_flow_resolution_mu(const sdt_flow_timesteps *f, double image_seq_len);
/* The t of sample `draw`: density then shift; in (0, 1). */
double sdt_flow_draw_t(const sdt_flow_timesteps *f, double image_seq_len, uint64_t seed, uint64_t draw);

/* noisy = (1 - t) x0 + t noise over n elements. */
void sdt_flow_noisy(double t, const float *x0, const float *noise, float *noisy, int64_t n);
/* target = noise - x0. */
void sdt_flow_target(const float *x0, const float *noise, float *target, int64_t n);
/* The model input timestep of t: 1000 t. */
double sdt_flow_model_timestep(double t);
/* The loss weight of a sample at t (diffusers' compute_loss_weighting_for_sd3). */
double sdt_flow_loss_weight(sdt_flow_weighting w, double t);

#endif
