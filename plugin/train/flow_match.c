/* flow_match.c - see flow_match.h. */
#include "train/flow_match.h"

#include <math.h>
#include <string.h>

#include "flow_math.h"
#include "train/rng.h"

static const char *const density_names[] = {"uniform", "logit_normal", "mode"};
static const char *const weighting_names[] = {"none", "sigma_sqrt", "cosmap"};

sdt_flow_timesteps sdt_flow_timesteps_sd3(void)
{
    return (sdt_flow_timesteps){.density = SDT_FLOW_DENSITY_LOGIT_NORMAL,
                                .logit_mean = 0.0,
                                .logit_std = 1.0,
                                .mode_scale = SDT_FLOW_MODE_SCALE,
                                .shift_kind = SDT_FLOW_SHIFT_CONSTANT,
                                .shift = SDT_FLOW_SD3_SHIFT,
                                .base_shift = SDT_FLOW_BASE_SHIFT,
                                .max_shift = SDT_FLOW_MAX_SHIFT};
}

sdt_flow_timesteps sdt_flow_timesteps_flux(void)
{
    sdt_flow_timesteps f = sdt_flow_timesteps_sd3();
    f.shift_kind = SDT_FLOW_SHIFT_RESOLUTION;
    f.shift = 1.0;
    return f;
}

static bool parse_name(const char *const *names, int count, const char *list, const char *name, const char *field,
                       int *out, sdt_error *error)
{
    if (!name || !name[0]) return true;
    for (int k = 0; k < count; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = k;
            return true;
        }
    return sdt_fail(error, SDT_ERR_VALIDATION, "%s is \"%s\"; it must be one of %s.", field, name, list);
}

bool sdt_flow_density_parse(const char *name, const char *field, sdt_flow_density *out, sdt_error *error)
{
    int k = (int)*out;
    if (!parse_name(density_names, 3, SDT_FLOW_DENSITY_NAMES, name, field, &k, error)) return false;
    *out = (sdt_flow_density)k;
    return true;
}

bool sdt_flow_weighting_parse(const char *name, const char *field, sdt_flow_weighting *out, sdt_error *error)
{
    int k = (int)*out;
    if (!parse_name(weighting_names, 3, SDT_FLOW_WEIGHTING_NAMES, name, field, &k, error)) return false;
    *out = (sdt_flow_weighting)k;
    return true;
}

const char *sdt_flow_density_name(sdt_flow_density d)
{
    return (unsigned)d < 3 ? density_names[d] : "?";
}

const char *sdt_flow_weighting_name(sdt_flow_weighting w)
{
    return (unsigned)w < 3 ? weighting_names[w] : "?";
}

bool sdt_flow_timesteps_check(const sdt_flow_timesteps *f, const char *field, sdt_error *error)
{
    if ((unsigned)f->density > SDT_FLOW_DENSITY_MODE)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s.density is %d; it must be one of " SDT_FLOW_DENSITY_NAMES ".",
                        field, (int)f->density);
    if (!isfinite(f->logit_mean) || !isfinite(f->logit_std) || f->logit_std <= 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: logit_mean %g and logit_std %g must be finite, logit_std above 0 (SD3's are 0 and 1).",
                        field, f->logit_mean, f->logit_std);
    /* mode's map 1 - u - s (cos^2(pi u/2) - 1 + u) falls from 1 to 0 only for -1 <= s <= 2/(pi - 2)
     * (its slope -1 - s + s (pi/2) sin(pi u) at u = 0 and u = 1/2); beyond, t leaves [0, 1]. */
    if (!isfinite(f->mode_scale) || f->mode_scale < -1.0 || f->mode_scale > 2.0 / (3.14159265358979323846 - 2.0))
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: mode_scale is %g; it must lie in [-1, 1.75] so t stays in [0, 1] (diffusers' default "
                        "is 1.29).",
                        field, f->mode_scale);
    if ((unsigned)f->shift_kind > SDT_FLOW_SHIFT_RESOLUTION)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s.shift_kind is %d; it must be none, constant or resolution.",
                        field, (int)f->shift_kind);
    if (f->shift_kind == SDT_FLOW_SHIFT_CONSTANT && (!isfinite(f->shift) || f->shift <= 0))
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: shift is %g; it must be above 0 (SD3.5's is 3).", field,
                        f->shift);
    if (f->shift_kind == SDT_FLOW_SHIFT_RESOLUTION && (!isfinite(f->base_shift) || !isfinite(f->max_shift)))
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: base_shift %g and max_shift %g must be finite numbers (Flux's are 0.5 and 1.15).", field,
                        f->base_shift, f->max_shift);
    return true;
}

double sdt_flow_density_value(const sdt_flow_timesteps *f, double u, double z)
{
    switch (f->density) {
        case SDT_FLOW_DENSITY_LOGIT_NORMAL:
            return 1.0 / (1.0 + exp(-(f->logit_mean + f->logit_std * z)));
        case SDT_FLOW_DENSITY_MODE: {
            double c = cos(3.14159265358979323846 * u / 2.0);
            return 1.0 - u - f->mode_scale * (c * c - 1.0 + u);
        }
        case SDT_FLOW_DENSITY_UNIFORM:
        default:
            return u;
    }
}

double sdt_flow_resolution_mu(const sdt_flow_timesteps *f, double image_seq_len)
{
    return sdt_flow_mu(image_seq_len, SDT_FLOW_BASE_SEQ_LEN, SDT_FLOW_MAX_SEQ_LEN, f->base_shift, f->max_shift);
}

double sdt_flow_shift(const sdt_flow_timesteps *f, double image_seq_len, double t)
{
    switch (f->shift_kind) {
        case SDT_FLOW_SHIFT_CONSTANT:
            return sdt_flow_shift_constant(t, f->shift);
        case SDT_FLOW_SHIFT_RESOLUTION:
            return sdt_flow_shift_exponential(t, sdt_flow_resolution_mu(f, image_seq_len));
        case SDT_FLOW_SHIFT_NONE:
        default:
            return t;
    }
}

double sdt_flow_draw_t(const sdt_flow_timesteps *f, double image_seq_len, uint64_t seed, uint64_t draw)
{
    /* Both draws of a sample use its two counters (2 draw, 2 draw + 1), as sdt_rng_normal_fill's
     * element `draw` does. u is a midpoint of 2^53 cells, in (0, 1) open: t is never exactly 0, where
     * sigma_sqrt's weight sigma^-2 would be infinite. */
    double u = ((double)(sdt_rng_bits(seed, SDT_RNG_TIMESTEP, 2 * draw) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    float z = 0;
    if (f->density == SDT_FLOW_DENSITY_LOGIT_NORMAL) sdt_rng_normal_fill(seed, SDT_RNG_TIMESTEP, draw, &z, 1);
    return sdt_flow_shift(f, image_seq_len, sdt_flow_density_value(f, u, (double)z));
}

void sdt_flow_noisy(double t, const float *x0, const float *noise, float *noisy, int64_t n)
{
    for (int64_t i = 0; i < n; i++) noisy[i] = sdt_flow_noisy_value((float)t, x0[i], noise[i]);
}

void sdt_flow_target(const float *x0, const float *noise, float *target, int64_t n)
{
    for (int64_t i = 0; i < n; i++) target[i] = sdt_flow_target_value(x0[i], noise[i]);
}

double sdt_flow_model_timestep(double t)
{
    return SDT_FLOW_TRAIN_TIMESTEPS * t;
}

double sdt_flow_loss_weight(sdt_flow_weighting w, double t)
{
    return sdt_flow_loss_weight_value((int)w, t);
}
