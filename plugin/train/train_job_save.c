/* train_job_save.c - what a run writes besides the state (train_job_state.c): the parts' copies
 * every save_every steps, previews, and the final save. Every save is atomic; a failed save
 * leaves the previous file as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/host_log.h"
#include "c_numeric.h"
#include "data/png_write.h"
#include "train/preview.h"
#include "train/rng.h"
#include "train/train_job.h"

bool sdt_train_job_sync_parts(sdt_train_job *job, sdt_error *error)
{
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error)) return false;
    return true;
}

void sdt_train_job_fallback_note(const sdt_train_job *job, char *note, size_t size)
{
    const sdt_fallback *fb = &job->engine.fallback;
    note[0] = '\0';
    if (fb->fired) /* a file says how it was trained: fp32 from that step, at the backed-off rate */
        sdt_c_snprintf(note, size, "fp32 from step %lld (%s), learning rate x%g", (long long)fb->fired_at_step,
                 fb->fired_by == SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE ? "loss scale collapsed" : "non-finite loss",
                 fb->cfg.lr_backoff);
}

bool sdt_train_job_save_snapshot(void *vjob, int64_t step, sdt_error *error)
{
    sdt_train_job *job = vjob;
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error) ||
            !job->parts[p].ops->save_snapshot(&job->parts[p], job, step, error))
            return false;
    /* The state follows every copy: a killed run loses at most the steps since this one. */
    return sdt_train_job_write_run_state(job, error) && sdt_train_job_write_loss_plot(job, error);
}

bool sdt_train_job_write_loss_plot(sdt_train_job *job, sdt_error *error)
{
    if (!job->write_metrics) return true;
    char path[4096], title[300];
    snprintf(path, sizeof path, "%.4000s/" SDT_LOSS_PLOT_NAME, job->out.root);
    snprintf(title, sizeof title, "%s (%s)", job->name, job->run_kind);
    sdt_loss_plot plot = sdt_metrics_log_plot(&job->metrics, title);
    return sdt_loss_plot_write(path, &plot, error);
}

bool sdt_train_job_save_preview(void *vjob, int64_t step, sdt_error *error)
{
    sdt_train_job *job = vjob;
    const char *prompt = job->preview_prompt ? job->preview_prompt : job->last_prompt;
    sdt_preview_request rq = {prompt,
                              job->preview_negative,
                              (int)job->preview_width,
                              (int)job->preview_height,
                              (int)job->preview_steps,
                              (float)job->preview_cfg,
                              job->preview_seed >= 0 ? (uint64_t)job->preview_seed : sdt_rng_derive(job->seed, (uint64_t)step),
                              job->clip_skip,
                              job->hook};
    uint8_t *rgb = NULL;
    float *kept[SDT_EMA_MAX_GROUPS];
    bool average = job->ema_previews && job->ema.decay > 0; /* the preview shows the average; the trained values wait */
    if (average && !sdt_train_job_average_swap_in(job, kept, error)) return false;
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->begin_preview) job->parts[p].ops->begin_preview(&job->parts[p], job);
    bool rendered = sdt_preview_render(&job->rt, &job->wa, job->tok, &job->rules, job->rows, &rq, &rgb, error);
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->end_preview) job->parts[p].ops->end_preview(&job->parts[p], job);
    sdt_error restore_error;
    if (average && !sdt_train_job_average_swap_out(job, kept, &restore_error)) {
        free(rgb);
        *error = restore_error;
        return false;
    }
    job->have_measured = false; /* the preview may have resized the arena's contents */
    if (!rendered) return false;
    char path[4096];
    bool ok = true;
    if (!sdt_output_file(path, sizeof path, job->out.images, job->name, step, ".png"))
        ok = sdt_fail(error, SDT_ERR_IO, "%s: the preview path is too long", job->out.images);
    else if (!sdt_png_write_rgb(path, rgb, rq.width, rq.height, "parameters", prompt, error))
        ok = false;
    else {
        sdt_host_file_saved(job->host, SDT_FILE_PREVIEW, path, step);
        sdt_preview pv = {sizeof pv, (uint32_t)rq.width, (uint32_t)rq.height, 3, step, rgb, path, prompt};
        sdt_host_preview(job->host, &pv);
        for (int p = 0; ok && p < job->n_parts; p++)
            if (job->parts[p].ops->after_preview)
                ok = job->parts[p].ops->after_preview(&job->parts[p], job, step, rgb, rq.width, rq.height, error);
        if (!ok) sdt_error_append(error, "; the preview %s was saved", path);
    }
    free(rgb);
    return ok;
}

