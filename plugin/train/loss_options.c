/* loss_options.c - see loss_options.h. */
#include "train/loss_options.h"

#include <math.h>

#include "train/noise_schedule.h"
#include "train/rng.h"

void sdt_loss_options_from(sdt_loss_options *l, const sdt_train_options *o)
{
    l->type = (sdt_loss_type)o->loss_type;
    l->huber_delta = (float)o->huber_delta;
    l->min_snr_gamma = o->min_snr_gamma;
    l->noise_offset = o->noise_offset;
    l->noise_offset_random = o->noise_offset_random_strength;
    l->timestep_min = (int)o->timestep_min;
    l->timestep_max = (int)o->timestep_max;
    l->zero_terminal_snr = o->zero_terminal_snr;
}

int sdt_loss_timestep(const sdt_loss_options *l, uint64_t seed, uint64_t draw)
{
    uint64_t span = (uint64_t)(l->timestep_max - l->timestep_min + 1);
    return l->timestep_min + (int)sdt_rng_below(seed, SDT_RNG_TIMESTEP, draw, span);
}

void sdt_loss_offset_noise(const sdt_loss_options *l, uint64_t seed, uint64_t draw, float *noise, int c, int64_t hw)
{
    if (l->noise_offset == 0.0) return;
    double strength = l->noise_offset;
    if (l->noise_offset_random) strength *= sdt_rng_uniform(seed, SDT_RNG_NOISE_OFFSET_STRENGTH, draw);
    for (int ch = 0; ch < c; ch++) {
        float offset;
        sdt_rng_normal_fill(seed, SDT_RNG_NOISE_OFFSET, draw * (uint64_t)c + (uint64_t)ch, &offset, 1);
        float add = (float)(strength * (double)offset);
        float *plane = noise + (int64_t)ch * hw;
        for (int64_t i = 0; i < hw; i++) plane[i] += add;
    }
}

double sdt_min_snr_weight(double snr, double gamma, bool v_prediction)
{
    if (gamma <= 0.0) return 1.0;
    double clipped = snr < gamma ? snr : gamma;
    if (v_prediction) return clipped / (snr + 1.0);
    return snr > 0.0 ? clipped / snr : 1.0;
}

bool sdt_loss_options_check_model(const sdt_loss_options *l, bool v_prediction, const char *model_path,
                                  const char *prediction, const char *prefix, sdt_error *error)
{
    if (!l->zero_terminal_snr || v_prediction) return true;
    return sdt_fail(
        error, SDT_ERR_VALIDATION,
        "%szero_terminal_snr is on, but it is for v-prediction models and %s: %s, and at "
        "zero terminal SNR the last timestep is pure noise, from which an epsilon model cannot learn anything; "
        "turn it off for this model, or train a v-prediction model (SD 2.x 768-v) with it.",
        prefix, model_path ? model_path : "the model", prediction);
}

const char *sdt_loss_type_name(sdt_loss_type type)
{
    return type == SDT_LOSS_L1 ? "l1" : type == SDT_LOSS_HUBER ? "huber" : "l2";
}

bool sdt_loss_options_weighted(const sdt_loss_options *l, bool alpha_weight)
{
    return alpha_weight || l->min_snr_gamma > 0.0;
}
