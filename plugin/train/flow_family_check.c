/* flow_family_check.c - see flow_family_check.h. */
#include "train/flow_family_check.h"

#include <stddef.h>
#include <string.h>

#include "train/noise_schedule.h"

/* The first 1.9 rectified-flow option not at its default, or NULL. */
static const char *flow_option_set(const sdt_train_options *o)
{
    return o->timestep_sampling && o->timestep_sampling[0] ? "timestep_sampling"
           : o->flow_weighting && o->flow_weighting[0]     ? "flow_weighting"
           : o->logit_mean != 0.0                          ? "logit_mean"
           : o->logit_std != 1.0                           ? "logit_std"
           : o->mode_scale != 1.29                         ? "mode_scale"
           : o->flow_shift != 0.0                          ? "flow_shift"
           : o->guidance != 0.0                            ? "guidance"
           : o->t5_max_length != 0                         ? "t5_max_length"
                                                           : NULL;
}

/* The first DDPM-schedule option (or CLIP skip) not at its default, or NULL. */
static const char *unet_option_set(const sdt_train_options *o)
{
    return o->prediction_type != SDT_PREDICTION_AUTO || o->v_prediction ? "prediction_type"
           : o->zero_terminal_snr                                       ? "zero_terminal_snr"
           : o->min_snr_gamma != 0.0                                    ? "min_snr_gamma"
           : o->noise_offset != 0.0 || o->noise_offset_random_strength  ? "noise_offset"
           : o->timestep_min != 0                                       ? "timestep_min"
           : o->timestep_max != SDT_DDPM_STEPS - 1                      ? "timestep_max"
           : o->clip_skip > 1                                           ? "clip_skip"
                                                                        : NULL;
}

bool sdt_flow_family_check(const sdt_train_options *o, bool transformer, bool hypernetwork, const char *model,
                           const char *family, const char *field, sdt_error *error)
{
    if (!transformer) {
        const char *set = flow_option_set(o);
        if (!set) return true;
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s%s is set, but it is a rectified-flow option of SD3.5 and Flux.1 and %s is a UNet model "
                        "(%s) trained on its DDPM schedule: leave %s%s at its default",
                        field, set, model, family, field, set);
    }
    if (hypernetwork)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s (%s) is a transformer model, and no host applies A1111 hypernetworks to SD3.5/Flux "
                        "transformers (they hook a UNet's cross-attention): train an embedding alone for this model",
                        model, family);
    const char *set = unet_option_set(o);
    if (!set) return true;
    const char *instead =
        !strcmp(set, "clip_skip")
            ? "SD3.5 reads CLIP's penultimate layers and Flux.1 CLIP-L's pooled output, as their pipelines "
              "do: leave it at 1"
        : !strcmp(set, "prediction_type")
            ? "SD3.5 and Flux.1 predict the velocity (rectified flow): leave it AUTO"
            : "the rectified flow draws its timesteps with timestep_sampling, logit_mean, logit_std, mode_scale "
              "and flow_shift, and weighs the loss with flow_weighting: leave it at its default";
    return sdt_fail(error, SDT_ERR_VALIDATION,
                    "%s%s is set, but it is a UNet model's option and %s is a transformer model (%s): %s", field, set,
                    model, family, instead);
}
