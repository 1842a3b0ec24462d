/* step_engine.c - see step_engine.h. */
#include "train/step_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testhooks/test_hooks.h"

bool sdt_step_engine_add_group(sdt_step_engine *e, const sdt_param_group *g, sdt_error *error)
{
    if (e->n_groups >= SDT_STEP_MAX_GROUPS)
        return sdt_fail(error, SDT_ERR_INTERNAL, "too many parameter groups (a bug: please report)");
    sdt_param_group *d = &e->groups[e->n_groups++];
    *d = *g;
    memset(&d->lr, 0, sizeof d->lr);
    memset(&d->clip_value, 0, sizeof d->clip_value);
    d->lr_text = g->lr_text ? strdup(g->lr_text) : NULL;
    d->clip_text = g->clip_text ? strdup(g->clip_text) : NULL;
    d->skipped = 0;
    return true;
}

bool sdt_step_engine_parse_schedules(sdt_step_engine *e, int64_t step, int64_t max_steps, int64_t *end_step,
                                     sdt_error *error)
{
    for (int i = 0; i < e->n_groups; i++) {
        sdt_param_group *g = &e->groups[i];
        sdt_lr_schedule_free(&g->lr);
        sdt_lr_schedule_free(&g->clip_value);
        if (!sdt_lr_schedule_parse(g->lr_text, g->lr_field, step, max_steps, &g->lr, error)) return false;
        if (g->clip_mode != SDT_CLIP_DISABLED &&
            !sdt_lr_schedule_parse(g->clip_text, g->clip_field, step, max_steps, &g->clip_value, error))
            return false;
    }
    *end_step = e->n_groups ? sdt_lr_end_step(&e->groups[0].lr) : step;
    return true;
}

bool sdt_step_engine_reapply_backoff(sdt_step_engine *e, int64_t step, sdt_error *error)
{
    if (!e->fallback.fired) return true;
    for (int i = 0; i < e->n_groups; i++)
        if (!sdt_lr_apply_multiplier(&e->groups[i].lr, step, e->fallback.cfg.lr_backoff, error)) return false;
    return true;
}

/* "<group>:<step>" from the test hook, parsed once. */
static void read_inject_hook(sdt_step_engine *e)
{
    const char *spec = sdt_test_hook_inf_grad();
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    if (!colon) return;
    for (int i = 0; i < e->n_groups; i++)
        if (strlen(e->groups[i].name) == (size_t)(colon - spec) &&
            strncmp(e->groups[i].name, spec, (size_t)(colon - spec)) == 0) {
            e->inject_inf_group = e->groups[i].name;
            e->inject_inf_step = strtoll(colon + 1, NULL, 10);
        }
}

bool sdt_step_engine_setup(sdt_step_engine *e, sdt_backend *be, bool fp16, bool mixed_precision, double init_scale,
                           double lr_backoff, int max_consecutive, sdt_error *error)
{
    sdt_core_status cs = SDT_CORE_OK;
    for (int i = 0; i < e->n_groups && cs == SDT_CORE_OK; i++) cs = sdt_optimizer_prepare(e->groups[i].opt, error);
    if (cs != SDT_CORE_OK) return false;
    if (fp16) {
        sdt_scaler_config sc = sdt_scaler_config_default();
        sc.enabled = true;
        sc.init_scale = (float)init_scale;
        sc.min_scale = 1.0f;         /* below 1, fp16 cannot hold these gradients: the fallback takes over */
        sc.shared = e->n_groups > 1; /* one backward feeds every group: one scale, torch's multi-optimizer rules */
        e->scaler = sdt_scaler_create(be, &sc, NULL, NULL, error);
        if (!e->scaler) return false;
        for (int i = 0; i < e->n_groups && cs == SDT_CORE_OK; i++)
            cs = sdt_scaler_attach(e->scaler, e->groups[i].opt, error);
        if (cs == SDT_CORE_OK) cs = sdt_scaler_prepare(e->scaler, error);
        if (cs != SDT_CORE_OK) return false;
    }
    sdt_fallback_config fc = sdt_fallback_config_default(mixed_precision);
    fc.lr_backoff = lr_backoff;
    fc.max_consecutive = max_consecutive;
    if (sdt_fallback_init(&e->fallback, &fc, error) != SDT_CORE_OK) return false;
    sdt_diagnosis_init(&e->diagnosis);
    e->be = be;
    read_inject_hook(e);
    return true;
}

