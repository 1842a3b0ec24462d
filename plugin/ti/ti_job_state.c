/* ti_job_state.c - the full-state checkpoint that resumes a run bit for bit, and what keeps it
 * from losing or rewinding work:
 *  - every state is sealed with a SHA-256 over its tensors and metadata (state_seal.h) and
 *    checked on load, tensors finite included; a non-finite state is never written;
 *  - it records the embedding it belongs to: the content hash of the vectors it was saved with
 *    and of those the output file held when the run began. A resume accepts the embedding file
 *    only when it holds one of the two (the second: the run was stopped before it replaced the
 *    file), so a state never silently rewinds a newer embedding;
 *  - it is written after every snapshot copy and before the final embedding, so a crash at any
 *    instant leaves a pair that resumes (losing at most the steps since the last copy);
 *  - --resume takes a state file, or a folder searched for the newest state that pairs.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/host_log.h"
#include "data/state_seal.h"
#include "safetensors.h"
#include "ti/ti_job.h"

#define STATE_VERSION "2"
#define STATE_SUFFIX ".state.safetensors"
#define STATE_TENSORS 3

static const char *const state_tensor_names[STATE_TENSORS] = {"emb_params", "adamw_m", "adamw_v"};

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

static bool all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

void ti_job_state_path(const ti_job *job, char *out, size_t size)
{
    snprintf(out, size, "%.3800s/%.200s" STATE_SUFFIX, job->out.root, job->emb.name);
}

/* The state file from job->emb as last synced, and the optimizer's moments. A state holding
 * NaN or Inf is refused, so it can never replace a good one. */
