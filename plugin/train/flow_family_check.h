/* flow_family_check.h - what a run may ask of a rectified-flow transformer family (SD3/SD3.5, Flux.1) and of a
 * UNet family, checked at prepare once the model is known: a hypernetwork, the DDPM schedule's options (prediction
 * type, zero terminal SNR, min-SNR gamma, noise offset, the timestep range) and CLIP skip are refused by name for
 * the transformers; ABI 1.9's rectified-flow options (timestep_sampling, flow_weighting, logit_mean, logit_std,
 * mode_scale, flow_shift, guidance, t5_max_length) are refused by name for the UNet families. Nothing is silently
 * ignored. */
#ifndef SDT_TRAIN_FLOW_FAMILY_CHECK_H
#define SDT_TRAIN_FLOW_FAMILY_CHECK_H

#include "sdt_error.h"

#include <stdbool.h>

#include "sdtrain.h"

/* o: the run's options (field: how sentences name them, "options->"); transformer: the model is SD3/Flux;
 * hypernetwork: a hypernetwork part trains; model, family: the model's path and what a person calls its family.
 * false + a VALIDATION sentence naming the option, the model and what to do. */
bool sdt_flow_family_check(const sdt_train_options *o, bool transformer, bool hypernetwork, const char *model,
                           const char *family, const char *field, sdt_error *error);

#endif
