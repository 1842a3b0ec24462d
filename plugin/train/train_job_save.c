/* train_job_save.c - what a run writes besides the state (train_job_state.c): the parts' copies
 * every save_every steps, previews, and the final save. Every save is atomic; a failed save
 * leaves the previous file as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "data/png_write.h"
#include "data/preview_grid.h"
#include "train/preview.h"
#include "train/flow_preview.h"
#include "train/train_job.h"

bool sdt_train_job_save_snapshot(void *vjob, int64_t step, sdt_error *error)
{
    sdt_train_job *job = vjob;
    if (!sdt_run_comm_writes(&job->par)) return true; /* rank 0 writes every file */
    for (int p = 0; p < job->n_parts; p++)
        if (!job->parts[p].ops->sync(&job->parts[p], job, error) ||
            !job->parts[p].ops->save_snapshot(&job->parts[p], job, step, error))
            return false;
    /* The state follows every copy: a killed run loses at most the steps since this one. */
    return sdt_train_job_write_run_state(job, error) &&
           sdt_run_outputs_loss_plot(&job->outputs, job->name, job->run_kind, error);
}

/* Renders every cell of the preview: rows prompts x cols seeds, row-major into cells[]. */
/* SD3.5's and Flux's preview: the flow-matching Euler walk with the run's shift (train/flow_preview.h; the sampler option is
 * the UNet families'). */
static bool flow_render(sdt_train_job *job, const sdt_preview_request *rq, uint8_t **rgb, sdt_error *error)
{
    sdt_flow_preview_request fr = {.prompt = rq->prompt,
                                   .negative = rq->negative ? rq->negative : "",
                                   .width = rq->width,
                                   .height = rq->height,
                                   .steps = rq->steps,
                                   .cfg_scale = rq->cfg_scale,
                                   .seed = rq->seed,
                                   .t5_len = job->t5_len,
                                   .shift = job->flow_objective.timesteps,
                                   .guidance = job->flow_guidance};
    return sdt_flow_preview_render(&job->rt, &job->wa, job->tok, &job->rules, job->t5_tok, &job->t5_rules, job->rows,
                                   &fr, rgb, error);
}

static bool render_cells(sdt_train_job *job, sdt_preview_request *rq, const char *const *prompts, int rows,
                         const uint64_t *seeds, int cols, uint8_t **cells, sdt_error *error)
{
    bool ok = true;
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->begin_preview) job->parts[p].ops->begin_preview(&job->parts[p], job);
    for (int r = 0; ok && r < rows; r++)
        for (int c = 0; ok && c < cols; c++) {
            rq->prompt = prompts[r];
            rq->seed = seeds[c];
            ok = job->flow ? flow_render(job, rq, &cells[r * cols + c], error)
                           : sdt_preview_render(&job->rt, &job->wa, job->tok, &job->rules, job->rows, rq,
                                                &cells[r * cols + c], error);
        }
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].ops->end_preview) job->parts[p].ops->end_preview(&job->parts[p], job);
    job->have_measured = false; /* the preview may have resized the arena's contents */
    return ok;
}

bool sdt_train_job_save_preview(void *vjob, int64_t step, sdt_error *error)
{
    sdt_train_job *job = vjob;
    if (!sdt_run_comm_writes(&job->par)) return true;
    const char *prompt = job->previews.prompt ? job->previews.prompt : job->last_prompt;
    /* one image unless a prompts file or seeds ask for a grid (then rows x cols cells, labelled) */
    const char *const *prompts =
        job->previews.prompts.count ? (const char *const *)job->previews.prompts.prompts : &prompt;
    int rows = job->previews.prompts.count ? job->previews.prompts.count : 1;
    int cols = job->previews.grid ? job->previews.seeds.count : 1;
    uint64_t seeds[SDT_PREVIEW_GRID_MAX_COLS];
    for (int c = 0; c < cols; c++) seeds[c] = sdt_run_previews_seed(&job->previews, job->opt.seed, step, c);
    sdt_preview_request rq = {prompt,
                              job->previews.negative,
                              (int)job->previews.width,
                              (int)job->previews.height,
                              (int)job->previews.steps,
                              (float)job->previews.cfg,
                              seeds[0],
                              job->clip_skip,
                              job->hook,
                              job->previews.sampler};
    uint8_t *cells[SDT_PREVIEW_GRID_MAX_ROWS * SDT_PREVIEW_GRID_MAX_COLS] = {0};
    float *kept[SDT_EMA_MAX_GROUPS];
    bool average = job->ema.previews && job->ema.decay > 0; /* the preview shows the average; the trained values wait */
    if (average && !sdt_ema_swap_in(&job->ema, &job->engine, job->pb.be, kept, error)) return false;
    bool ok = render_cells(job, &rq, prompts, rows, seeds, cols, cells, error);
    sdt_error restore_error;
    if (average && !sdt_ema_swap_out(&job->ema, &job->engine, job->pb.be, kept, &restore_error)) {
        for (int k = 0; k < rows * cols; k++) free(cells[k]);
        *error = restore_error;
        return false;
    }
    uint8_t *rgb = cells[0]; /* one image: the preview itself */
    int width = rq.width, height = rq.height;
    char *parameters = NULL;
    if (ok && job->previews.grid)
        ok = sdt_run_previews_compose_grid(&job->previews, &rq, prompts, rows, seeds, cols, step, cells, &rgb, &width,
                                           &height, &parameters, error);
    char path[4096];
    if (!ok) {
        /* nothing written */
    } else if (!sdt_output_file(path, sizeof path, job->outputs.dirs.images, job->name, step, ".png"))
        ok = sdt_fail(error, SDT_ERR_IO, "%s: the preview path is too long", job->outputs.dirs.images);
    else if (!sdt_png_write_rgb(path, rgb, width, height, "parameters", parameters ? parameters : prompt, error))
        ok = false;
    else {
        sdt_host_file_saved(job->host, SDT_FILE_PREVIEW, path, step);
        sdt_preview pv = {
            sizeof pv, (uint32_t)width, (uint32_t)height, 3, step, rgb, path, parameters ? parameters : prompt};
        sdt_host_preview(job->host, &pv);
        /* a part's picture of the run (the embedding's card) is the first cell: one image, as A1111's */
        for (int p = 0; ok && p < job->n_parts; p++)
            if (job->parts[p].ops->after_preview)
                ok = job->parts[p].ops->after_preview(&job->parts[p], job, step, cells[0], rq.width, rq.height, error);
        if (!ok) sdt_error_append(error, "; the preview %s was saved", path);
    }
    if (rgb != cells[0]) free(rgb);
    for (int k = 0; k < rows * cols; k++) free(cells[k]);
    free(parameters);
    return ok;
}

