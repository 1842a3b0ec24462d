/* ema.h - the exponential moving average of trained values (--ema DECAY, --ema-every N):
 *
 *   average <- decay * average + (1 - decay) * value      every N optimizer steps,
 *
 * started from the values a run begins with, one f32 block per parameter group on the host
 * (an embedding's vectors, a hypernetwork's weights: small next to the model). Each element is
 * blended in double and rounded once, so the average does not drift by f32 rounding over a long
 * run. This module owns the average of a run: it starts it from a step engine's groups, updates it,
 * and swaps it in and out of the groups' device values; the job writes it beside the result
 * (train_job_save.c), keeps it in the resume state (train_job_state.c) and shows it in previews
 * when asked. */
#ifndef SDT_TRAIN_EMA_H
#define SDT_TRAIN_EMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdt_error.h"
#include "host/host_log.h"
#include "safetensors.h"
#include "train/step_engine.h"

#define SDT_EMA_MAX_GROUPS 4

typedef struct sdt_ema {
    double decay;  /* 0: off */
    int64_t every; /* update every N steps */
    int n_groups;
    float *values[SDT_EMA_MAX_GROUPS]; /* each group's average, in the group's parameter order */
    size_t count[SDT_EMA_MAX_GROUPS];
    bool result;   /* ema_result: the trained files hold the average */
    bool previews; /* ema_previews: previews show the average */
} sdt_ema;

/* average[i] = decay * average[i] + (1 - decay) * values[i], in double, rounded to f32. */
void sdt_ema_blend(float *average, const float *values, size_t n, double decay);
/* true when the step just finished (1-based count) updates the average. */
bool sdt_ema_due(const sdt_ema *e, int64_t step);
void sdt_ema_free(sdt_ema *e);

/* Started from the groups' values now (a resume replaces it with the state's); nothing when off. */
bool sdt_ema_start(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, sdt_error *error);
/* After the step just finished (1-based): blended with the groups' values when due. */
bool sdt_ema_update(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, int64_t step, sdt_error *error);
/* Puts the average's values on the device (the trained ones kept on the host in kept[group]) and back. */
bool sdt_ema_swap_in(const sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, float **kept, sdt_error *error);
bool sdt_ema_swap_out(const sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, float **kept, sdt_error *error);
/* <stem>-ema<ext> of an output path (malloc'd): where the average goes beside the result. */
char *sdt_ema_path(const char *output_path);
/* The average in the resume state: one f32 tensor per group, named by sdt_ema_state_key
 * ("ema.<group>"); restored from a state st at path (recorded: the state's ema_decay text, NULL
 * when its run had none: a group without its tensor then starts from the resumed values). */
#define SDT_EMA_STATE_KEY_MAX 160
void sdt_ema_state_key(const sdt_step_engine *engine, int group, char *out, size_t size);
bool sdt_ema_restore(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, const sdt_safetensors *st,
                     const char *recorded, const char *path, const sdt_host_callbacks *host, sdt_error *error);

#endif
