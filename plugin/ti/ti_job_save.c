/* ti_job_save.c - every file a training run writes (snapshots, previews, PNG cards, the
 * final embedding) and the full-state checkpoint that resumes it bit for bit. Every save
 * is atomic; a failed save leaves the previous file as it was. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/host_log.h"
#include "data/png_write.h"
#include "train/preview.h"
#include "train/rng.h"
#include "safetensors.h"
#include "ti/ti_job.h"

#define STATE_VERSION "1"

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
    return save_embedding_as(job, path, SDT_FILE_EMBEDDING_SNAPSHOT, error);
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

/* <folder of the embedding file>/<name>.safetensors: where the trained embedding goes. */
static void final_path(const ti_job *job, char *out, size_t size)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", job->embedding_path);
    snprintf(out, size, "%.3800s/%.200s.safetensors", dirname(buf), job->emb.name);
}

static void state_path(const ti_job *job, char *out, size_t size)
{
    snprintf(out, size, "%.3800s/%.200s.state.safetensors", job->out.root, job->emb.name);
}

static bool write_state(ti_job *job, const char *path, sdt_error *error);

/* The embedding beside the one trained, then the state (both from one download of the vectors). */
bool ti_job_save_final(void *vjob, sdt_save_reason reason, sdt_error *error)
{
    ti_job *job = vjob;
    if (!ti_job_sync_embedding(job, error)) return false;
    char path[4096];
    final_path(job, path, sizeof path);
    if (!save_embedding_as(job, path, SDT_FILE_EMBEDDING, error)) {
        /* The run is not lost: the state holds the embedding too, and training resumes from it. */
        sdt_error state_error;
        state_path(job, path, sizeof path);
        if (write_state(job, path, &state_error))
            sdt_error_append(error, "; the training state was saved as %s, so you can resume from it", path);
        return false;
    }
    save_card(job, job->step, NULL, 0, 0);
    state_path(job, path, sizeof path);
    bool st = write_state(job, path, error);
    if (st)
        sdt_host_log(job->host, SDT_LOG_INFO, "training %s at %lld steps; resume with the state file %s",
                     reason == SDT_SAVE_FINISHED ? "finished" : reason == SDT_SAVE_INTERRUPTED ? "interrupted" : "stopped",
                     (long long)job->step, path);
    return st;
}

/* ---- the full-state checkpoint ----------------------------------------------------- */

static char *state_json(ti_job *job)
{
    cJSON *j = cJSON_CreateObject();
    char num[64];
    snprintf(num, sizeof num, "%" PRIu64, job->seed);
    cJSON_AddStringToObject(j, "seed", num);
    cJSON_AddNumberToObject(j, "step", (double)job->step);
    cJSON_AddNumberToObject(j, "initial_step", (double)job->initial_step);
    cJSON_AddNumberToObject(j, "end_step", (double)job->end_step);
    cJSON_AddNumberToObject(j, "optimizer_steps", (double)sdt_optimizer_step_count(job->opt));
    cJSON_AddNumberToObject(j, "skipped", (double)job->skipped);
    cJSON_AddStringToObject(j, "precision", ti_precision_name(job->precision));
    int64_t epoch;
    int position;
    sdt_data_order_get_position(&job->order, &epoch, &position);
    cJSON_AddNumberToObject(j, "data_epoch", (double)epoch);
    cJSON_AddNumberToObject(j, "data_position", position);
    char sched[4096];
    if (sdt_lr_schedule_format(&job->lr, sched, sizeof sched)) cJSON_AddStringToObject(j, "learn_rate", sched);
    const sdt_fallback *fb = &job->fallback;
    cJSON *f = cJSON_AddObjectToObject(j, "fallback");
    cJSON_AddBoolToObject(f, "fired", fb->fired);
    cJSON_AddNumberToObject(f, "fired_at_step", (double)fb->fired_at_step);
    cJSON_AddNumberToObject(f, "fired_by", fb->fired_by);
    cJSON_AddNumberToObject(f, "nonfinite_total", (double)fb->nonfinite_total);
    cJSON_AddNumberToObject(f, "consecutive", fb->consecutive);
    if (job->scaler) {
        sdt_scaler_state s;
        sdt_scaler_get_state(job->scaler, &s);
        cJSON *sc = cJSON_AddObjectToObject(j, "scaler");
        cJSON_AddNumberToObject(sc, "scale", s.scale);
        cJSON_AddNumberToObject(sc, "growth_tracker", (double)s.growth_tracker);
        cJSON_AddNumberToObject(sc, "hysteresis_tracker", s.hysteresis_tracker);
    }
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return text;
}