/* What the final save has written so far, for a sentence about a failure after it. */
typedef struct saved_list {
    char text[SDT_ERROR_MESSAGE_MAX / 2];
    int count;
} saved_list;

static void saved_add(saved_list *l, const char *what, const char *path)
{
    size_t at = strlen(l->text);
    int n = snprintf(l->text + at, sizeof l->text - at, "%s%s %s", l->count ? ", " : "", what, path);
    if (n < 0 || (size_t)n >= sizeof l->text - at) l->text[sizeof l->text - 1] = '\0'; /* cut: the paths are long */
    l->count++;
}

/* "<failure>; already written: the training state S, the embedding E (step N)" or "; nothing was replaced". */
static bool fail_after(sdt_error *error, const saved_list *l, int64_t step)
{
    if (l->count)
        sdt_error_append(error, "; already written before this failure (step %lld): %s", (long long)step, l->text);
    else
        sdt_error_append(error, "; no file was replaced");
    return false;
}

/* The state first: a crash before the trained files are replaced leaves the state with the files
 * its run started from, a pair a resume accepts (train_job_state.c). A failure later on says
 * which files were already replaced. */
bool sdt_train_job_save_final(void *vjob, sdt_save_reason reason, sdt_error *error)
{
    sdt_train_job *job = vjob;
    if (!sdt_train_job_sync_parts(job, error)) return false;
    char state[4096];
    sdt_train_job_state_path(job, state, sizeof state);
    sdt_error state_error;
    sdt_error_clear(&state_error);
    bool state_saved = sdt_train_job_write_run_state(job, &state_error);
    saved_list saved = {"", 0};
    if (state_saved) saved_add(&saved, "the training state", state);
    /* ema_result: the results hold the average (the trained values stay in the state) */
    float *kept[SDT_EMA_MAX_GROUPS];
    bool average = job->ema_result && job->ema.decay > 0;
    if (average && (!sdt_train_job_average_swap_in(job, kept, error) || !sdt_train_job_sync_parts(job, error))) {
        if (!state_saved) sdt_error_append(error, "; the training state was not saved either: %s", state_error.message);
        return fail_after(error, &saved, job->step);
    }
    for (int p = 0; p < job->n_parts; p++) {
        if (!job->parts[p].ops->save_final(&job->parts[p], job, error)) {
            /* The run is not lost: the state holds the trained values too, and training resumes from it. */
            if (!state_saved) sdt_error_append(error, "; the training state was not saved either: %s", state_error.message);
            fail_after(error, &saved, job->step);
            if (state_saved) sdt_error_append(error, "; resume from the state");
            if (average) sdt_train_job_average_swap_out(job, kept, &state_error);
            return false;
        }
        char what[64];
        snprintf(what, sizeof what, "the %s", job->parts[p].what);
        saved_add(&saved, what, job->parts[p].output_path);
    }
    bool cards = true;
    for (int p = 0; cards && p < job->n_parts; p++)
        if (job->parts[p].ops->after_preview &&
            !job->parts[p].ops->after_preview(&job->parts[p], job, job->step, NULL, 0, 0, error))
            cards = false;
    if (average) { /* the trained values back on the device and in the parts' host copies */
        sdt_error why;
        if ((!sdt_train_job_average_swap_out(job, kept, &why) || !sdt_train_job_sync_parts(job, &why)) && cards) {
            *error = why;
            cards = false;
        }
    }
    if (!cards) return fail_after(error, &saved, job->step);
    if (!sdt_train_job_average_save(job, error)) return fail_after(error, &saved, job->step);
    if (!state_saved) {
        if (error) *error = state_error;
        return sdt_error_wrap(error, "the %s was saved as %s, but the training state was not", job->parts[0].what,
                              job->parts[0].output_path);
    }
    /* The last step's row after the files: the trained files come first on a full disk. */
    if (!sdt_train_job_flush_csv(job, error) || !sdt_train_job_write_loss_plot(job, error))
        return fail_after(error, &saved, job->step);
    sdt_train_job_validation_summary(job);
    snprintf(job->saved_note, sizeof job->saved_note, "%s (step %lld)", saved.text, (long long)job->step);
    sdt_host_log(job->host, SDT_LOG_INFO, "training %s at %lld steps; resume with the state file %s",
                 reason == SDT_SAVE_FINISHED ? "finished" : reason == SDT_SAVE_INTERRUPTED ? "interrupted" : "stopped",
                 (long long)job->step, state);
    return true;
}

const char *sdt_train_job_saved_note(const void *job) { return ((const sdt_train_job *)job)->saved_note; }
