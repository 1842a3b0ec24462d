/* fallback.h - the one-shot NaN/Inf fallback policy as a pure state machine.
 *
 * The trainer reports every loss (and every scaler update that hit the minimum
 * scale); the machine answers with what to do, and never touches tensors:
 *  - finite loss: CONTINUE (and the consecutive count resets);
 *  - non-finite loss: SKIP the step and drop its gradients;
 *  - the first such event of a mixed-precision run (or the scale collapsing to
 *    the scaler's minimum): SWITCH_TO_FP32 - skip, upcast the compute to fp32,
 *    multiply the learning rate of every schedule segment from now on by
 *    lr_backoff; it fires at most once and records the step;
 *  - max_consecutive non-finite losses in a row: STOP with a diagnosis (the
 *    trainer saves the last good state and asks diagnosis.h for the sentence).
 * The state is a plain struct so it goes into the resume checkpoint as is.
 */
#ifndef SDT_CORE_FALLBACK_H
#define SDT_CORE_FALLBACK_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/core_status.h"

typedef struct sdt_fallback_config {
    bool mixed_precision; /* the run computes in fp16/bf16: the fp32 switch is possible */
    double lr_backoff;    /* 0.5; the lr multiplier once the fallback fired, in (0, 1] */
    int max_consecutive;  /* 5; non-finite losses in a row that stop the run */
} sdt_fallback_config;

sdt_fallback_config sdt_fallback_config_default(bool mixed_precision);
sdt_core_status sdt_fallback_config_validate(const sdt_fallback_config *cfg, sdt_error *error);

typedef enum sdt_fallback_action {
    SDT_FALLBACK_CONTINUE = 0,   /* apply the step as usual */
    SDT_FALLBACK_SKIP,           /* skip the step, zero the gradients */
    SDT_FALLBACK_SWITCH_TO_FP32, /* skip, zero the gradients, compute in fp32 from now on, lr *= lr_backoff */
    SDT_FALLBACK_STOP,           /* too many in a row: save the last good state and stop with a diagnosis */
} sdt_fallback_action;

typedef enum sdt_fallback_trigger {
    SDT_FALLBACK_TRIGGER_NONE = 0,
    SDT_FALLBACK_TRIGGER_NONFINITE_LOSS,
    SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE,
} sdt_fallback_trigger;

typedef struct sdt_fallback {
    sdt_fallback_config cfg;
    bool fired;            /* the fp32 switch happened (at most once) */
    int64_t fired_at_step; /* -1 until it fires */
    sdt_fallback_trigger fired_by;
    int64_t nonfinite_total; /* every non-finite loss seen, the firing one included */
    int consecutive;         /* non-finite losses in a row, up to the latest loss */
    bool stopped;
} sdt_fallback;

sdt_core_status sdt_fallback_init(sdt_fallback *fb, const sdt_fallback_config *cfg, sdt_error *error);
/* The loss of step `step` (0-based or 1-based, the caller's convention, used in messages). */
sdt_fallback_action sdt_fallback_on_loss(sdt_fallback *fb, int64_t step, double loss);
/* The scaler's update hit its minimum scale (sdt_scaler_update_info.at_min_scale). */
sdt_fallback_action sdt_fallback_on_scale_collapse(sdt_fallback *fb, int64_t step);
/* 1.0 before the fallback, lr_backoff after: multiply every scheduled lr by it. */
double sdt_fallback_lr_multiplier(const sdt_fallback *fb);
/* One sentence for the host's log about what the last action did and why. */
void sdt_fallback_describe(const sdt_fallback *fb, sdt_fallback_action action, int64_t step, char *msg,
                           size_t msg_size);

#endif