static bool write_state(ti_job *job, const char *path, sdt_error *error)
{
    sdt_tensor *param, *grad, *m, *v;
    const char *pname;
    if (!sdt_optimizer_param_views(job->opt, 0, &pname, &param, &grad, &m, &v))
        return sdt_fail(error, SDT_ERR_INTERNAL, "the optimizer has no state to save (a bug: please report)");
    size_t bytes = sdt_tensor_nbytes(param), count = bytes / sizeof(float);
    float *hm = malloc(bytes), *hv = malloc(bytes);
    sdt_backend *be = job->pb.be;
    if (!hm || !hv || be->download(be, hm, m->data, bytes) || be->download(be, hv, v->data, bytes)) {
        free(hm);
        free(hv);
        return sdt_fail(error, SDT_ERR_DEVICE, "reading the optimizer state failed: %s", be->error);
    }
    float scale = job->scaler ? sdt_scaler_get_scale(job->scaler) : 1.0f;
    if (!all_finite(job->emb.vectors, count) || !all_finite(hm, count) || !all_finite(hv, count) || !isfinite(scale)) {
        free(hm);
        free(hv);
        return sdt_fail(error, SDT_ERR_NUMERICAL, "%s: the training state at step %lld holds NaN or infinite values, so it "
                        "was not saved and the previous state file is kept; resume from it", path, (long long)job->step);
    }
    int64_t shape[2] = {job->emb.n_vectors, job->emb.dim};
    sdt_tensor te = sdt_tensor_make(job->emb.vectors, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_tensor tm = sdt_tensor_make(hm, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_tensor tv = sdt_tensor_make(hv, SDT_F32, SDT_DEVICE_CPU, 2, shape);
    sdt_st_write_item items[STATE_TENSORS] = {sdt_st_item_from_tensor(state_tensor_names[0], &te),
                                              sdt_st_item_from_tensor(state_tensor_names[1], &tm),
                                              sdt_st_item_from_tensor(state_tensor_names[2], &tv)};
    char *json = state_json(job);
    char step[32], start_step[32], vectors_hash[SDT_SHA256_HEX], seal[SDT_SHA256_HEX];
    snprintf(step, sizeof step, "%lld", (long long)job->step);
    snprintf(start_step, sizeof start_step, "%lld", (long long)job->start_file_step);
    sdt_vectors_sha256(job->emb.vectors, count, vectors_hash);
    sdt_st_kv meta[] = {{"sdtrain_state", STATE_VERSION}, {"name", job->emb.name}, {"step", step},
                        {"sd_checkpoint", job->checkpoint_hash}, {"sd_checkpoint_name", job->checkpoint_name},
                        {"training", json ? json : "{}"}, {"embedding_file", job->output_path},
                        {"embedding_sha256", vectors_hash}, {"embedding_start_sha256", job->start_file_sha256},
                        {"embedding_start_step", start_step}, {SDT_STATE_SEAL_KEY, seal}};
    size_t n_meta = sizeof meta / sizeof meta[0];
    sdt_state_seal_compute(items, STATE_TENSORS, meta, n_meta - 1, seal);
    bool ok = sdt_st_write(path, items, STATE_TENSORS, meta, n_meta, error);
    free(json);
    free(hm);
    free(hv);
    if (!ok) return false;
    job->last_state_at = ti_job_clock();
    sdt_host_file_saved(job->host, SDT_FILE_TRAINING_STATE, path, job->step);
    return true;
}

bool ti_job_write_run_state(ti_job *job, sdt_error *error)
{
    char path[4096];
    ti_job_state_path(job, path, sizeof path);
    return write_state(job, path, error);
}

bool ti_job_save_state(ti_job *job, const char *path, sdt_error *error)
{
    return ti_job_sync_embedding(job, error) && write_state(job, path, error);
}

/* ---- reading a state: every check that needs no device ---------------------------- */

static int64_t meta_int(const sdt_safetensors *st, const char *key)
{
    const char *v = sdt_st_metadata_get(st, key);
    return v ? strtoll(v, NULL, 10) : -1;
}

/* The three tensors: present, f32, the embedding's size, finite. */
static bool check_tensors(const ti_job *job, const sdt_safetensors *st, const char *path, sdt_error *error)
{
    size_t count = (size_t)job->emb.n_vectors * (size_t)job->emb.dim;
    for (int i = 0; i < STATE_TENSORS; i++) {
        const sdt_st_entry *e = sdt_st_find(st, state_tensor_names[i]);
        if (!e || e->dtype != SDT_ST_F32 || e->nbytes != count * sizeof(float)) {
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' is missing or has the wrong size for this embedding (%d x %d); "
                     "resume with the state file of this embedding", path, state_tensor_names[i], job->emb.n_vectors,
                     job->emb.dim);
        }
        float *copy = malloc(e->nbytes ? (size_t)e->nbytes : 1); /* the mapping may be unaligned for floats */
        bool finite = copy && (memcpy(copy, e->data, (size_t)e->nbytes), all_finite(copy, count));
        free(copy);
        if (!finite) {
            return sdt_fail(error, SDT_ERR_NUMERICAL, "%s: '%s' holds NaN or infinite values (the file is damaged); resume from an "
                     "earlier state, or train without --resume", path, state_tensor_names[i]);
        }
    }
    return true;
}

/* The embedding file must be the one this state was saved with, or the one its run started
 * from (stopped before it replaced the file); anything else would rewind or mix runs. */
static bool check_pairing(const ti_job *job, const sdt_safetensors *st, const char *path, sdt_error *error)
{
    const char *saved_with = sdt_st_metadata_get(st, "embedding_sha256");
    const char *started_from = sdt_st_metadata_get(st, "embedding_start_sha256");
    if (!saved_with || !started_from) {
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the state does not record which embedding it belongs to; resume from a state this "
                 "version of sdtrain wrote", path);
    }
    if (strcmp(job->start_file_sha256, saved_with) == 0 || strcmp(job->start_file_sha256, started_from) == 0) return true;
    long long state_step = (long long)meta_int(st, "step"), file_step = (long long)job->emb.step;
    const char *emb = job->embedding_path;
    if (file_step > state_step)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the embedding %s (step %lld) is newer than this state (step %lld); resuming would "
                 "throw away its newer training; resume from the state saved with it (give --resume its log folder to "
                 "pick the newest that matches), or train on without --resume (the optimizer starts afresh)", path, emb,
                 file_step, state_step);
    if (file_step < state_step)
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: this state (step %lld) is newer than the embedding %s (step %lld) but was not "
                 "saved from it; pass the embedding that run trained with --embedding, or train without --resume", path,
                 state_step, emb, file_step);
    return sdt_fail(error, SDT_ERR_VALIDATION, "%s: this state and the embedding %s are both at step %lld but hold different vectors, "
                 "so they come from different runs; resume with the state saved with this embedding, or train without "
                 "--resume", path, emb, file_step);
}

/* The state must come from this embedding, model and seed, or the run would not continue as it was. */
static bool state_matches_run(const ti_job *job, const sdt_safetensors *st, const cJSON *j, const char *path,
                              sdt_error *error)
{
    const char *name = sdt_st_metadata_get(st, "name");
    const char *hash = sdt_st_metadata_get(st, "sd_checkpoint");
    const char *seed = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "seed"));
    if (!name || strcmp(name, job->emb.name) != 0) {
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: this state belongs to embedding '%s', not '%s'; resume with the matching embedding",
                 path, name ? name : "?", job->emb.name);
    }
    if (hash && *hash && job->checkpoint_hash[0] && strcmp(hash, job->checkpoint_hash) != 0) {
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the run was trained on model %s but this model is %s; resume on the same model",
                 path, hash, job->checkpoint_hash);
    }
    if (!seed || strtoull(seed, NULL, 10) != job->seed) {
        return sdt_fail(error, SDT_ERR_VALIDATION, "%s: the run used seed %s; resume with that seed so the data and noise continue as they "
                 "would have", path, seed ? seed : "?");
    }
    return true;
}

