/* scaler.c - the dynamic loss scaler (see scaler.h for the semantics). */
#include "train/scaler.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"

typedef struct scaler_record {
    sdt_optimizer *opt;
    sdt_scaler_stage stage;
    bool has_record; /* torch: found_inf_per_device is non-empty */
    float found_inf; /* 0 clean, 1 inf/NaN seen; summed by update like torch */
} scaler_record;

struct sdt_scaler {
    sdt_backend *be;
    sdt_scaler_config cfg;
    float scale;
    int64_t growth_tracker;
    int hysteresis_tracker;
    bool scaled_once; /* torch creates _scale lazily in scale(); before it, unscale/step/update fail */
    scaler_record *records;
    int count, capacity;
    sdt_core_log_fn log;
    void *log_user;
};

sdt_scaler_config sdt_scaler_config_default(void)
{
    sdt_scaler_config cfg = {
        .enabled = true,
        .init_scale = 65536.0f,
        .growth_factor = 2.0,
        .backoff_factor = 0.5,
        .growth_interval = 2000,
        .hysteresis = 1,
        .min_scale = 0.0f,
        .shared = false,
    };
    return cfg;
}

/* A usable scale is positive and finite with a finite fp32 reciprocal (unscale multiplies by it). */
static bool scale_usable(double s)
{
    return s > 0.0 && isfinite(s) && s <= FLT_MAX && isfinite((float)(1.0 / (double)(float)s)) && (float)s > 0.0f;
}

sdt_core_status sdt_scaler_config_validate(const sdt_scaler_config *cfg, sdt_error *error)
{
    if (!scale_usable(cfg->init_scale))
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "loss scaler: init_scale %g is invalid (zero, negative, NaN, infinite or so small that 1/scale "
            "overflows fp32); use a power of two such as 65536.",
            cfg->init_scale);
    if (!(cfg->growth_factor > 1.0) || !isfinite(cfg->growth_factor))
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "loss scaler: growth_factor %g must be a finite value > 1.0 (PyTorch: \"The growth factor must be > 1.0.\"); use 2.0.",
            cfg->growth_factor);
    if (!(cfg->backoff_factor > 0.0 && cfg->backoff_factor < 1.0))
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "loss scaler: backoff_factor %g must be in (0, 1) (PyTorch: \"The backoff factor must be < 1.0.\"); use 0.5.",
            cfg->backoff_factor);
    if (cfg->growth_interval <= 0 || cfg->growth_interval > INT32_MAX)
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "loss scaler: growth_interval %lld must be between 1 and 2^31-1 (<= 0 would never grow the scale); use 2000.",
            (long long)cfg->growth_interval);
    if (cfg->hysteresis < 1)
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "loss scaler: hysteresis %d must be >= 1 (1 backs off at every overflow, as PyTorch does).",
                         cfg->hysteresis);
    if (cfg->min_scale != 0.0f && (!scale_usable(cfg->min_scale) || cfg->min_scale > cfg->init_scale))
        return core_fail(
            error, SDT_CORE_INVALID_CONFIG,
            "loss scaler: min_scale %g is invalid; use 0 (no minimum) or a positive value <= init_scale %g, e.g. 1.",
            cfg->min_scale, cfg->init_scale);
    return SDT_CORE_OK;
}

sdt_scaler *sdt_scaler_create(sdt_backend *be, const sdt_scaler_config *cfg, sdt_core_log_fn log, void *log_user,
                              sdt_error *error)
{
    if (!be || !cfg) {
        core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                  "creating a loss scaler needs a backend and a config (a bug in the caller: please report).");
        return NULL;
    }
    /* Like torch, a disabled scaler validates nothing: it is the identity. */
    if (cfg->enabled && sdt_scaler_config_validate(cfg, error) != SDT_CORE_OK) return NULL;
    sdt_scaler *sc = calloc(1, sizeof *sc);
    if (!sc) {
        core_fail(error, SDT_CORE_NO_MEMORY, "loss scaler: out of host memory.");
        return NULL;
    }
    sc->be = be;
    sc->cfg = *cfg;
    sc->scale = cfg->init_scale;
    sc->hysteresis_tracker = cfg->hysteresis;
    sc->log = log;
    sc->log_user = log_user;
    return sc;
}