/* Without ema_result: each part's average beside its result. (With it, the final save writes
 * the results from the average itself: train_job_save.c.) */
static bool save_average_beside(sdt_train_job *job, sdt_error *error)
{
    if (job->ema.decay <= 0 || job->ema.result) return true;
    float *kept[SDT_EMA_MAX_GROUPS];
    if (!sdt_ema_swap_in(&job->ema, &job->engine, job->pb.be, kept, error)) return false;
    bool ok = true;
    for (int p = 0; ok && p < job->n_parts; p++) {
        sdt_train_part *part = &job->parts[p];
        const char *path = part->average_path; /* named and locked with the part (train_job_prepare.c) */
        if (!path) continue;
        ok = part->ops->save_as(part, job, path, error);
        if (ok)
            sdt_host_log(job->host, SDT_LOG_INFO,
                         "the average of the %s's values (ema %g, every %lld steps) is saved as %s", part->what,
                         job->ema.decay, (long long)job->ema.every, path);
    }
    sdt_error restore_error;
    if (!sdt_ema_swap_out(&job->ema, &job->engine, job->pb.be, kept, &restore_error) && ok) {
        *error = restore_error;
        ok = false;
    }
    /* the parts' host copies (an embedding's vectors) go back to the trained values */
    return sdt_train_job_sync_parts(job, ok ? error : &restore_error) && ok;
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
    /* a rank that stops after an error tells the others now, not at the timeout */
    if (reason == SDT_SAVE_AFTER_ERROR) sdt_run_comm_abort(&job->par, "it stopped after an error");
    job->par.ended = reason != SDT_SAVE_AFTER_ERROR; /* every rank ends after the same step */
    if (!sdt_run_comm_writes(&job->par)) {
        snprintf(job->saved_note, sizeof job->saved_note, "by rank 0, which alone writes files (this is rank %d)",
                 job->par.rank);
        return true;
    }
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
    bool average = job->ema.result && job->ema.decay > 0;
    if (average &&
        (!sdt_ema_swap_in(&job->ema, &job->engine, job->pb.be, kept, error) || !sdt_train_job_sync_parts(job, error))) {
        if (!state_saved) sdt_error_append(error, "; the training state was not saved either: %s", state_error.message);
        return fail_after(error, &saved, job->step);
    }
    for (int p = 0; p < job->n_parts; p++) {
        if (!job->parts[p].ops->save_final(&job->parts[p], job, error)) {
            /* The run is not lost: the state holds the trained values too, and training resumes from it. */
            if (!state_saved)
                sdt_error_append(error, "; the training state was not saved either: %s", state_error.message);
            fail_after(error, &saved, job->step);
            if (state_saved) sdt_error_append(error, "; resume from the state");
            if (average) sdt_ema_swap_out(&job->ema, &job->engine, job->pb.be, kept, &state_error);
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
        if ((!sdt_ema_swap_out(&job->ema, &job->engine, job->pb.be, kept, &why) ||
             !sdt_train_job_sync_parts(job, &why)) &&
            cards) {
            *error = why;
            cards = false;
        }
    }
    if (!cards) return fail_after(error, &saved, job->step);
    if (!save_average_beside(job, error)) return fail_after(error, &saved, job->step);
    if (!state_saved) {
        if (error) *error = state_error;
        return sdt_error_wrap(error, "the %s was saved as %s, but the training state was not", job->parts[0].what,
                              job->parts[0].output_path);
    }
    /* The last step's row after the files: the trained files come first on a full disk. */
    if (!sdt_run_outputs_flush_csv(&job->outputs, job->host, error) ||
        !sdt_run_outputs_loss_plot(&job->outputs, job->name, job->run_kind, error))
        return fail_after(error, &saved, job->step);
    sdt_validation_summary(&job->val, job->step, job->outputs.dirs.root, job->host);
    snprintf(job->saved_note, sizeof job->saved_note, "%s (step %lld)", saved.text, (long long)job->step);
    sdt_host_log(job->host, SDT_LOG_INFO, "training %s at %lld steps; resume with the state file %s",
                 reason == SDT_SAVE_FINISHED      ? "finished"
                 : reason == SDT_SAVE_INTERRUPTED ? "interrupted"
                                                  : "stopped",
                 (long long)job->step, state);
    return true;
}

const char *sdt_train_job_saved_note(const void *job)
{
    return ((const sdt_train_job *)job)->saved_note;
}