/* The state file from job->emb as last synced, and the optimizer's moments. */
static bool write_state(ti_job *job, const char *path, sdt_error *error)
{
    sdt_tensor *param, *grad, *m, *v;
    const char *pname;
    if (!sdt_optimizer_param_views(job->opt, 0, &pname, &param, &grad, &m, &v)) {
        sdt_fail(error, SDT_ERR_INTERNAL, "the optimizer has no state to save (a bug: please report)");
        return false;
    }
    size_t bytes = sdt_tensor_nbytes(param);
    float *hm = malloc(bytes), *hv = malloc(bytes);
    sdt_backend *be = job->pb.be;
    if (!hm || !hv || be->download(be, hm, m->data, bytes) || be->download(be, hv, v->data, bytes)) {
        free(hm);
        free(hv);
        sdt_fail(error, SDT_ERR_DEVICE, "reading the optimizer state failed: %s", be->error);
        return false;
    }
    int64_t shape[2] = {job->emb.n_vectors, job->emb.dim};
    sdt_tensor te = sdt_tensor_make(job->emb.vectors, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_tensor tm = sdt_tensor_make(hm, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_tensor tv = sdt_tensor_make(hv, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_st_write_item items[3] = {sdt_st_item_from_tensor("emb_params", &te), sdt_st_item_from_tensor("adamw_m", &tm),
                                  sdt_st_item_from_tensor("adamw_v", &tv)};
    char *json = state_json(job);
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)job->step);
    sdt_st_kv meta[6] = {{"sdtrain_state", STATE_VERSION}, {"name", job->emb.name}, {"step", step},
                         {"sd_checkpoint", job->checkpoint_hash}, {"sd_checkpoint_name", job->checkpoint_name},
                         {"training", json ? json : "{}"}};
    bool ok = sdt_st_write(path, items, 3, meta, 6, error);
    free(json);
    free(hm);
    free(hv);
    if (!ok) return false;
    sdt_host_file_saved(job->host, SDT_FILE_TRAINING_STATE, path, job->step);
    return true;
}

bool ti_job_save_state(ti_job *job, const char *path, sdt_error *error)
{
    if (!ti_job_sync_embedding(job, error)) return false;
    return write_state(job, path, error);
}

static double num(const cJSON *o, const char *k) { return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k)); }

/* Puts host data into a device tensor of the same size. */
static bool restore_tensor(ti_job *job, const sdt_safetensors *st, const char *name, sdt_tensor *dst, const char *path,
                           sdt_error *error)
{
    const sdt_st_entry *e = sdt_st_find(st, name);
    sdt_tensor t;
    if (!e || !sdt_st_entry_tensor(st, e, &t, error) || t.dtype != SDT_F32 || sdt_tensor_numel(&t) != sdt_tensor_numel(dst)) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: tensor '%s' is missing or has the wrong size for this embedding (%d x %d); resume "
                 "with the state file of this embedding", path, name, job->emb.n_vectors, job->emb.dim);
        return false;
    }
    if (job->pb.be->upload(job->pb.be, dst->data, t.data, sdt_tensor_nbytes(dst))) {
        sdt_fail(error, SDT_ERR_DEVICE, "%s: copying '%s' to the %s backend failed: %s", path, name, job->pb.be->name, job->pb.be->error);
        return false;
    }
    return true;
}

/* The loss scaler's scale and trackers, when the state has them and this run scales. */
static bool restore_scaler(ti_job *job, const cJSON *sc, sdt_error *error)
{
    if (!sc || !job->scaler) return true;
    sdt_scaler_state s;
    sdt_scaler_get_state(job->scaler, &s);
    s.scale = (float)num(sc, "scale");
    s.growth_tracker = (int64_t)num(sc, "growth_tracker");
    s.hysteresis_tracker = (int)num(sc, "hysteresis_tracker");
    return sdt_scaler_set_state(job->scaler, &s, error) == SDT_CORE_OK;
}