void sdt_scaler_destroy(sdt_scaler *sc)
{
    if (!sc) return;
    /* Release the claims so the optimizers can be attached elsewhere. */
    for (int i = 0; i < sc->count; i++)
        if (sdt_optimizer_owner(sc->records[i].opt) == sc) sdt_optimizer_set_owner(sc->records[i].opt, NULL);
    free(sc->records);
    free(sc);
}

float sdt_scaler_get_scale(const sdt_scaler *sc)
{
    return sc->cfg.enabled ? sc->scale : 1.0f;
}
int64_t sdt_scaler_growth_tracker(const sdt_scaler *sc)
{
    return sc->cfg.enabled ? sc->growth_tracker : 0;
}
bool sdt_scaler_enabled(const sdt_scaler *sc)
{
    return sc->cfg.enabled;
}

static void scaler_log(const sdt_scaler *sc, sdt_core_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void scaler_log(const sdt_scaler *sc, sdt_core_log_level level, const char *fmt, ...)
{
    if (!sc->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sc->log(sc->log_user, level, msg);
}

/* "'a'" or "'a', 'b'": the optimizers attached (a host's scaler attaches each at its first use). */
static const char *optimizer_names(const sdt_scaler *sc, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < sc->count && used < size; i++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", sdt_optimizer_name(sc->records[i].opt));
    if (sc->count == 0) snprintf(buf, size, "no optimizer");
    return buf;
}

/* Who a scaler-wide message is about: "optimizer 'a'", "optimizers 'a', 'b'", or "loss scaler"
 * before any optimizer is attached. */
static const char *message_subject(const sdt_scaler *sc, char *buf, size_t size)
{
    if (sc->count == 0) {
        snprintf(buf, size, "loss scaler");
        return buf;
    }
    char names[224];
    snprintf(buf, size, "optimizer%s %s", sc->count > 1 ? "s" : "", optimizer_names(sc, names, sizeof names));
    return buf;
}

static scaler_record *find_record(const sdt_scaler *sc, const sdt_optimizer *opt)
{
    for (int i = 0; i < sc->count; i++)
        if (sc->records[i].opt == opt) return &sc->records[i];
    return NULL;
}

static sdt_core_status check_attachable(const sdt_scaler *sc, const sdt_optimizer *opt, sdt_error *error)
{
    const void *owner = sdt_optimizer_owner(opt);
    if (owner && owner != sc)
        return core_fail(error, SDT_CORE_ALREADY_OWNED,
                         "optimizer '%s' is already scaled by another loss scaler; give each optimizer one scaler "
                         "(or attach both optimizers to one shared scaler).",
                         sdt_optimizer_name(opt));
    char names[256];
    if (sc->count > 0 && !sc->cfg.shared)
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "loss scaler of optimizer %s cannot also scale optimizer '%s': one scaler per optimizer by "
                         "default; create a scaler for '%s', or set shared when both learn from one backward pass.",
                         optimizer_names(sc, names, sizeof names), sdt_optimizer_name(opt), sdt_optimizer_name(opt));
    for (int i = 0; i < sc->count; i++) {
        const char *p = sdt_optimizer_find_shared_param(opt, sc->records[i].opt);
        if (p)
            return core_fail(
                error, SDT_CORE_SHARED_PARAM,
                "parameter '%s' belongs to both optimizer '%s' and optimizer '%s': its gradient would be "
                "unscaled twice and it would be updated twice; register each parameter in one optimizer only.",
                p, sdt_optimizer_name(opt), sdt_optimizer_name(sc->records[i].opt));
    }
    return SDT_CORE_OK;
}

sdt_core_status sdt_scaler_attach(sdt_scaler *sc, sdt_optimizer *opt, sdt_error *error)
{
    if (!sc || !opt)
        return core_fail(error, SDT_CORE_INVALID_ARGUMENT,
                         "adding an optimizer to a loss scaler needs both (a bug in the caller: please report).");
    if (find_record(sc, opt)) return SDT_CORE_OK;
    sdt_core_status st = check_attachable(sc, opt, error);
    if (st != SDT_CORE_OK) return st;
    if (sc->count == sc->capacity) {
        int cap = sc->capacity ? sc->capacity * 2 : 2;
        scaler_record *r = realloc(sc->records, (size_t)cap * sizeof *r);
        if (!r) return core_fail(error, SDT_CORE_NO_MEMORY, "loss scaler: out of host memory.");
        sc->records = r;
        sc->capacity = cap;
    }
    sc->records[sc->count++] = (scaler_record){.opt = opt, .stage = SDT_SCALER_READY};
    sdt_optimizer_set_owner(opt, sc);
    return SDT_CORE_OK;
}

sdt_core_status sdt_scaler_prepare(const sdt_scaler *sc, sdt_error *error)
{
    if (sc->count == 0)
        return core_fail(
            error, SDT_CORE_NO_TRAINABLE_PARAMS,
            "loss scaler: no optimizer is attached, so nothing would train; attach the trainer's optimizer before starting.");
    for (int i = 0; i < sc->count; i++) {
        sdt_core_status st = sdt_optimizer_prepare(sc->records[i].opt, error);
        if (st != SDT_CORE_OK) return st;
    }
    return SDT_CORE_OK;
}

sdt_core_status sdt_scaler_scale_loss(sdt_scaler *sc, double loss, int batch_size, double *scaled, sdt_error *error)
{
    char names[256];
    if (batch_size <= 0)
        return core_fail(error, SDT_CORE_EMPTY_BATCH,
                         "%s: the batch is empty (%d samples), so there is no loss to learn from; check that "
                         "the dataset folder has readable images and that batch_size >= 1.",
                         message_subject(sc, names, sizeof names), batch_size);
    if (!sc->cfg.enabled) {
        *scaled = loss;
        return SDT_CORE_OK;
    }
    sc->scaled_once = true;
    *scaled = (double)((float)loss * sc->scale); /* torch: fp32 loss times the fp32 scale */
    return SDT_CORE_OK;
}

static sdt_core_status require_scaled_once(const sdt_scaler *sc, const char *what, sdt_error *error)
{
    if (sc->scaled_once) return SDT_CORE_OK;
    char names[256];
    return core_fail(error, SDT_CORE_NOT_SCALED,
                     "%s: %s before any scale_loss() (PyTorch: \"Attempted %s but _scale is None\"); call "
                     "scale_loss() first and run backward on the scaled loss.",
                     message_subject(sc, names, sizeof names), what, what);
}

static sdt_core_status find_owned(const sdt_scaler *sc, const sdt_optimizer *opt, const char *what, scaler_record **rec,
                                  sdt_error *error)
{
    *rec = opt ? find_record(sc, opt) : NULL;
    if (*rec) return SDT_CORE_OK;
    char names[256];
    return core_fail(error, SDT_CORE_NOT_OWNED,
                     "%s for optimizer '%s', which this loss scaler does not own (it scales %s); count the optimizer "
                     "in optimizer_count when creating the scaler, or call the scaler that belongs to it.",
                     what, opt ? sdt_optimizer_name(opt) : "(null)", optimizer_names(sc, names, sizeof names));
}

/* torch _unscale_grads_ + the stage change, with the gradient checks first. */
static sdt_core_status unscale_record(sdt_scaler *sc, scaler_record *rec, sdt_error *error)
{
    sdt_core_status st = sdt_optimizer_require_gradients(rec->opt, error);
    if (st != SDT_CORE_OK) return st;
    if (sdt_optimizer_grads_not_zeroed(rec->opt))
        scaler_log(sc, SDT_CORE_LOG_WARNING,
                   "optimizer '%s': gradients were not zeroed since the last step, so this backward added to "
                   "gradients that were already unscaled and used; the step mixes old and new gradients at different "
                   "scales. Call zero_grad after every step.",
                   sdt_optimizer_name(rec->opt));
    float inv_scale = (float)(1.0 / (double)sc->scale); /* reciprocal in fp64, rounded to fp32, as torch */
    bool found = false;
    st = sdt_optimizer_unscale_grads(rec->opt, inv_scale, &found, error);
    if (st != SDT_CORE_OK) return st;
    rec->found_inf = found ? 1.0f : 0.0f;
    rec->has_record = true;
    rec->stage = SDT_SCALER_UNSCALED;
    return SDT_CORE_OK;
}

sdt_core_status sdt_scaler_unscale(sdt_scaler *sc, sdt_optimizer *opt, sdt_error *error)
{
    if (!sc->cfg.enabled) return SDT_CORE_OK;
    scaler_record *rec;
    sdt_core_status st = find_owned(sc, opt, "unscale()", &rec, error);
    if (st == SDT_CORE_OK) st = require_scaled_once(sc, "unscale()", error);
    if (st != SDT_CORE_OK) return st;
    if (rec->stage == SDT_SCALER_UNSCALED)
        return core_fail(
            error, SDT_CORE_UNSCALE_TWICE,
            "optimizer '%s': unscale() was already called since the last update() (PyTorch: \"unscale_() has "
            "already been called on this optimizer since the last update().\"); call unscale() once per "
            "iteration, after all gradients are accumulated, then should_step() and update().",
            sdt_optimizer_name(opt));
    if (rec->stage == SDT_SCALER_STEPPED)
        return core_fail(
            error, SDT_CORE_UNSCALE_AFTER_STEP,
            "optimizer '%s': unscale() after should_step() (PyTorch: \"unscale_() is being called after "
            "step().\"); call unscale() before should_step(), or update() first to start the next iteration.",
            sdt_optimizer_name(opt));
    return unscale_record(sc, rec, error);
}

sdt_core_status sdt_scaler_step(sdt_scaler *sc, sdt_optimizer *opt, bool *stepped, sdt_error *error)
{
    if (stepped) *stepped = false;
    if (!sc->cfg.enabled) {
        /* torch: return optimizer.step(); the optimizer still refuses a step with no gradients. */
        sdt_core_status st = sdt_optimizer_step(opt, error);
        if (stepped) *stepped = st == SDT_CORE_OK;
        return st;
    }
    scaler_record *rec;
    sdt_core_status st = find_owned(sc, opt, "should_step()", &rec, error);
    if (st == SDT_CORE_OK) st = require_scaled_once(sc, "should_step()", error);
    if (st != SDT_CORE_OK) return st;
    if (rec->stage == SDT_SCALER_STEPPED)
        return core_fail(
            error, SDT_CORE_STEP_TWICE,
            "optimizer '%s': should_step() was already called since the last update() (PyTorch: \"step() has "
            "already been called since the last update().\"); call update() once after should_step() for "
            "every optimizer.",
            sdt_optimizer_name(opt));
    if (rec->stage == SDT_SCALER_READY) {
        st = unscale_record(sc, rec, error);
        if (st != SDT_CORE_OK) return st;
    }
    if (rec->found_inf != 0.0f) {
        /* Skipped: optimizer.step is not called, so params and AdamW state stay as they were. */
        sdt_optimizer_note_skipped_step(opt);
        scaler_log(
            sc, SDT_CORE_LOG_INFO,
            "optimizer '%s': inf/NaN in the gradients at loss scale %g; step skipped, the scale backs off at update.",
            sdt_optimizer_name(opt), (double)sc->scale);
    } else {
        st = sdt_optimizer_step(opt, error);
        if (st != SDT_CORE_OK) return st;
        if (stepped) *stepped = true;
    }
    rec->stage = SDT_SCALER_STEPPED;
    return SDT_CORE_OK;
}

static void clear_records(sdt_scaler *sc)
{
    for (int i = 0; i < sc->count; i++) {
        sc->records[i].stage = SDT_SCALER_READY;
        sc->records[i].has_record = false;
        sc->records[i].found_inf = 0.0f;
    }
}

/* torch _amp_update_scale_ plus hysteresis (Megatron: refilled on growth) and min_scale. */
static sdt_core_status apply_update_rule(sdt_scaler *sc, float found_inf, sdt_scaler_update_info *info,
                                         sdt_error *error)
{
    info->found_inf = found_inf != 0.0f; /* C truthiness: NaN counts, as in the kernel */
    if (info->found_inf) {
        int hysteresis_left = sc->hysteresis_tracker > 0 ? sc->hysteresis_tracker - 1 : 0;
        float new_scale = sc->scale;
        if (hysteresis_left == 0) {
            new_scale = (float)((double)sc->scale * sc->cfg.backoff_factor);
            if (sc->cfg.min_scale > 0.0f && new_scale <= sc->cfg.min_scale) {
                new_scale = sc->cfg.min_scale;
                info->at_min_scale = true;
            }
            if (!scale_usable(new_scale)) {
                char names[256];
                return core_fail(error, SDT_CORE_SCALE_UNDERFLOW,
                                 "%s: the loss scale would underflow from %g to %g after repeated overflows "
                                 "(fp16 cannot represent these gradients); set min_scale (e.g. 1) so the fp32 fallback "
                                 "takes over, or train in fp32 or bf16.",
                                 message_subject(sc, names, sizeof names), (double)sc->scale, (double)new_scale);
            }
            info->backed_off = true;
        }
        sc->scale = new_scale;
        sc->hysteresis_tracker = hysteresis_left;
        sc->growth_tracker = 0;
    } else {
        int64_t successful = sc->growth_tracker + 1;
        if (successful == sc->cfg.growth_interval) {
            float new_scale = (float)((double)sc->scale * sc->cfg.growth_factor);
            if (isfinite(new_scale)) { /* never grow to inf; the tracker resets anyway */
                sc->scale = new_scale;
                info->grew = true;
            }
            sc->growth_tracker = 0;
            sc->hysteresis_tracker = sc->cfg.hysteresis;
        } else {
            sc->growth_tracker = successful;
        }
    }
    return SDT_CORE_OK;
}

sdt_core_status sdt_scaler_update(sdt_scaler *sc, sdt_scaler_update_info *info, sdt_error *error)
{
    sdt_scaler_update_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    info->scale_before = info->scale_after = sdt_scaler_get_scale(sc);
    if (!sc->cfg.enabled) return SDT_CORE_OK;
    sdt_core_status st = require_scaled_once(sc, "update", error);
    if (st != SDT_CORE_OK) return st;
    float found_inf = 0.0f;
    int records = 0;
    for (int i = 0; i < sc->count; i++) {
        if (!sc->records[i].has_record) continue;
        records++;
        found_inf += sc->records[i].found_inf;
    }
    if (records == 0) {
        char names[256];
        return core_fail(error, SDT_CORE_UPDATE_WITHOUT_RECORDS,
                         "%s: update with nothing recorded: no optimizer was unscaled or stepped since the "
                         "last update (PyTorch: \"No inf checks were recorded prior to update.\"); call unscale() and "
                         "should_step() for each optimizer, then update() once.",
                         message_subject(sc, names, sizeof names));
    }
    st = apply_update_rule(sc, found_inf, info, error);
    clear_records(sc);
    info->scale_after = sc->scale;
    return st;
}

sdt_core_status sdt_scaler_update_to(sdt_scaler *sc, double new_scale, sdt_error *error)
{
    if (!sc->cfg.enabled) return SDT_CORE_OK;
    sdt_core_status st = require_scaled_once(sc, "update", error);
    if (st != SDT_CORE_OK) return st;
    if (!scale_usable(new_scale)) {
        char names[256];
        return core_fail(error, SDT_CORE_INVALID_CONFIG,
                         "%s: new loss scale %g is invalid (zero, negative, NaN, infinite or too small for "
                         "fp32); pass a positive finite scale such as 65536.",
                         message_subject(sc, names, sizeof names), new_scale);
    }
    sc->scale = (float)new_scale;
    clear_records(sc);
    return SDT_CORE_OK;
}

sdt_scaler_stage sdt_scaler_stage_of(const sdt_scaler *sc, const sdt_optimizer *opt)
{
    const scaler_record *rec = find_record(sc, opt);
    return rec ? rec->stage : SDT_SCALER_READY;
}

bool sdt_scaler_found_inf(const sdt_scaler *sc, const sdt_optimizer *opt)
{
    const scaler_record *rec = find_record(sc, opt);
    return rec && rec->has_record && rec->found_inf != 0.0f;
}

void sdt_scaler_get_state(const sdt_scaler *sc, sdt_scaler_state *state)
{
    memset(state, 0, sizeof *state);
    state->enabled = sc->cfg.enabled;
    if (!sc->cfg.enabled) return; /* torch: {} */
    state->scale = sc->scale;
    state->growth_factor = sc->cfg.growth_factor;
    state->backoff_factor = sc->cfg.backoff_factor;
    state->growth_interval = sc->cfg.growth_interval;
    state->growth_tracker = sc->growth_tracker;
    state->hysteresis = sc->cfg.hysteresis;
    state->hysteresis_tracker = sc->hysteresis_tracker;
    state->min_scale = sc->cfg.min_scale;
}

sdt_core_status sdt_scaler_set_state(sdt_scaler *sc, const sdt_scaler_state *state, sdt_error *error)
{
    if (!sc->cfg.enabled) return SDT_CORE_OK;
    if (!state->enabled)
        return core_fail(error, SDT_CORE_BAD_STATE,
                         "loss scaler: the saved state is empty, possibly because it was saved from a disabled scaler "
                         "(an fp32 or bf16 run); start this fp16 run with a fresh scaler instead of loading it.");
    sdt_scaler_config cfg = sc->cfg;
    cfg.init_scale = state->scale;
    cfg.growth_factor = state->growth_factor;
    cfg.backoff_factor = state->backoff_factor;
    cfg.growth_interval = state->growth_interval;
    cfg.hysteresis = state->hysteresis;
    cfg.min_scale = state->min_scale;
    sdt_error why;
    if (sdt_scaler_config_validate(&cfg, &why) != SDT_CORE_OK)
        return core_fail(error, SDT_CORE_BAD_STATE, "saved loss scaler state rejected: %s", why.message);
    if (state->growth_tracker < 0 || state->growth_tracker >= state->growth_interval || state->hysteresis_tracker < 0 ||
        state->hysteresis_tracker > state->hysteresis)
        return core_fail(
            error, SDT_CORE_BAD_STATE,
            "saved loss scaler state rejected: growth tracker %lld or hysteresis tracker %d is outside its "
            "range (0..%lld, 0..%d); the file is corrupt, start the scaler fresh.",
            (long long)state->growth_tracker, state->hysteresis_tracker, (long long)state->growth_interval - 1,
            state->hysteresis);
    sc->cfg = cfg;
    sc->scale = state->scale;
    sc->growth_tracker = state->growth_tracker;
    sc->hysteresis_tracker = state->hysteresis_tracker;
    return SDT_CORE_OK;
}
