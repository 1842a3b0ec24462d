/* prediction_probe.h - whether an SD 2.x UNet predicts the noise (epsilon) or v, from
 * its output, since the weights cannot say it.
 *
 * The test A1111 uses (modules/sd_models_config.py, is_using_v_parameterization_for_sd2):
 * the UNet once on a constant latent x = 0.5 [1, 4, 8, 8] at t = 999 with a context of
 * 0.5 [1, 2, context_dim]; mean(UNet(x) - x) below -1 means v (an empirical test, used on
 * real checkpoints for years). At t = 999 the latent should be almost pure noise, so an
 * epsilon-model returns about its input (the mean difference stays near 0), while a v-model
 * (v = sqrt(a) eps - sqrt(1 - a) x0, a = 0.0047) takes the flat 0.5 field for image content
 * and returns about -x0, far below the input. The input is a constant on purpose: on random
 * noise an ideal v-model returns about 0 (its x0 and eps estimates cancel at t = 999), which
 * no threshold tells from an epsilon-model's errors.
 *
 * A1111 asks this of SD 2.x models only (OpenCLIP text encoder), never of inpainting or
 * depth models (their UNet takes more channels than it returns: epsilon). So does
 * sd_prediction_probe_applies.
 */
#ifndef SDT_MODELS_PREDICTION_PROBE_H
#define SDT_MODELS_PREDICTION_PROBE_H

#include <stdbool.h>

#include "sd_model.h"

/* mean(UNet(x) - x) below this: a v-model (A1111's threshold). */
#define SD_PREDICTION_PROBE_V_BELOW (-1.0)

/* The model is of SD 2.x's kind (its text encoder is OpenCLIP's, GELU) and its UNet
 * returns what it takes (not an inpainting or depth model). */
bool sd_prediction_probe_applies(const sd_config *cfg);

/* Runs the probe on a bound UNet (weights on be, activations in act_dtype): *mean_diff =
 * mean(UNet(x) - x), *v = *mean_diff < SD_PREDICTION_PROBE_V_BELOW. A non-finite output
 * is an error (NUMERICAL) naming the probe. */
bool sd_prediction_probe(sdt_unet *unet, sdt_backend *be, sdt_dtype act_dtype, double *mean_diff, bool *v,
                         sdt_error *error);

#endif