/* The state must come from this embedding, model and seed, or the run would not continue as it was. */
static bool state_matches_run(const ti_job *job, const sdt_safetensors *st, const cJSON *j, const char *path, sdt_error *error)
{
    const char *name = sdt_st_metadata_get(st, "name");
    const char *hash = sdt_st_metadata_get(st, "sd_checkpoint");
    const char *seed = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "seed"));
    if (!name || strcmp(name, job->emb.name) != 0) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: this state belongs to embedding '%s', not '%s'; resume with the matching embedding",
                 path, name ? name : "?", job->emb.name);
        return false;
    }
    if (hash && *hash && job->checkpoint_hash[0] && strcmp(hash, job->checkpoint_hash) != 0) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: the run was trained on model %s but this model is %s; resume on the same model",
                 path, hash, job->checkpoint_hash);
        return false;
    }
    if (!seed || strtoull(seed, NULL, 10) != job->seed) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: the run used seed %s; resume with that seed so the data and noise continue as they "
                 "would have", path, seed ? seed : "?");
        return false;
    }
    return true;
}

static bool apply_state(ti_job *job, const sdt_safetensors *st, const cJSON *j, const char *path, sdt_error *error)
{
    if (!state_matches_run(job, st, j, path, error)) return false;
    sdt_tensor *param, *grad, *m, *v;
    const char *pname;
    sdt_optimizer_param_views(job->opt, 0, &pname, &param, &grad, &m, &v);
    if (!restore_tensor(job, st, "emb_params", param, path, error) ||
        !restore_tensor(job, st, "adamw_m", m, path, error) ||
        !restore_tensor(job, st, "adamw_v", v, path, error))
        return false;
    job->step = (int64_t)num(j, "step");
    job->initial_step = (int64_t)num(j, "initial_step");
    job->skipped = (int64_t)num(j, "skipped");
    sdt_optimizer_set_step_count(job->opt, (int64_t)num(j, "optimizer_steps"));
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "fallback");
    job->fallback.fired = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "fired"));
    job->fallback.fired_at_step = (int64_t)num(f, "fired_at_step");
    job->fallback.fired_by = (sdt_fallback_trigger)(int)num(f, "fired_by");
    job->fallback.nonfinite_total = (int64_t)num(f, "nonfinite_total");
    job->fallback.consecutive = (int)num(f, "consecutive");
    /* The schedules come from this panel (max steps may have grown since the state was saved),
     * parsed at the resumed step, with the fallback's backoff applied again if it fired. */
    if (job->max_steps <= job->step) {
        sdt_fail(error, SDT_ERR_VALIDATION, "%s: the run is already at step %lld, which reaches max steps (%lld); raise max steps "
                 "to continue it", path, (long long)job->step, (long long)job->max_steps);
        return false;
    }
    if (!ti_job_parse_schedules(job, error)) return false;
    if (job->fallback.fired &&
        !sdt_lr_apply_multiplier(&job->lr, job->step, job->fallback.cfg.lr_backoff, error))
        return false;
    const char *prec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "precision"));
    if (prec && strcmp(prec, "fp32") == 0 && job->precision != SDT_PRECISION_FP32) {
        if (!ti_job_use_fp32(job, error)) return false;
    }
    if (!restore_scaler(job, cJSON_GetObjectItemCaseSensitive(j, "scaler"), error)) return false;
    if (!sdt_data_order_set_position(&job->order, (int64_t)num(j, "data_epoch"), (int)num(j, "data_position"), error))
        return false;
    sdt_error why;
    if (!sdt_loss_csv_truncate_after(job->out.loss_csv, job->step, &why))
        sdt_host_log(job->host, SDT_LOG_WARNING, "%s", why.message);
    return true;
}

bool ti_job_load_state(ti_job *job, const char *path, sdt_error *error)
{
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return false;
    const char *version = sdt_st_metadata_get(st, "sdtrain_state");
    const char *training = sdt_st_metadata_get(st, "training");
    cJSON *j = training ? cJSON_Parse(training) : NULL;
    bool rc;
    if (!version || strcmp(version, STATE_VERSION) != 0 || !j) {
        rc = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: not an sdtrain training state (version %s); resume from a *.state.safetensors file "
                 "this plugin wrote", path, version ? version : "missing");
    } else {
        rc = apply_state(job, st, j, path, error);
    }
    cJSON_Delete(j);
    sdt_st_close(st);
    return rc;
}

/* ---- the run loop's view of the job ------------------------------------------------ */

static const sdt_job_ops ti_ops = {ti_job_step, ti_job_done, ti_job_save_snapshot, ti_job_save_preview, ti_job_save_final};

const sdt_job_ops *ti_job_ops(void) { return &ti_ops; }

sdt_run_params ti_job_run_params(const ti_job *job)
{
    sdt_run_params p = {job->save_every, job->preview_every};
    return p;
}
