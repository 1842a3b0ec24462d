/* ti_job_save.c - every embedding file a training run writes (snapshots, previews, PNG cards,
 * the final embedding); the resume state is ti_job_state.c. Every save is atomic; a failed
 * save leaves the previous file as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/host_log.h"
#include "data/png_write.h"
#include "train/preview.h"
#include "train/rng.h"
#include "ti/ti_job.h"

bool ti_job_download_vectors(ti_job *job, sdt_error *error)
{
    sdt_backend *be = job->pb.be;
    if (be->download(be, job->emb.vectors, job->param.data, sdt_tensor_nbytes(&job->param))) {
        sdt_fail(error, SDT_ERR_DEVICE, "reading the embedding back from the %s backend failed: %s", be->name, be->error);
        return false;
    }
    return true;
}

bool ti_job_sync_embedding(ti_job *job, sdt_error *error)
{
    if (!ti_job_download_vectors(job, error)) return false;
    job->emb.step = job->step;
    sdt_embedding_set_string(&job->emb.checkpoint_hash, job->checkpoint_hash[0] ? job->checkpoint_hash : NULL);
    sdt_embedding_set_string(&job->emb.checkpoint_name, job->checkpoint_name[0] ? job->checkpoint_name : NULL);
    if (job->fallback.fired) { /* the file says how it was trained: fp32 from that step, at the backed-off rate */
        char note[160];
        snprintf(note, sizeof note, "fp32 from step %lld (%s), learning rate x%g", (long long)job->fallback.fired_at_step,
                 job->fallback.fired_by == SDT_FALLBACK_TRIGGER_SCALE_COLLAPSE ? "loss scale collapsed" : "non-finite loss",
                 job->fallback.cfg.lr_backoff);
        sdt_embedding_set_string(&job->emb.training_note, note);
    }
    return true;
}

static bool save_embedding_as(ti_job *job, const char *path, sdt_file_kind kind, sdt_error *error)
{
    if (!sdt_embedding_save_safetensors(&job->emb, path, true, error)) return false;
    sdt_host_file_saved(job->host, kind, path, job->step);
    return true;
}

bool ti_job_save_snapshot(void *vjob, int64_t step, sdt_error *error)
{
    ti_job *job = vjob;
    char path[4096];
    if (!ti_job_sync_embedding(job, error)) return false;
    if (!sdt_output_file(path, sizeof path, job->out.embeddings, job->emb.name, step, ".safetensors")) {
        sdt_fail(error, SDT_ERR_IO, "%s: the snapshot path is too long; choose a shorter log folder", job->out.embeddings);
        return false;
    }
    if (!save_embedding_as(job, path, SDT_FILE_EMBEDDING_SNAPSHOT, error)) return false;
    /* The state follows every copy: a killed run loses at most the steps since this one. */
    return ti_job_write_run_state(job, error);
}

/* The A1111 card of the current embedding over a picture (NULL: a generated one). */
static void save_card(ti_job *job, int64_t step, const uint8_t *rgb, int w, int h)
{
    if (!job->save_cards) return;
    char path[4096];
    sdt_error why;
    if (!sdt_output_file(path, sizeof path, job->out.image_embeddings, job->emb.name, step, ".png")) return;
    if (sdt_embedding_save_png_card(&job->emb, path, rgb, w, h, true, &why))
        sdt_host_file_saved(job->host, SDT_FILE_EMBEDDING_CARD, path, step);
    else
        sdt_host_log(job->host, SDT_LOG_WARNING, "the PNG card was not saved: %s", why.message);
}

bool ti_job_save_preview(void *vjob, int64_t step, sdt_error *error)
{
    ti_job *job = vjob;
    const char *prompt = job->preview_prompt ? job->preview_prompt : job->last_prompt;
    ti_preview_request rq = {prompt,
                             job->preview_negative,
                             (int)job->preview_width,
                             (int)job->preview_height,
                             (int)job->preview_steps,
                             (float)job->preview_cfg,
                             job->preview_seed >= 0 ? (uint64_t)job->preview_seed : sdt_rng_derive(job->seed, (uint64_t)step),
                             job->clip_skip};
    uint8_t *rgb = NULL;
    if (!ti_preview_render(&job->rt, &job->wa, job->tok, &job->rules, &job->param, &rq, &rgb, error))
        return false;
    job->have_measured = false; /* the preview may have resized the arena's contents */
    char path[4096];
    bool ok = true;
    if (!sdt_output_file(path, sizeof path, job->out.images, job->emb.name, step, ".png"))
        ok = sdt_fail(error, SDT_ERR_IO, "%s: the preview path is too long", job->out.images);
    else if (!sdt_png_write_rgb(path, rgb, rq.width, rq.height, "parameters", prompt, error))
        ok = false;
    else {
        sdt_host_file_saved(job->host, SDT_FILE_PREVIEW, path, step);
        sdt_preview pv = {sizeof pv, (uint32_t)rq.width, (uint32_t)rq.height, 3, step, rgb, path, prompt};
        sdt_host_preview(job->host, &pv);
        if (ti_job_sync_embedding(job, error)) save_card(job, step, rgb, rq.width, rq.height);
    }
    free(rgb);
    return ok;
}

/* The state first: a crash before the embedding file is replaced leaves the state with the
 * file its run started from, a pair a resume accepts (ti_job_state.c). Both from one download. */
bool ti_job_save_final(void *vjob, sdt_save_reason reason, sdt_error *error)
{
    ti_job *job = vjob;
    if (!ti_job_sync_embedding(job, error)) return false;
    char state[4096];
    ti_job_state_path(job, state, sizeof state);
    sdt_error state_error;
    sdt_error_clear(&state_error);
    bool state_saved = ti_job_write_run_state(job, &state_error);
    if (!save_embedding_as(job, job->output_path, SDT_FILE_EMBEDDING, error)) {
        /* The run is not lost: the state holds the embedding too, and training resumes from it. */
        if (state_saved) sdt_error_append(error, "; the training state was saved as %s, so you can resume from it", state);
        return false;
    }
    save_card(job, job->step, NULL, 0, 0);
    if (!state_saved) {
        if (error) *error = state_error;
        return sdt_error_wrap(error, "the embedding was saved as %s, but the training state was not", job->output_path);
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "training %s at %lld steps; resume with the state file %s",
                 reason == SDT_SAVE_FINISHED ? "finished" : reason == SDT_SAVE_INTERRUPTED ? "interrupted" : "stopped",
                 (long long)job->step, state);
    return true;
}

/* ---- the run loop's view of the job ------------------------------------------------ */

static const sdt_job_ops ti_ops = {ti_job_step, ti_job_done, ti_job_save_snapshot, ti_job_save_preview, ti_job_save_final};

const sdt_job_ops *ti_job_ops(void) { return &ti_ops; }

sdt_run_params ti_job_run_params(const ti_job *job)
{
    sdt_run_params p = {.save_every = job->save_every, .preview_every = job->preview_every, .backend = job->pb.be,
                        .memory_estimate_bytes = job->memory_estimate_bytes};
    return p;
}