void sdt_step_engine_drop_scaler(sdt_step_engine *e)
{
    if (e->scaler) sdt_scaler_destroy(e->scaler);
    e->scaler = NULL;
}

bool sdt_step_engine_finished(const sdt_step_engine *e, int64_t step)
{
    return e->n_groups > 0 && sdt_lr_finished(&e->groups[0].lr, step);
}

void sdt_step_engine_free(sdt_step_engine *e)
{
    sdt_step_engine_drop_scaler(e); /* the scaler goes before the optimizers it scales */
    for (int i = 0; i < e->n_groups; i++) {
        sdt_param_group *g = &e->groups[i];
        if (g->opt) sdt_optimizer_destroy(g->opt);
        sdt_lr_schedule_free(&g->lr);
        sdt_lr_schedule_free(&g->clip_value);
        free(g->lr_text);
        free(g->clip_text);
    }
    memset(e, 0, sizeof *e);
}

/* The fault hook (tests only): one scaled gradient value of the chosen group becomes +inf. */
static bool inject_inf(sdt_step_engine *e, int64_t step_number, sdt_error *error)
{
    if (!e->inject_inf_group || step_number != e->inject_inf_step) return true;
    for (int i = 0; i < e->n_groups; i++) {
        const char *name;
        sdt_tensor *param, *grad, *m, *v;
        if (e->groups[i].name != e->inject_inf_group ||
            !sdt_optimizer_param_views(e->groups[i].opt, 0, &name, &param, &grad, &m, &v) || !grad)
            continue;
        float inf = INFINITY;
        if (e->be->upload(e->be, grad->data, &inf, sizeof inf))
            return sdt_fail(error, e->be->error.code, "fault injection: writing the gradient failed: %s",
                            e->be->error.message);
    }
    return true;
}

static void engine_log(sdt_step_engine *e, sdt_log_level level, const char *message)
{
    if (e->hooks.log) e->hooks.log(e->hooks.user, level, message);
}

/* The one-shot fallback: fp32 compute, and every group's lr backed off from the next step on. */
static bool switch_to_fp32(sdt_step_engine *e, int64_t step, sdt_error *error)
{
    sdt_step_engine_drop_scaler(e);
    if (!e->hooks.use_fp32(e->hooks.user, error)) return false;
    for (int i = 0; i < e->n_groups; i++)
        if (!sdt_lr_apply_multiplier(&e->groups[i].lr, step + 1, e->fallback.cfg.lr_backoff, error)) return false;
    return true;
}

/* Clipping of the unscaled gradients, as the Train tab's "Gradient Clipping" asks. */
static bool clip_group(sdt_param_group *g, int64_t step, sdt_error *error)
{
    if (g->clip_mode == SDT_CLIP_DISABLED) return true;
    double limit = sdt_lr_at(&g->clip_value, step);
    if (limit < 0) return true;
    double total;
    sdt_core_status cs = g->clip_mode == SDT_CLIP_NORM
                             ? sdt_optimizer_clip_grad_norm(g->opt, limit, false, &total, error)
                             : sdt_optimizer_clip_grad_value(g->opt, (float)limit, error);
    return cs == SDT_CORE_OK;
}

/* A skipped step is never silent: the host hears what happened, and about bad inputs at once. */
static void log_skip(sdt_step_engine *e, sdt_fallback_action action, int64_t step_number)
{
    char what[512], note[2304], line[2900];
    sdt_fallback_describe(&e->fallback, action, step_number, what, sizeof what);
    note[0] = '\0';
    if (e->hooks.skip_note) e->hooks.skip_note(e->hooks.user, note, sizeof note);
    snprintf(line, sizeof line, "%s%s", what, note);
    engine_log(e, SDT_LOG_WARNING, line);
}

static bool stop_with_diagnosis(sdt_step_engine *e, sdt_fallback_action action, int64_t step_number, sdt_error *error)
{
    char what[512], why[2560];
    sdt_fallback_describe(&e->fallback, action, step_number, what, sizeof what);
    e->hooks.explain(e->hooks.user, step_number, why, sizeof why);
    return sdt_fail(error, SDT_ERR_NUMERICAL, "%s %s", what, why);
}