/* Opens path and makes every check that needs no device: version, checksum, identity (name,
 * model when known, seed), pairing with the embedding file, finite tensors. On success *out
 * and *json_out are the open file and its parsed training JSON (the caller frees both). */
static bool open_checked(const ti_job *job, const char *path, sdt_safetensors **out, cJSON **json_out, sdt_error *error)
{
    *out = NULL;
    *json_out = NULL;
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return false;
    const char *version = sdt_st_metadata_get(st, "sdtrain_state");
    const char *training = sdt_st_metadata_get(st, "training");
    cJSON *j = NULL;
    bool ok = false;
    if (version && strcmp(version, "1") == 0)
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: this state was written by an older sdtrain without a checksum or a record "
                 "of its embedding, so it cannot be trusted to continue the run; train on without --resume", path);
    else if (!version || strcmp(version, STATE_VERSION) != 0)
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: not an sdtrain training state (version %s); resume from a *" STATE_SUFFIX
                 " file this plugin wrote", path, version ? version : "missing");
    else if (!training || !(j = cJSON_Parse(training)))
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the state's training record is not valid JSON; resume from another state",
                 path);
    else
        ok = sdt_state_seal_check(st, error) && state_matches_run(job, st, j, path, error) &&
             check_pairing(job, st, path, error) && check_tensors(job, st, path, error);
    if (!ok) {
        cJSON_Delete(j);
        sdt_st_close(st);
        return false;
    }
    *out = st;
    *json_out = j;
    return true;
}

/* ---- --resume with a folder: the newest state that pairs with this embedding ----------- */

typedef struct state_search {
    const ti_job *job;
    char best[4096];
    int64_t best_step;
    int found;
    char first_refusal[1024];
} state_search;

static void consider_state(state_search *s, const char *path)
{
    sdt_error why;
    sdt_error_clear(&why);
    sdt_safetensors *st;
    cJSON *j;
    if (!open_checked(s->job, path, &st, &j, &why)) {
        if (!s->first_refusal[0]) snprintf(s->first_refusal, sizeof s->first_refusal, "%s", why.message);
        s->found++;
        return;
    }
    int64_t step = meta_int(st, "step");
    s->found++;
    if (step > s->best_step) {
        s->best_step = step;
        snprintf(s->best, sizeof s->best, "%s", path);
    }
    cJSON_Delete(j);
    sdt_st_close(st);
}

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

/* The states in folder and in its sub-folders, depth levels down. */
static void search_folder(state_search *s, const char *folder, int depth)
{
    DIR *d = opendir(folder);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", folder, e->d_name) >= (int)sizeof path) continue;
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && depth > 0)
            search_folder(s, path, depth - 1);
        else if (S_ISREG(sb.st_mode) && has_suffix(e->d_name, STATE_SUFFIX))
            consider_state(s, path);
    }
    closedir(d);
}

static bool set_resume_path(ti_job *job, const char *path, sdt_error *error)
{
    char *chosen = strdup(path); /* path may be job->resume_path itself */
    if (!chosen) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    free(job->resume_path);
    job->resume_path = chosen;
    return true;
}

bool ti_job_resolve_resume(ti_job *job, const char *given, sdt_error *error)
{
    struct stat sb;
    if (stat(given, &sb) != 0)
        return sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: the state file or log folder to resume from does not exist; pass "
                        "the *" STATE_SUFFIX " file or the log folder of the run", given);
    if (!S_ISDIR(sb.st_mode)) {
        sdt_safetensors *st;
        cJSON *j;
        if (!open_checked(job, given, &st, &j, error)) return false;
        cJSON_Delete(j);
        sdt_st_close(st);
        return set_resume_path(job, given, error);
    }
    state_search s = {job, "", -1, 0, ""};
    search_folder(&s, given, 3); /* <log>/<date>/<name>/ and one level above */
    if (!s.best[0]) {
        if (s.found)
            return sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: none of the %d training state(s) found there can continue this "
                            "embedding; the first refused: %s", given, s.found, s.first_refusal);
        return sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: no training state (*" STATE_SUFFIX ") was found in this folder or "
                        "its sub-folders; pass the log folder of the run or the state file itself", given);
    }
    sdt_host_log(job->host, SDT_LOG_INFO, "resuming from %s (step %lld), the newest of %d state(s) in %s that matches %s",
                 s.best, (long long)s.best_step, s.found, given, job->embedding_path);
    return set_resume_path(job, s.best, error);
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

static bool apply_state(ti_job *job, const sdt_safetensors *st, const cJSON *j, const char *path, sdt_error *error)
{
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
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* load_state() with a log folder, as resume_state_path */
        if (!ti_job_resolve_resume(job, path, error)) return false;
        path = job->resume_path;
    }
    sdt_safetensors *st;
    cJSON *j;
    if (!open_checked(job, path, &st, &j, error)) return false;
    bool ok = apply_state(job, st, j, path, error);
    cJSON_Delete(j);
    sdt_st_close(st);
    return ok;
}
