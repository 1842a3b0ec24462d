/* train_job_average.c - the average of the trained values (train/ema.h) in a run: started from
 * the values at prepare (a resume replaces it with the state's), updated after every
 * ema_every-th step, written beside each part's result as <stem>-ema<ext> (or, with ema_result,
 * as the result itself: the trained values stay in the state), and put on the device for
 * previews when ema_previews asks (the trained values are kept on the host meanwhile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "train/train_job.h"

bool sdt_train_job_average_start(sdt_train_job *job, sdt_error *error)
{
    sdt_ema *e = &job->ema;
    if (e->decay <= 0) return true;
    if (job->engine.n_groups > SDT_EMA_MAX_GROUPS)
        return sdt_fail(error, SDT_ERR_VALIDATION, "the average (ema_decay) covers at most %d parameter groups; this run has %d",
                        SDT_EMA_MAX_GROUPS, job->engine.n_groups);
    for (int g = 0; g < job->engine.n_groups; g++) {
        free(e->values[g]);
        e->values[g] = sdt_train_job_group_values(job, g, &e->count[g], error);
        if (!e->values[g]) return false;
    }
    e->n_groups = job->engine.n_groups;
    return true;
}

bool sdt_train_job_average_update(sdt_train_job *job, sdt_error *error)
{
    sdt_ema *e = &job->ema;
    if (!sdt_ema_due(e, job->step)) return true;
    for (int g = 0; g < e->n_groups; g++) {
        size_t count = 0;
        float *now = sdt_train_job_group_values(job, g, &count, error);
        if (!now) return false;
        if (count == e->count[g]) sdt_ema_blend(e->values[g], now, count, e->decay);
        free(now);
    }
    return true;
}

/* Uploads values (a group's, in parameter order) into the group's parameters on the device. */
static bool upload_group(sdt_train_job *job, int g, const float *values, sdt_error *error)
{
    sdt_optimizer *opt = job->engine.groups[g].opt;
    sdt_backend *be = job->pb.be;
    for (int i = 0; i < sdt_optimizer_param_count(opt); i++) {
        const char *name;
        sdt_tensor *param, *grad, *m, *v;
        sdt_optimizer_param_views(opt, i, &name, &param, &grad, &m, &v);
        if (be->upload(be, param->data, values, sdt_tensor_nbytes(param)))
            return sdt_fail(error, be->error.code, "copying the average of '%s' to the %s backend failed: %s", name, be->name,
                            be->error.message);
        values += sdt_tensor_numel(param);
    }
    return true;
}

bool sdt_train_job_average_swap_in(sdt_train_job *job, float **kept, sdt_error *error)
{
    const sdt_ema *e = &job->ema;
    for (int g = 0; g < e->n_groups; g++) kept[g] = NULL;
    for (int g = 0; g < e->n_groups; g++) {
        size_t count = 0;
        if (!(kept[g] = sdt_train_job_group_values(job, g, &count, error)) || !upload_group(job, g, e->values[g], error)) {
            sdt_error ignored;
            sdt_train_job_average_swap_out(job, kept, &ignored);
            return false;
        }
    }
    return true;
}

bool sdt_train_job_average_swap_out(sdt_train_job *job, float **kept, sdt_error *error)
{
    bool ok = true;
    for (int g = 0; g < job->ema.n_groups; g++) {
        if (kept[g] && ok) ok = upload_group(job, g, kept[g], error);
        free(kept[g]);
        kept[g] = NULL;
    }
    return ok;
}

char *sdt_train_job_average_path(const char *output_path)
{
    const char *slash = strrchr(output_path, '/'), *dot = strrchr(output_path, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - output_path) : strlen(output_path);
    size_t n = strlen(output_path) + 5;
    char *path = malloc(n);
    if (path) snprintf(path, n, "%.*s-ema%s", (int)stem, output_path, output_path + stem);
    return path;
}

/* Without ema_result: each part's average beside its result. (With it, the final save writes
 * the results from the average itself: train_job_save.c.) */
bool sdt_train_job_average_save(sdt_train_job *job, sdt_error *error)
{
    if (job->ema.decay <= 0 || job->ema_result) return true;
    float *kept[SDT_EMA_MAX_GROUPS];
    if (!sdt_train_job_average_swap_in(job, kept, error)) return false;
    bool ok = true;
    for (int p = 0; ok && p < job->n_parts; p++) {
        sdt_train_part *part = &job->parts[p];
        const char *path = part->average_path; /* named and locked with the part (train_job_prepare.c) */
        if (!path) continue;
        ok = part->ops->save_as(part, job, path, error);
        if (ok) sdt_host_log(job->host, SDT_LOG_INFO, "the average of the %s's values (ema %g, every %lld steps) is saved as %s",
                             part->what, job->ema.decay, (long long)job->ema.every, path);
    }
    sdt_error restore_error;
    if (!sdt_train_job_average_swap_out(job, kept, &restore_error) && ok) {
        *error = restore_error;
        ok = false;
    }
    /* the parts' host copies (an embedding's vectors) go back to the trained values */
    return sdt_train_job_sync_parts(job, ok ? error : &restore_error) && ok;
}
