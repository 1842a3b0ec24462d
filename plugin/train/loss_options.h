/* loss_options.h - the loss and noise options of a training step (ABI 1.5), for every method:
 * the loss type (L2, L1, Huber), min-SNR-gamma weighting, the noise offset and its random
 * strength, the timestep range and zero-terminal-SNR. Every default draws and weighs exactly what
 * A1111 does. Each draw is a pure function of (seed, sample draw), like the rest of a step
 * (train/rng.h), so a resumed run repeats them. */
#ifndef SDT_TRAIN_LOSS_OPTIONS_H
#define SDT_TRAIN_LOSS_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"
#include "sdtrain.h"

typedef struct sdt_loss_options {
    sdt_loss_type type;
    float huber_delta;
    double min_snr_gamma;           /* 0: off */
    double noise_offset;            /* 0: off */
    bool noise_offset_random;       /* strength uniform in [0, noise_offset) per sample */
    int timestep_min, timestep_max; /* inclusive */
    bool zero_terminal_snr;
} sdt_loss_options;

/* The options' values from the (checked) shared options. */
void sdt_loss_options_from(sdt_loss_options *l, const sdt_train_options *o);

/* The timestep of sample `draw`: uniform in timestep_min..timestep_max. The full range draws
 * what A1111's uniform 0..999 draw does, number for number. */
int sdt_loss_timestep(const sdt_loss_options *l, uint64_t seed, uint64_t draw);

/* kohya's noise offset on one sample's noise [c, hw]: each channel += strength * N(0, 1), the
 * same value over H and W; strength is noise_offset, or uniform in [0, noise_offset) with the
 * random strength. Nothing happens when noise_offset is 0. */
void sdt_loss_offset_noise(const sdt_loss_options *l, uint64_t seed, uint64_t draw, float *noise, int c, int64_t hw);

/* The min-SNR-gamma weight of a sample at signal-to-noise ratio snr (Hang et al. 2023):
 * min(snr, gamma) / snr predicting the noise, min(snr, gamma) / (snr + 1) predicting v; 1 when
 * gamma is 0 (off). At snr 0 the epsilon form takes its limit, 1. */
double sdt_min_snr_weight(double snr, double gamma, bool v_prediction);

/* "l2", "l1", "huber". */
const char *sdt_loss_type_name(sdt_loss_type type);

/* Whether the loss needs a per-element weight: alpha as loss weight, or min-SNR-gamma. */
bool sdt_loss_options_weighted(const sdt_loss_options *l, bool alpha_weight);

/* The options against the loaded model: zero_terminal_snr needs a v-prediction model (an
 * epsilon model cannot predict the noise from pure noise at the last timestep). `prediction` is
 * the runtime's sentence of what the model predicts and why. */
bool sdt_loss_options_check_model(const sdt_loss_options *l, bool v_prediction, const char *model_path,
                                  const char *prediction, const char *prefix, sdt_error *error);

#endif