/* A group's update under the fallback's CONTINUE: clip, guard, step (the scaler skips a group
 * whose own gradients overflowed), guard's check. */
static bool step_group(sdt_step_engine *e, sdt_param_group *g, int64_t step, sdt_error *error)
{
    sdt_core_status cs;
    if (!clip_group(g, step, error)) return false;
    if (g->before_step && !g->before_step(g->guard_user, error)) return false;
    if (e->scaler) {
        cs = sdt_scaler_step(e->scaler, g->opt, &g->stepped, error);
    } else {
        cs = sdt_optimizer_require_gradients(g->opt, error);
        if (cs == SDT_CORE_OK) cs = sdt_optimizer_step(g->opt, error);
        g->stepped = cs == SDT_CORE_OK;
    }
    if (cs != SDT_CORE_OK) return false;
    if (g->stepped && g->after_step && !g->after_step(g->guard_user, step + 1, sdt_step_engine_rate(e, g, step), error))
        return false;
    return true;
}

/* Applies the fallback's decision to every group, then the scaler's one update. */
static bool apply_action(sdt_step_engine *e, sdt_fallback_action action, int64_t step, sdt_error *error)
{
    for (int i = 0; i < e->n_groups; i++) {
        sdt_param_group *g = &e->groups[i];
        g->stepped = false;
        if (g->resting || (e->zero_gradient_expected && g->grad_norm == 0.0)) {
            /* its schedule has ended, or this step had nothing for it: it keeps its values while the others train on */
            sdt_optimizer_note_skipped_step(g->opt);
            continue;
        }
        if (action == SDT_FALLBACK_CONTINUE && !step_group(e, g, step, error)) return false;
        if (!g->stepped) {
            sdt_optimizer_note_skipped_step(g->opt);
            g->skipped++;
        }
    }
    if (e->scaler) {
        sdt_scaler_update_info info;
        if (sdt_scaler_update(e->scaler, &info, error) != SDT_CORE_OK) return false;
        if (info.at_min_scale && action == SDT_FALLBACK_CONTINUE)
            action = sdt_fallback_on_scale_collapse(&e->fallback, step + 1);
    }
    if (action == SDT_FALLBACK_SWITCH_TO_FP32) {
        log_skip(e, action, step + 1);
        return switch_to_fp32(e, step, error);
    }
    if (action == SDT_FALLBACK_SKIP) log_skip(e, action, step + 1);
    if (action == SDT_FALLBACK_STOP) return stop_with_diagnosis(e, action, step + 1, error);
    return true;
}

/* The unscaled gradient norm of every group (one group: its own, bit for bit). */
static bool measure_grads(sdt_step_engine *e, double *total, sdt_error *error)
{
    double sum = 0;
    for (int i = 0; i < e->n_groups; i++) {
        sdt_param_group *g = &e->groups[i];
        if (e->scaler && sdt_scaler_unscale(e->scaler, g->opt, error) != SDT_CORE_OK) return false;
        if (sdt_optimizer_grad_norm(g->opt, &g->grad_norm, error) != SDT_CORE_OK) return false;
        sum += g->grad_norm * g->grad_norm;
    }
    *total = e->n_groups == 1 ? e->groups[0].grad_norm : sqrt(sum);
    return true;
}

/* Data parallelism: every group's gradients, the loss and the zero-gradient flag summed over the
 * ranks (step_engine.h says why before the unscale). */
static bool reduce_over_ranks(sdt_step_engine *e, double *loss, sdt_error *error)
{
    sdt_comm *c = e->comm;
    for (int i = 0; i < e->n_groups; i++) {
        for (int k = 0; k < sdt_optimizer_param_count(e->groups[i].opt); k++) {
            const char *name;
            sdt_tensor *param, *grad, *m, *v;
            if (!sdt_optimizer_param_views(e->groups[i].opt, k, &name, &param, &grad, &m, &v) || !grad) continue;
            if (grad->dtype != SDT_F32)
                return sdt_fail(error, SDT_ERR_INTERNAL, "data parallelism: the gradient of %s is not f32", name);
            if (!c->all_reduce_f32(c, (float *)grad->data, (size_t)sdt_tensor_numel(grad), error))
                return sdt_error_wrap(error, "step: summing the %s gradients over the ranks", e->groups[i].name);
        }
    }
    double loss_sum = *loss;
    int64_t expected = e->zero_gradient_expected ? 1 : 0;
    if (!c->all_reduce_f64(c, &loss_sum, 1, error) || !c->all_reduce_i64(c, &expected, 1, error))
        return sdt_error_wrap(error, "step: summing the loss over the ranks");
    *loss = loss_sum / c->world_size;
    /* every rank's samples were on the empty prompt: only then is an exactly zero sum expected */
    e->zero_gradient_expected = expected == c->world_size;
    return true;
}

