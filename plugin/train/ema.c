/* ema.c - see ema.h. */
#include "train/ema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sdt_ema_blend(float *average, const float *values, size_t n, double decay)
{
    double rest = 1.0 - decay;
    for (size_t i = 0; i < n; i++) average[i] = (float)(decay * (double)average[i] + rest * (double)values[i]);
}

bool sdt_ema_due(const sdt_ema *e, int64_t step)
{
    return e->decay > 0 && e->every > 0 && step > 0 && step % e->every == 0;
}

void sdt_ema_free(sdt_ema *e)
{
    for (int g = 0; g < e->n_groups; g++) free(e->values[g]);
    memset(e, 0, sizeof *e);
}

bool sdt_ema_start(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, sdt_error *error)
{
    if (e->decay <= 0) return true;
    if (engine->n_groups > SDT_EMA_MAX_GROUPS)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "the average (ema_decay) covers at most %d parameter groups; this run has %d",
                        SDT_EMA_MAX_GROUPS, engine->n_groups);
    for (int g = 0; g < engine->n_groups; g++) {
        free(e->values[g]);
        e->values[g] = sdt_step_engine_group_values(engine, be, g, &e->count[g], error);
        if (!e->values[g]) return false;
    }
    e->n_groups = engine->n_groups;
    return true;
}

bool sdt_ema_update(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, int64_t step, sdt_error *error)
{
    if (!sdt_ema_due(e, step)) return true;
    for (int g = 0; g < e->n_groups; g++) {
        size_t count = 0;
        float *now = sdt_step_engine_group_values(engine, be, g, &count, error);
        if (!now) return false;
        if (count == e->count[g]) sdt_ema_blend(e->values[g], now, count, e->decay);
        free(now);
    }
    return true;
}

/* Uploads values (a group's, in parameter order) into the group's parameters on the device. */
static bool upload_group(const sdt_step_engine *engine, sdt_backend *be, int g, const float *values, sdt_error *error)
{
    sdt_optimizer *opt = engine->groups[g].opt;
    for (int i = 0; i < sdt_optimizer_param_count(opt); i++) {
        const char *name;
        sdt_tensor *param, *grad, *m, *v;
        sdt_optimizer_param_views(opt, i, &name, &param, &grad, &m, &v);
        if (be->upload(be, param->data, values, sdt_tensor_nbytes(param)))
            return sdt_fail(error, be->error.code, "copying the average of '%s' to the %s backend failed: %s", name,
                            be->name, be->error.message);
        values += sdt_tensor_numel(param);
    }
    return true;
}

bool sdt_ema_swap_in(const sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, float **kept, sdt_error *error)
{
    for (int g = 0; g < e->n_groups; g++) kept[g] = NULL;
    for (int g = 0; g < e->n_groups; g++) {
        size_t count = 0;
        if (!(kept[g] = sdt_step_engine_group_values(engine, be, g, &count, error)) ||
            !upload_group(engine, be, g, e->values[g], error)) {
            sdt_error ignored;
            sdt_ema_swap_out(e, engine, be, kept, &ignored);
            return false;
        }
    }
    return true;
}

bool sdt_ema_swap_out(const sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, float **kept, sdt_error *error)
{
    bool ok = true;
    for (int g = 0; g < e->n_groups; g++) {
        if (kept[g] && ok) ok = upload_group(engine, be, g, kept[g], error);
        free(kept[g]);
        kept[g] = NULL;
    }
    return ok;
}

char *sdt_ema_path(const char *output_path)
{
    const char *slash = strrchr(output_path, '/'), *dot = strrchr(output_path, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - output_path) : strlen(output_path);
    size_t n = strlen(output_path) + 5;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%.*s-ema%s", (int)stem, output_path, output_path + stem);
    return path;
}

void sdt_ema_state_key(const sdt_step_engine *engine, int group, char *out, size_t size)
{
    snprintf(out, size, "ema.%s", engine->groups[group].name);
}

static bool all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

bool sdt_ema_restore(sdt_ema *e, const sdt_step_engine *engine, sdt_backend *be, const sdt_safetensors *st,
                     const char *recorded, const char *path, const sdt_host_callbacks *host, sdt_error *error)
{
    if (e->decay <= 0) return true;
    for (int g = 0; g < e->n_groups; g++) {
        char name[SDT_EMA_STATE_KEY_MAX];
        sdt_ema_state_key(engine, g, name, sizeof name);
        const sdt_st_entry *entry = sdt_st_find(st, name);
        if (!entry && recorded)
            return sdt_fail(
                error, SDT_ERR_BAD_FORMAT,
                "%s: tensor '%s' is missing, but the state records ema_decay %s, whose "
                "average it holds (the file is damaged); resume from an earlier state, or train without --resume",
                path, name, recorded);
        if (!entry) {
            sdt_host_log(host, SDT_LOG_INFO,
                         "%s holds no average of the %s (its run had no ema_decay): the average "
                         "starts from the resumed values",
                         path, engine->groups[g].name);
            free(e->values[g]);
            if (!(e->values[g] = sdt_step_engine_group_values(engine, be, g, &e->count[g], error))) return false;
            continue;
        }
        if (entry->dtype != SDT_ST_F32 || entry->nbytes != e->count[g] * sizeof(float))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: tensor '%s' has the wrong size for this %s (%zu values); resume with "
                            "the state file of this run",
                            path, name, engine->groups[g].name, e->count[g]);
        memcpy(e->values[g], entry->data, (size_t)entry->nbytes);
        if (!all_finite(e->values[g], e->count[g]))
            return sdt_fail(error, SDT_ERR_NUMERICAL,
                            "%s: '%s' holds NaN or infinite values (the file is damaged); resume from "
                            "an earlier state, or train without --resume",
                            path, name);
    }
    return true;
}
