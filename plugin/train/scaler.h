/* scaler.h - the dynamic loss scaler: torch.amp.GradScaler semantics, better errors.
 *
 * Exactly PyTorch (torch/amp/grad_scaler.py + _amp_update_scale_):
 *  - one scale per scaler (init 2^16, growth 2, backoff 0.5, interval 2000) and a
 *    growth tracker; per optimizer a stage READY -> UNSCALED -> STEPPED and a
 *    found_inf record;
 *  - unscale multiplies the grads by f32(1 / f64(scale)) in one fused backend pass
 *    that also detects inf/NaN; step skips only the optimizer whose own grads
 *    overflowed, leaving its parameters and AdamW state untouched;
 *  - update sums every record: any overflow gives ONE backoff and resets the
 *    tracker; growth_interval clean updates in a row grow the scale, never to
 *    inf (the tracker resets even when growth is suppressed at FLT_MAX);
 *    update clears every record (all optimizers back to READY);
 *  - a disabled scaler is the identity: scale_loss returns the loss, unscale and
 *    update do nothing, step is the optimizer's step, get_scale is 1.
 * Added (off by default, so the defaults are torch): Megatron-style hysteresis
 * (that many overflows before a backoff; refilled on growth) and a minimum
 * scale the backoff clamps at, reported so the NaN fallback can react;
 * validation of every setting; and each misuse as its own status code with a
 * sentence naming the optimizer, the cause and the fix.
 *
 * One scaler per optimizer by default. With config.shared, several optimizers
 * trained from one backward pass share the scale, exactly as several optimizers
 * share one torch GradScaler (each decides its own skip; one update per iteration).
 *
 * Per iteration: scale_loss (seed backward with get_scale), backward + note_backward,
 * optionally unscale + clip, step for each optimizer, update once.
 */
#ifndef SDT_CORE_SCALER_H
#define SDT_CORE_SCALER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "train/core_log.h"
#include "train/core_status.h"
#include "train/optimizer.h"

typedef struct sdt_scaler_config {
    bool enabled;            /* false: identity (fp32 and bf16 runs) */
    float init_scale;        /* 65536 */
    double growth_factor;    /* 2.0, must be > 1 */
    double backoff_factor;   /* 0.5, must be in (0, 1) */
    int64_t growth_interval; /* 2000, must be > 0 */
    int hysteresis;          /* 1 = torch; n > 1: the n-th overflow since the last growth backs off */
    float min_scale;         /* 0 = none (torch); else backoff clamps here */
    bool shared;             /* allow several optimizers (one backward pass, one scale) */
} sdt_scaler_config;

/* torch.amp.GradScaler() defaults, enabled, not shared. */
sdt_scaler_config sdt_scaler_config_default(void);
/* SDT_CORE_INVALID_CONFIG with a sentence naming the field, for an enabled config. */
sdt_core_status sdt_scaler_config_validate(const sdt_scaler_config *cfg, sdt_error *error);

typedef enum sdt_scaler_stage {
    SDT_SCALER_READY = 0,
    SDT_SCALER_UNSCALED = 1,
    SDT_SCALER_STEPPED = 2,
} sdt_scaler_stage;

typedef struct sdt_scaler sdt_scaler;

/* log may be NULL. NULL on failure (sentence in *error). */
sdt_scaler *sdt_scaler_create(sdt_backend *be, const sdt_scaler_config *cfg, sdt_core_log_fn log, void *log_user,
                              sdt_error *error);
void sdt_scaler_destroy(sdt_scaler *sc);

/* Takes ownership of opt's scaling (opt itself stays the caller's). Errors:
 * SDT_CORE_ALREADY_OWNED (another scaler has it), SDT_CORE_INVALID_CONFIG (a
 * second optimizer without config.shared), SDT_CORE_SHARED_PARAM (a parameter
 * of opt also belongs to an optimizer this scaler has). */
sdt_core_status sdt_scaler_attach(sdt_scaler *sc, sdt_optimizer *opt, sdt_error *error);
/* Prepare-time checks, before any work: an optimizer attached and each has a trainable parameter. */
sdt_core_status sdt_scaler_prepare(const sdt_scaler *sc, sdt_error *error);

/* torch scaler.scale(loss): *scaled = f32(loss) * scale (identity when disabled).
 * batch_size <= 0 is SDT_CORE_EMPTY_BATCH. The backward seed is get_scale(). */
sdt_core_status sdt_scaler_scale_loss(sdt_scaler *sc, double loss, int batch_size, double *scaled, sdt_error *error);
/* Current scale (1.0 when disabled). */
float sdt_scaler_get_scale(const sdt_scaler *sc);
int64_t sdt_scaler_growth_tracker(const sdt_scaler *sc);
bool sdt_scaler_enabled(const sdt_scaler *sc);

/* torch scaler.unscale_(opt): checks, fused unscale + inf check, stage UNSCALED. */
sdt_core_status sdt_scaler_unscale(sdt_scaler *sc, sdt_optimizer *opt, sdt_error *error);
/* torch scaler.step(opt): unscales if READY, then steps unless this optimizer's
 * grads had an inf/NaN. *stepped (may be NULL) says whether the step was taken. */
sdt_core_status sdt_scaler_step(sdt_scaler *sc, sdt_optimizer *opt, bool *stepped, sdt_error *error);

typedef struct sdt_scaler_update_info {
    float scale_before;
    float scale_after;
    bool found_inf; /* some optimizer overflowed this iteration */
    bool backed_off;
    bool grew;
    bool at_min_scale; /* an overflow with the scale clamped at (or already at) min_scale:
                         * fp16 cannot hold these gradients; the NaN fallback switches to fp32 */
} sdt_scaler_update_info;

/* torch scaler.update(): one backoff or growth step from every record, then all
 * optimizers READY. info may be NULL. SDT_CORE_UPDATE_WITHOUT_RECORDS when no
 * optimizer was unscaled or stepped; SDT_CORE_SCALE_UNDERFLOW (scale unchanged)
 * when a backoff would leave a scale whose reciprocal is not a finite fp32. */
sdt_core_status sdt_scaler_update(sdt_scaler *sc, sdt_scaler_update_info *info, sdt_error *error);
/* torch scaler.update(new_scale): sets the scale, tracker unchanged, records cleared. */
sdt_core_status sdt_scaler_update_to(sdt_scaler *sc, double new_scale, sdt_error *error);

/* Per-optimizer record of the current iteration (READY / false for an optimizer not attached). */
sdt_scaler_stage sdt_scaler_stage_of(const sdt_scaler *sc, const sdt_optimizer *opt);
bool sdt_scaler_found_inf(const sdt_scaler *sc, const sdt_optimizer *opt);

/* torch state_dict(): scale, growth_factor, backoff_factor, growth_interval,
 * _growth_tracker; plus the hysteresis/min-scale extras. enabled = false is the
 * empty dict of a disabled scaler. */
typedef struct sdt_scaler_state {
    bool enabled;
    float scale;
    double growth_factor;
    double backoff_factor;
    int64_t growth_interval;
    int64_t growth_tracker;
    int hysteresis;
    int hysteresis_tracker;
    float min_scale;
} sdt_scaler_state;

void sdt_scaler_get_state(const sdt_scaler *sc, sdt_scaler_state *state);
/* torch load_state_dict(): a no-op on a disabled scaler; SDT_CORE_BAD_STATE for
 * the state of a disabled scaler or values that fail validation. */
sdt_core_status sdt_scaler_set_state(sdt_scaler *sc, const sdt_scaler_state *state, sdt_error *error);

#endif
