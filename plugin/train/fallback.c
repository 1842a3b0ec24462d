/* fallback.c - the NaN/Inf fallback state machine (see fallback.h). */
#include "train/fallback.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "c_numeric.h"

sdt_fallback_config sdt_fallback_config_default(bool mixed_precision)
{
    sdt_fallback_config cfg = {.mixed_precision = mixed_precision, .lr_backoff = 0.5, .max_consecutive = 5};
    return cfg;
}

sdt_core_status sdt_fallback_config_validate(const sdt_fallback_config *cfg, sdt_error *error)
{
    if (!(cfg->lr_backoff > 0.0 && cfg->lr_backoff <= 1.0))
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "NaN fallback: lr_backoff %g must be in (0, 1] (the learning rate is multiplied by it); use 0.5.",
            cfg->lr_backoff);
    if (cfg->max_consecutive < 1)
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "NaN fallback: max_consecutive %d must be >= 1 (non-finite losses in a row before the run stops); use 5.",
            cfg->max_consecutive);
    return SDT_CORE_OK;
}

sdt_core_status sdt_fallback_init(sdt_fallback *fb, const sdt_fallback_config *cfg, sdt_error *error)
{
    sdt_core_status st = sdt_fallback_config_validate(cfg, error);
    if (st != SDT_CORE_OK) return st;
    memset(fb, 0, sizeof *fb);
    fb->cfg = *cfg;
    fb->fired_at_step = -1;
    return SDT_CORE_OK;
}

/* The one-shot switch; false when it is not available (fp32 run) or already used. */
static bool try_fire(sdt_fallback *fb, int64_t step, sdt_fallback_trigger trigger)
{
    if (!fb->cfg.mixed_precision || fb->fired) return false;
    fb->fired = true;
    fb->fired_at_step = step;
    fb->fired_by = trigger;
    return true;
}

sdt_fallback_action sdt_fallback_on_loss(sdt_fallback *fb, int64_t step, double loss)
{
    if (fb->stopped) return SDT_FALLBACK_STOP;
    if (isfinite(loss)) {
        fb->consecutive = 0;
        return SDT_FALLBACK_CONTINUE;
    }
    fb->nonfinite_total++;
    fb->consecutive++;
    if (try_fire(fb, step, SDT_FALLBACK_TRIGGER_NONFINITE_LOSS)) return SDT_FALLBACK_SWITCH_TO_FP32;
    if (fb->consecutive >= fb->cfg.max_consecutive) {
        fb->stopped = true;
        return SDT_FALLBACK_STOP;
    }
    return SDT_FALLBACK_SKIP;
}

sdt_fallback_action sdt_fallback_on_scale_collapse(sdt_fallback *fb, int64_t step)
{
    if (fb->stopped) return SDT_FALLBACK_STOP;
    /* The scaler already skipped the step; only the precision switch is new. */
    return try_fire(fb, step, SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE) ? SDT_FALLBACK_SWITCH_TO_FP32
                                                                   : SDT_FALLBACK_CONTINUE;
}

double sdt_fallback_lr_multiplier(const sdt_fallback *fb)
{
    return fb->fired ? fb->cfg.lr_backoff : 1.0;
}

void sdt_fallback_describe(const sdt_fallback *fb, sdt_fallback_action action, int64_t step, char *msg, size_t n)
{
    switch (action) {
        case SDT_FALLBACK_CONTINUE:
            sdt_c_snprintf(msg, n, "Step %lld: loss is finite; training continues.", (long long)step);
            break;
        case SDT_FALLBACK_SKIP:
            sdt_c_snprintf(
                msg, n,
                "Step %lld: the loss is not finite; the step was skipped and its gradients dropped (%d in a row, "
                "%lld in total; the run stops after %d in a row).",
                (long long)step, fb->consecutive, (long long)fb->nonfinite_total, fb->cfg.max_consecutive);
            break;
        case SDT_FALLBACK_SWITCH_TO_FP32:
            sdt_c_snprintf(
                msg, n,
                "Step %lld: %s; the step was skipped, compute switches to fp32 for the rest of the run and the "
                "learning rate is multiplied by %g from now on (this fallback happens once and is recorded in the "
                "metrics and the saved metadata).",
                (long long)step,
                fb->fired_by == SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE
                    ? "the fp16 loss scale collapsed to its minimum, so fp16 cannot represent the gradients"
                    : "the loss is not finite in mixed precision",
                fb->cfg.lr_backoff);
            break;
        case SDT_FALLBACK_STOP:
            sdt_c_snprintf(
                msg, n,
                "Step %lld: %d non-finite losses in a row (%lld in total%s); training stops and the last good state "
                "is kept.",
                (long long)step, fb->consecutive, (long long)fb->nonfinite_total,
                fb->fired ? ", after the fp32 fallback already fired" : "");
            break;
    }
}