double sdt_step_engine_rate(const sdt_step_engine *e, const sdt_param_group *g, int64_t step)
{
    double rate = sdt_lr_at(&g->lr, step);
    if (rate < 0 || (e->lr_scheduler.kind == SDT_LR_SCHEDULER_CONSTANT && e->lr_scheduler.warmup_steps == 0))
        return rate;
    return rate * sdt_lr_scheduler_factor(&e->lr_scheduler, step);
}

bool sdt_step_engine_step(sdt_step_engine *e, int64_t step, sdt_step_result *out, sdt_error *error)
{
    for (int i = 0; i < e->n_groups; i++) {
        sdt_param_group *g = &e->groups[i];
        double rate = sdt_step_engine_rate(e, g, step);
        g->resting = rate < 0; /* past the end of its schedule (another group's runs longer) */
        sdt_optimizer_set_lr(g->opt, g->resting ? 0.0f : (float)rate);
        if (sdt_optimizer_zero_grad(g->opt, error) != SDT_CORE_OK) return false;
    }
    float scale = e->scaler ? sdt_scaler_get_scale(e->scaler) : 1.0f;
    double loss = 0, grad_norm = NAN;
    e->zero_gradient_expected = false;
    if (!e->hooks.accumulate(e->hooks.user, scale, &loss, error)) return false;
    if (!inject_inf(e, step + 1, error)) return false;
    if (e->comm && !reduce_over_ranks(e, &loss, error)) return false;
    if (!measure_grads(e, &grad_norm, error)) return false;
    /* With a scaler, overflowing gradients are its business (skip that optimizer, back off); a
     * non-finite loss is the fallback's. */
    bool nonfinite = !isfinite(loss) || (!e->scaler && !isfinite(grad_norm));
    sdt_fallback_action action = sdt_fallback_on_loss(&e->fallback, step + 1, nonfinite ? NAN : loss);
    double lr = e->n_groups ? sdt_step_engine_rate(e, &e->groups[0], step) : 0;
    if (!apply_action(e, action, step, error)) return false;
    bool all_stepped = true;
    for (int i = 0; i < e->n_groups; i++) all_stepped &= e->groups[i].stepped || e->groups[i].resting;
    if (!all_stepped) e->skipped++;
    if (!nonfinite) {
        sdt_health_sample hs = {step + 1, loss, grad_norm, lr, scale, 0};
        sdt_diagnosis_record(&e->diagnosis, &hs);
    }
    out->loss = nonfinite ? NAN : loss;
    out->grad_norm = grad_norm;
    out->learn_rate = lr;
    out->scale_before = scale;
    out->nonfinite = nonfinite;
    return true;
}

float *sdt_step_engine_group_values(const sdt_step_engine *e, sdt_backend *be, int group, size_t *count,
                                    sdt_error *error)
{
    sdt_optimizer *opt = e->groups[group].opt;
    size_t total = 0;
    for (int i = 0; i < sdt_optimizer_param_count(opt); i++) {
        const char *name;
        sdt_tensor *param, *grad, *m, *v;
        sdt_optimizer_param_views(opt, i, &name, &param, &grad, &m, &v);
        total += (size_t)sdt_tensor_numel(param);
    }
    float *host = malloc(total ? total * sizeof(float) : 1), *at = host;
    for (int i = 0; host && i < sdt_optimizer_param_count(opt); i++) {
        const char *name;
        sdt_tensor *param, *grad, *m, *v;
        sdt_optimizer_param_views(opt, i, &name, &param, &grad, &m, &v);
        if (be->download(be, at, param->data, sdt_tensor_nbytes(param))) {
            free(host);
            sdt_fail(error, be->error.code, "reading the %s back from the %s backend failed: %s", e->groups[group].name,
                     be->name, be->error.message);
            return NULL;
        }
        at += sdt_tensor_numel(param);
    }
    if (!host) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    *count = total;
    return host;
}
