/* train_job_state.c - the full-state checkpoint that resumes a run bit for bit, and what keeps it
 * from losing or rewinding work, for every method:
 *  - every state is sealed with a SHA-256 over its tensors and metadata (state_seal.h) and
 *    checked on load, tensors finite included; a non-finite state is never written;
 *  - it records each part's file (an embedding, a hypernetwork): the content hash of the values
 *    it was saved with and of those the output file held when the run began. A resume accepts
 *    a file only when it holds one of the two (the second: the run was stopped before it
 *    replaced the file), so a state never silently rewinds newer training;
 *  - it is written after every snapshot copy and before the final files, so a crash at any
 *    instant leaves a pair that resumes (losing at most the steps since the last copy);
 *  - --resume takes a state file, or a folder searched for the newest state that pairs.
 * Tensors: for each group, each parameter's value (<prefix><name>) and AdamW moments
 * (<prefix>adamw_m, <prefix>adamw_v; ".<name>" appended when the group has several
 * parameters), so a lone embedding's state keeps its names: emb_params, adamw_m, adamw_v. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host/host_log.h"
#include "c_numeric.h"
#include "data/state_seal.h"
#include "safetensors.h"
#include "train/ema.h"
#include "train/train_job.h"
#include "c_json.h"

#define STATE_VERSION "2"
#define STATE_SUFFIX ".state.safetensors"
#define STATE_KEY_MAX 160

/* One tensor of the state: a group's parameter value or one of its moments. */
typedef struct state_tensor {
    char name[STATE_KEY_MAX];
    sdt_tensor *device; /* where it lives in the run */
    int group;
} state_tensor;

static const sdt_train_part *part_of_group(const sdt_train_job *job, int group)
{
    for (int p = 0; p < job->n_parts; p++)
        if (job->parts[p].group == group) return &job->parts[p];
    return NULL;
}

/* Every tensor of the state, in a fixed order; *n gets the count. malloc'd. */
static state_tensor *state_tensors(const sdt_train_job *job, int *n)
{
    int total = 0;
    for (int g = 0; g < job->engine.n_groups; g++) total += 3 * sdt_optimizer_param_count(job->engine.groups[g].opt);
    state_tensor *t = calloc((size_t)(total ? total : 1), sizeof *t);
    int k = 0;
    for (int g = 0; t && g < job->engine.n_groups; g++) {
        sdt_optimizer *opt = job->engine.groups[g].opt;
        const sdt_train_part *part = part_of_group(job, g);
        const char *prefix = job->engine.groups[g].state_prefix ? job->engine.groups[g].state_prefix
                             : part                             ? part->state_prefix
                                                                : "";
        int count = sdt_optimizer_param_count(opt);
        for (int i = 0; i < count; i++) {
            const char *name;
            sdt_tensor *param, *grad, *m, *v;
            sdt_optimizer_param_views(opt, i, &name, &param, &grad, &m, &v);
            const char *sep = count > 1 ? "." : "", *suffix = count > 1 ? name : "";
            snprintf(t[k].name, STATE_KEY_MAX, "%s%s", prefix, name);
            t[k].device = param;
            snprintf(t[k + 1].name, STATE_KEY_MAX, "%sadamw_m%s%s", prefix, sep, suffix);
            t[k + 1].device = m;
            snprintf(t[k + 2].name, STATE_KEY_MAX, "%sadamw_v%s%s", prefix, sep, suffix);
            t[k + 2].device = v;
            t[k].group = t[k + 1].group = t[k + 2].group = g;
            k += 3;
        }
    }
    *n = k;
    return t;
}

/* ---- the options a resume must repeat -------------------------------------------------- */

/* An option that changes what the run trains or averages, as the state records it: its text in
 * this run ("" when off or not used). max_steps, the learning rates and what is only written or
 * shown (copies, previews, the CSV, validate_every) may change on resume; these may not. */
typedef struct run_option {
    const char *key, *option; /* the state's key (the settings file's); how the user names it */
    char text[48];
} run_option;

#define RUN_OPTIONS_MAX 20

static void option_number(run_option *o, const char *key, const char *option, bool used, double v)
{
    *o = (run_option){key, option, ""};
    if (used) sdt_c_snprintf(o->text, sizeof o->text, "%.15g", v);
}

static void option_bool(run_option *o, const char *key, const char *option, bool v)
{
    *o = (run_option){key, option, ""};
    if (v) snprintf(o->text, sizeof o->text, "true");
}

static int run_options(const sdt_train_job *job, run_option *o)
{
    const sdt_loss_options *l = &job->loss;
    bool ema = job->ema.decay > 0;
    int n = 0;
    option_number(&o[n++], "validation_split", "--validation-split", job->val.split > 0, job->val.split);
    option_number(&o[n++], "ema_decay", "--ema", ema, job->ema.decay);
    option_number(&o[n++], "ema_every", "--ema-every", ema, (double)job->ema.every);
    o[n] = (run_option){"loss_type", "--loss-type", ""};
    snprintf(o[n++].text, sizeof o->text, "%s", sdt_loss_type_name(l->type));
    option_number(&o[n++], "huber_delta", "--huber-delta", l->type == SDT_LOSS_HUBER, l->huber_delta);
    option_number(&o[n++], "min_snr_gamma", "--min-snr-gamma", l->min_snr_gamma > 0, l->min_snr_gamma);
    option_number(&o[n++], "noise_offset", "--noise-offset", l->noise_offset > 0, l->noise_offset);
    option_bool(&o[n++], "noise_offset_random_strength", "--noise-offset-random-strength", l->noise_offset_random);
    option_number(&o[n++], "timestep_min", "--timestep-min", true, l->timestep_min);
    option_number(&o[n++], "timestep_max", "--timestep-max", true, l->timestep_max);
    option_bool(&o[n++], "zero_terminal_snr", "--zero-terminal-snr", l->zero_terminal_snr);
    option_bool(&o[n++], "flip", "--flip", job->data.flip);
    option_number(&o[n++], "caption_dropout", "--caption-dropout", job->data.caption_dropout > 0,
                  job->data.caption_dropout);
    option_number(&o[n++], "keep_tokens", "--keep-tokens", job->data.keep_tokens > 0, job->data.keep_tokens);
    option_number(&o[n++], "tag_dropout", "--tag-dropout", job->data.tag_dropout > 0, job->data.tag_dropout);
    option_bool(&o[n++], "shuffle_tags", "--shuffle-tags", job->data.shuffle_tags);
    option_bool(&o[n++], "use_alpha_as_loss_weight", "--alpha-loss-weight", job->data.use_alpha);
    return n;
}

static void add_run_options(const sdt_train_job *job, cJSON *record)
{
    run_option o[RUN_OPTIONS_MAX];
    int n = run_options(job, o);
    cJSON *j = cJSON_AddObjectToObject(record, "options");
    for (int i = 0; i < n; i++)
        if (o[i].text[0]) cJSON_AddStringToObject(j, o[i].key, o[i].text);
}

/* The state's options against this run's: a state without the record (an older sdtrain's) is
 * taken as it is; a recorded value that is not text is damage; another value is refused with the
 * option, both values and the fix. Turning the average on at a resume is the one change allowed:
 * it starts from the resumed values (restore_average says so) and changes nothing else. */
static bool check_run_options(const sdt_train_job *job, const cJSON *record, const char *path, sdt_error *error)
{
    const cJSON *saved = cJSON_GetObjectItemCaseSensitive(record, "options");
    if (!saved) return true;
    if (!cJSON_IsObject(saved))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state's training record has 'options' that is not an object (the file "
                        "is damaged); resume from an earlier state, or train without --resume",
                        path);
    const cJSON *v;
    cJSON_ArrayForEach(v, saved)
    {
        if (!cJSON_IsString(v))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: the state's training record has options.%s that is not text (the "
                            "file is damaged); resume from an earlier state, or train without --resume",
                            path, v->string ? v->string : "?");
    }
    run_option o[RUN_OPTIONS_MAX];
    int n = run_options(job, o);
    bool average_was_off = !cJSON_GetObjectItemCaseSensitive(saved, "ema_decay");
    for (int i = 0; i < n; i++) {
        const char *was = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(saved, o[i].key));
        if (!was) was = "";
        if (strcmp(was, o[i].text) == 0 || (average_was_off && strncmp(o[i].key, "ema_", 4) == 0)) continue;
        return sdt_fail(
            error, SDT_ERR_VALIDATION,
            "%s: its run was trained with %s (%s) %s, and this resume asks for %s, so "
            "the run would not continue as it was; resume with %s %s, or train without --resume to start afresh "
            "with %s",
            path, o[i].key, o[i].option, was[0] ? was : "off", o[i].text[0] ? o[i].text : "off", o[i].option,
            was[0] ? was : "off", o[i].text[0] ? o[i].text : "off");
    }
    return true;
}

static char *state_json(sdt_train_job *job)
{
    cJSON *j = cJSON_CreateObject();
    char num[64];
    snprintf(num, sizeof num, "%" PRIu64, job->opt.seed);
    cJSON_AddStringToObject(j, "seed", num);
    cJSON_AddNumberToObject(j, "step", (double)job->step);
    cJSON_AddNumberToObject(j, "initial_step", (double)job->initial_step);
    cJSON_AddNumberToObject(j, "end_step", (double)job->end_step);
    cJSON_AddNumberToObject(j, "optimizer_steps", (double)sdt_optimizer_step_count(job->engine.groups[0].opt));
    cJSON_AddNumberToObject(j, "skipped", (double)job->engine.skipped);
    cJSON_AddStringToObject(j, "precision", sdt_precision_name(job->precision));
    int64_t epoch;
    int position;
    sdt_data_order_get_position(&job->data.order, &epoch, &position);
    cJSON_AddNumberToObject(j, "data_epoch", (double)epoch);
    cJSON_AddNumberToObject(j, "data_position", position);
    char sched[4096];
    if (sdt_lr_schedule_format(&job->engine.groups[0].lr, sched, sizeof sched))
        cJSON_AddStringToObject(j, "learn_rate", sched);
    if (job->engine.n_groups > 1) { /* every group's own counts (the first one's are above too) */
        cJSON *groups = cJSON_AddObjectToObject(j, "groups");
        for (int g = 0; g < job->engine.n_groups; g++) {
            cJSON *o = cJSON_AddObjectToObject(groups, job->engine.groups[g].name);
            cJSON_AddNumberToObject(o, "optimizer_steps", (double)sdt_optimizer_step_count(job->engine.groups[g].opt));
            cJSON_AddNumberToObject(o, "skipped", (double)job->engine.groups[g].skipped);
            if (sdt_lr_schedule_format(&job->engine.groups[g].lr, sched, sizeof sched))
                cJSON_AddStringToObject(o, "learn_rate", sched);
        }
    }
    const sdt_fallback *fb = &job->engine.fallback;
    cJSON *f = cJSON_AddObjectToObject(j, "fallback");
    cJSON_AddBoolToObject(f, "fired", fb->fired);
    cJSON_AddNumberToObject(f, "fired_at_step", (double)fb->fired_at_step);
    cJSON_AddNumberToObject(f, "fired_by", fb->fired_by);
    cJSON_AddNumberToObject(f, "nonfinite_total", (double)fb->nonfinite_total);
    cJSON_AddNumberToObject(f, "consecutive", fb->consecutive);
    if (job->engine.scaler) {
        sdt_scaler_state s;
        sdt_scaler_get_state(job->engine.scaler, &s);
        cJSON *sc = cJSON_AddObjectToObject(j, "scaler");
        cJSON_AddNumberToObject(sc, "scale", s.scale);
        cJSON_AddNumberToObject(sc, "growth_tracker", (double)s.growth_tracker);
        cJSON_AddNumberToObject(sc, "hysteresis_tracker", s.hysteresis_tracker);
    }
    sdt_validation_to_json(&job->val, j);
    add_run_options(job, j);
    sdt_run_outputs_to_json(&job->outputs, j);
    char *text = sdt_json_print_compact(j);
    cJSON_Delete(j);
    return text;
}

static bool all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

static bool all_nonnegative(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0.0f) return false;
    return true;
}

void sdt_train_job_state_path(const sdt_train_job *job, char *out, size_t size)
{
    snprintf(out, size, "%.3800s/%.200s" STATE_SUFFIX, job->outputs.dirs.root, job->name);
}

/* The hash of one group's values in parameter order (the value tensors of that group in t, every
 * third entry); false when out of memory. */
static bool group_sha256(const state_tensor *t, float *const *host, int n, int group, char hex[SDT_SHA256_HEX])
{
    size_t count = 0;
    for (int i = 0; i < n; i += 3)
        if (t[i].group == group) count += (size_t)sdt_tensor_numel(t[i].device);
    float *all = malloc(count ? count * sizeof(float) : 1), *at = all;
    if (!all) return false;
    for (int i = 0; i < n; i += 3)
        if (t[i].group == group) {
            memcpy(at, host[i], sdt_tensor_nbytes(t[i].device));
            at += sdt_tensor_numel(t[i].device);
        }
    sdt_vectors_sha256(all, count, hex);
    free(all);
    return true;
}

/* Per part: <what>_file, <what>_sha256 (of the values saved), <what>_start_sha256, <what>_start_step. */
#define PART_META 4

/* The state file from the device values and the optimizer's moments. A state holding NaN or
 * Inf is refused, so it can never replace a good one. */
static bool write_state(sdt_train_job *job, const char *path, sdt_error *error)
{
    int n = 0;
    state_tensor *t = state_tensors(job, &n);
    float **host = calloc((size_t)(n ? n : 1), sizeof *host);
    sdt_st_write_item *items = calloc((size_t)n + SDT_EMA_MAX_GROUPS, sizeof *items); /* and the average's */
    sdt_tensor *views = calloc((size_t)n + SDT_EMA_MAX_GROUPS, sizeof *views);
    sdt_backend *be = job->pb.be;
    bool host_ok = t && host && items && views, ok = host_ok, finite = true;
    for (int i = 0; ok && i < n; i++) {
        size_t bytes = sdt_tensor_nbytes(t[i].device);
        host[i] = malloc(bytes ? bytes : 1);
        host_ok = host[i] != NULL;
        ok = host_ok && be->download(be, host[i], t[i].device->data, bytes) == 0;
        if (ok) {
            finite &= all_finite(host[i], bytes / sizeof(float));
            views[i] = sdt_tensor_make(host[i], SDT_F32, SDT_DEVICE_CPU, t[i].device->ndim, t[i].device->shape);
            items[i] = sdt_st_item_from_tensor(t[i].name, &views[i]);
        }
    }
    if (!ok)
        sdt_fail(error, host_ok ? be->error.code : SDT_ERR_OUT_OF_MEMORY, "reading the optimizer state failed: %s",
                 host_ok ? be->error.message : "out of host memory");
    int n_items = n;
    char ema_names[SDT_EMA_MAX_GROUPS][STATE_KEY_MAX];
    for (int g = 0; ok && g < job->ema.n_groups; g++) { /* the average: "ema.<group>", one block per group */
        sdt_ema_state_key(&job->engine, g, ema_names[g], STATE_KEY_MAX);
        int64_t shape[1] = {(int64_t)job->ema.count[g]};
        finite &= all_finite(job->ema.values[g], job->ema.count[g]);
        views[n_items] = sdt_tensor_make(job->ema.values[g], SDT_F32, SDT_DEVICE_CPU, 1, shape);
        items[n_items] = sdt_st_item_from_tensor(ema_names[g], &views[n_items]);
        n_items++;
    }
    float scale = job->engine.scaler ? sdt_scaler_get_scale(job->engine.scaler) : 1.0f;
    if (ok && (!finite || !isfinite(scale)))
        ok = sdt_fail(error, SDT_ERR_NUMERICAL,
                      "%s: the training state at step %lld holds NaN or infinite values, so it "
                      "was not saved and the previous state file is kept; resume from it",
                      path, (long long)job->step);
    char *json = ok ? state_json(job) : NULL;
    if (ok && !json) ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory writing the training state");
    char keys[SDT_JOB_MAX_PARTS][PART_META + 1][64], hashes[SDT_JOB_MAX_PARTS][SDT_SHA256_HEX],
        steps[SDT_JOB_MAX_PARTS][32];
    char ema_hashes[SDT_JOB_MAX_PARTS][SDT_SHA256_HEX];
    char step[32], seal[SDT_SHA256_HEX];
    sdt_st_kv meta[6 + SDT_JOB_MAX_PARTS * (PART_META + 1) + 1];
    size_t n_meta = 0;
    if (ok) {
        snprintf(step, sizeof step, "%lld", (long long)job->step);
        meta[n_meta++] = (sdt_st_kv){"sdtrain_state", STATE_VERSION};
        meta[n_meta++] = (sdt_st_kv){"name", job->name};
        meta[n_meta++] = (sdt_st_kv){"step", step};
        meta[n_meta++] = (sdt_st_kv){"sd_checkpoint", job->checkpoint_hash};
        meta[n_meta++] = (sdt_st_kv){"sd_checkpoint_name", job->checkpoint_name};
        meta[n_meta++] = (sdt_st_kv){"training", json};
        for (int p = 0; p < job->n_parts; p++) {
            const sdt_train_part *part = &job->parts[p];
            if (part->ops->values_sha256) {
                if (!(ok = part->ops->values_sha256((sdt_train_part *)part, hashes[p], error))) break;
            } else if (!group_sha256(t, host, n, part->group, hashes[p])) {
                ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory hashing the training state");
                break;
            }
            snprintf(keys[p][0], 64, "%s_file", part->what);
            snprintf(keys[p][1], 64, "%s_sha256", part->what);
            snprintf(keys[p][2], 64, "%s_start_sha256", part->what);
            snprintf(keys[p][3], 64, "%s_start_step", part->what);
            snprintf(steps[p], sizeof steps[p], "%lld", (long long)part->start_step);
            meta[n_meta++] = (sdt_st_kv){keys[p][0], part->output_path};
            meta[n_meta++] = (sdt_st_kv){keys[p][1], hashes[p]};
            meta[n_meta++] = (sdt_st_kv){keys[p][2], part->start_sha256};
            meta[n_meta++] = (sdt_st_kv){keys[p][3], steps[p]};
            if (job->ema.result && part->group < job->ema.n_groups) { /* its result holds the average: pairs too */
                if (part->ops->average_sha256) {
                    if (!(ok = part->ops->average_sha256((sdt_train_part *)part, job, ema_hashes[p], error))) break;
                } else
                    sdt_vectors_sha256(job->ema.values[part->group], job->ema.count[part->group], ema_hashes[p]);
                snprintf(keys[p][4], 64, "%s_ema_sha256", part->what);
                meta[n_meta++] = (sdt_st_kv){keys[p][4], ema_hashes[p]};
            }
        }
    }
    if (ok) {
        meta[n_meta++] = (sdt_st_kv){SDT_STATE_SEAL_KEY, seal};
        sdt_state_seal_compute(items, (size_t)n_items, meta, n_meta - 1, seal);
        ok = sdt_st_write(path, items, (size_t)n_items, meta, n_meta, error);
    }
    free(json);
    for (int i = 0; host && i < n; i++) free(host[i]);
    free(host);
    free(items);
    free(views);
    free(t);
    if (!ok) return false;
    job->last_state_at = sdt_run_clock();
    sdt_host_file_saved(job->host, SDT_FILE_TRAINING_STATE, path, job->step);
    return true;
}

bool sdt_train_job_write_run_state(sdt_train_job *job, sdt_error *error)
{
    char path[4096];
    sdt_train_job_state_path(job, path, sizeof path);
    return write_state(job, path, error);
}

bool sdt_train_job_save_state(sdt_train_job *job, const char *path, sdt_error *error)
{
    return sdt_train_job_sync_parts(job, error) && write_state(job, path, error);
}

/* ---- reading a state: every check that needs no device ---------------------------- */

static int64_t meta_int(const sdt_safetensors *st, const char *key)
{
    const char *v = sdt_st_metadata_get(st, key);
    return v ? strtoll(v, NULL, 10) : -1;
}

/* Every tensor: present, f32, the run's size, finite. Before the groups exist (an early
 * resolve), nothing is checked here: the next resolve, after the model, checks them. */
static bool check_tensors(const sdt_train_job *job, const sdt_safetensors *st, const char *path, sdt_error *error)
{
    int n = 0;
    state_tensor *t = state_tensors(job, &n);
    if (!t) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const sdt_st_entry *e = sdt_st_find(st, t[i].name);
        size_t bytes = sdt_tensor_nbytes(t[i].device);
        if (!e || e->dtype != SDT_ST_F32 || e->nbytes != bytes) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: tensor '%s' is missing or has the wrong size for this %s (%zu values); "
                          "resume with the state file of this %s",
                          path, t[i].name, job->engine.groups[t[i].group].name, bytes / sizeof(float),
                          job->engine.groups[t[i].group].name);
            break;
        }
        float *copy = malloc(e->nbytes ? (size_t)e->nbytes : 1); /* the mapping may be unaligned for floats */
        size_t count = bytes / sizeof(float);
        bool finite = copy && (memcpy(copy, e->data, (size_t)e->nbytes), all_finite(copy, count));
        /* AdamW's second moments are running means of squares: a negative one (a forged file) would
         * put a NaN in the first update's square root. Every third tensor is a group's v. */
        bool moments_ok = !finite || i % 3 != 2 || all_nonnegative(copy, count);
        free(copy);
        if (!finite)
            ok = sdt_fail(error, SDT_ERR_NUMERICAL,
                          "%s: '%s' holds NaN or infinite values (the file is damaged); resume from an "
                          "earlier state, or train without --resume",
                          path, t[i].name);
        else if (!moments_ok)
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: '%s' holds negative second moments, which AdamW never writes (the "
                          "file is damaged); resume from an earlier state, or train without --resume",
                          path, t[i].name);
    }
    free(t);
    return ok;
}

/* Each part's file must be the one this state was saved with, or the one its run started
 * from (stopped before it replaced the file); anything else would rewind or mix runs. */
static bool check_pairing(const sdt_train_job *job, const sdt_safetensors *st, const char *path, sdt_error *error)
{
    for (int p = 0; p < job->n_parts; p++) {
        const sdt_train_part *part = &job->parts[p];
        char key[64];
        snprintf(key, sizeof key, "%s_sha256", part->what);
        const char *saved_with = sdt_st_metadata_get(st, key);
        snprintf(key, sizeof key, "%s_start_sha256", part->what);
        const char *started_from = sdt_st_metadata_get(st, key);
        if (!saved_with || !started_from)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: the state does not record which %s it belongs to; resume from a state "
                            "this version of sdtrain wrote",
                            path, part->what);
        snprintf(key, sizeof key, "%s_ema_sha256", part->what);
        const char *average = sdt_st_metadata_get(st, key); /* ema_result: the file holds the average */
        if (strcmp(part->start_sha256, saved_with) == 0 || strcmp(part->start_sha256, started_from) == 0 ||
            (average && strcmp(part->start_sha256, average) == 0))
            continue;
        long long state_step = (long long)meta_int(st, "step"), file_step = (long long)part->start_step;
        const char *file = part->input_path;
        if (file_step > state_step)
            return sdt_fail(
                error, SDT_ERR_VALIDATION,
                "%s: the %s %s (step %lld) is newer than this state (step %lld); resuming would "
                "throw away its newer training; resume from the state saved with it (give --resume its log folder to "
                "pick the newest that matches), or train on without --resume (the optimizer starts afresh)",
                path, part->what, file, file_step, state_step);
        if (file_step < state_step)
            return sdt_fail(error, SDT_ERR_VALIDATION,
                            "%s: this state (step %lld) is newer than the %s %s (step %lld) but was not "
                            "saved from it; pass the %s that run trained with %s, or train without --resume",
                            path, state_step, part->what, file, file_step, part->what, part->option);
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: this state and the %s %s are both at step %lld but hold different values, "
                        "so they come from different runs; resume with the state saved with this %s, or train without "
                        "--resume",
                        path, part->what, file, file_step, part->what);
    }
    return true;
}

static double num(const cJSON *o, const char *k)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* The training record's counts are what a run writes: whole numbers, none negative, the step
 * not before the run's first and the same in the metadata. Only a forged seal gets other values
 * this far, and they would index the data order or the schedule out of range. */
static bool check_record(const sdt_safetensors *st, const cJSON *j, const char *path, sdt_error *error)
{
    static const char *const counts[] = {"step",    "initial_step", "end_step",     "optimizer_steps",
                                         "skipped", "data_epoch",   "data_position"};
    static const char *const fallback_counts[] = {"nonfinite_total", "consecutive"}; /* fired_at_step: -1 = never */
    const char *bad = NULL;
    double value = 0;
    for (size_t i = 0; !bad && i < sizeof counts / sizeof counts[0]; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, counts[i]);
        value = cJSON_GetNumberValue(o);
        if (!cJSON_IsNumber(o) || !(value >= 0) || value > 9e15 || value != floor(value)) bad = counts[i];
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "fallback");
    for (size_t i = 0; !bad && f && i < sizeof fallback_counts / sizeof fallback_counts[0]; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(f, fallback_counts[i]);
        value = cJSON_GetNumberValue(o);
        if (o && (!(value >= 0) || value > 9e15 || value != floor(value))) bad = fallback_counts[i];
    }
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(j, "groups");
    const cJSON *g;
    cJSON_ArrayForEach(g, groups)
    {
        for (int k = 0; !bad && k < 2; k++) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(g, k ? "skipped" : "optimizer_steps");
            value = cJSON_GetNumberValue(o);
            if (o && (!(value >= 0) || value > 9e15 || value != floor(value))) bad = k ? "skipped" : "optimizer_steps";
        }
    }
    if (bad)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state's training record has %s = %.17g, which no run writes (the "
                        "file is damaged); resume from an earlier state, or train without --resume",
                        path, bad, value);
    double step = num(j, "step");
    if (num(j, "initial_step") > step || (double)meta_int(st, "step") != step)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the state's step (%.17g) disagrees with its first step or its "
                        "metadata (the file is damaged); resume from an earlier state, or train without --resume",
                        path, step);
    return sdt_run_outputs_check_json(j, step, path, error) && sdt_validation_check_json(j, path, error);
}

/* The state must come from this run's name, model and seed, or the run would not continue as it was. */
static bool state_matches_run(const sdt_train_job *job, const sdt_safetensors *st, const cJSON *j, const char *path,
                              sdt_error *error)
{
    const char *name = sdt_st_metadata_get(st, "name");
    const char *hash = sdt_st_metadata_get(st, "sd_checkpoint");
    const char *seed = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "seed"));
    if (!name || strcmp(name, job->name) != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: this state belongs to %s '%s', not '%s'; resume with the matching %s", path,
                        job->parts[0].what, name ? name : "?", job->name, job->parts[0].what);
    if (hash && *hash && job->checkpoint_hash[0] && strcmp(hash, job->checkpoint_hash) != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the run was trained on model %s but this model is %s; resume on the same model", path,
                        hash, job->checkpoint_hash);
    if (!seed || strtoull(seed, NULL, 10) != job->opt.seed)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the run used seed %s; resume with that seed so the data and noise continue as they "
                        "would have",
                        path, seed ? seed : "?");
    return true;
}

/* Opens path and makes every check that needs no device: version, checksum, identity (name,
 * model when known, seed), pairing with each part's file, finite tensors. On success *out
 * and *json_out are the open file and its parsed training JSON (the caller frees both). */
static bool open_checked(const sdt_train_job *job, const char *path, sdt_safetensors **out, cJSON **json_out,
                         sdt_error *error)
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
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: this state was written by an older sdtrain without a checksum or a record "
                 "of its embedding, so it cannot be trusted to continue the run; train on without --resume",
                 path);
    else if (!version || strcmp(version, STATE_VERSION) != 0)
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: not an sdtrain training state (version %s); resume from a *" STATE_SUFFIX
                 " file this plugin wrote",
                 path, version ? version : "missing");
    else if (!training || !(j = sdt_json_parse(training, strlen(training))))
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the state's training record is not valid JSON; resume from another state", path);
    else
        ok = sdt_state_seal_check(st, error) && check_record(st, j, path, error) &&
             state_matches_run(job, st, j, path, error) && check_run_options(job, j, path, error) &&
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

/* ---- --resume with a folder: the newest state that pairs with this run's files -------- */

typedef struct state_search {
    const sdt_train_job *job;
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

static bool set_resume_path(sdt_train_job *job, const char *path, sdt_error *error)
{
    char *chosen = strdup(path); /* path may be job->resume_path itself */
    if (!chosen) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory");
    free(job->resume_path);
    job->resume_path = chosen;
    return true;
}

bool sdt_train_job_resolve_resume(sdt_train_job *job, const char *given, sdt_error *error)
{
    struct stat sb;
    if (stat(given, &sb) != 0)
        return sdt_fail(error, SDT_ERR_NOT_FOUND,
                        "%s: the state file or log folder to resume from does not exist; pass "
                        "the *" STATE_SUFFIX " file or the log folder of the run",
                        given);
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
            return sdt_fail(error, SDT_ERR_NOT_FOUND,
                            "%s: none of the %d training state(s) found there can continue this "
                            "%s; the first refused: %s",
                            given, s.found, job->parts[0].what, s.first_refusal);
        return sdt_fail(error, SDT_ERR_NOT_FOUND,
                        "%s: no training state (*" STATE_SUFFIX ") was found in this folder or "
                        "its sub-folders; pass the log folder of the run or the state file itself",
                        given);
    }
    sdt_host_log(job->host, SDT_LOG_INFO,
                 "resuming from %s (step %lld), the newest of %d state(s) in %s that matches %s", s.best,
                 (long long)s.best_step, s.found, given, job->parts[0].input_path);
    return set_resume_path(job, s.best, error);
}

void sdt_train_job_resume_hashes(const sdt_train_job *job, const sdt_train_part *p, char saved[65], char started[65])
{
    saved[0] = started[0] = '\0';
    sdt_error why;
    sdt_safetensors *st = job->resume_path ? sdt_st_open(job->resume_path, &why) : NULL;
    if (!st) return;
    char key[64];
    snprintf(key, sizeof key, "%s_sha256", p->what);
    const char *v = sdt_st_metadata_get(st, key);
    snprintf(saved, 65, "%s", v ? v : "");
    snprintf(key, sizeof key, "%s_start_sha256", p->what);
    v = sdt_st_metadata_get(st, key);
    snprintf(started, 65, "%s", v ? v : "");
    sdt_st_close(st);
}

/* Every tensor of the state onto the device (check_tensors has checked names, sizes, finiteness). */
static bool restore_tensors(sdt_train_job *job, const sdt_safetensors *st, const char *path, sdt_error *error)
{
    int n = 0;
    state_tensor *t = state_tensors(job, &n);
    bool ok = t != NULL;
    for (int i = 0; ok && i < n; i++) {
        const sdt_st_entry *e = sdt_st_find(st, t[i].name);
        sdt_tensor host;
        if (!e || !sdt_st_entry_tensor(st, e, &host, error) || sdt_tensor_numel(&host) != sdt_tensor_numel(t[i].device))
            ok = sdt_fail(error, SDT_ERR_VALIDATION,
                          "%s: tensor '%s' is missing or has the wrong size; resume with the state "
                          "file of this run",
                          path, t[i].name);
        else if (job->pb.be->upload(job->pb.be, t[i].device->data, host.data, sdt_tensor_nbytes(t[i].device)))
            ok = sdt_fail(error, job->pb.be->error.code, "%s: copying '%s' to the %s backend failed: %s", path,
                          t[i].name, job->pb.be->name, job->pb.be->error.message);
    }
    free(t);
    return ok;
}

/* The loss scaler's scale and trackers, when the state has them and this run scales. */
static bool restore_scaler(sdt_train_job *job, const cJSON *sc, sdt_error *error)
{
    if (!sc || !job->engine.scaler) return true;
    sdt_scaler_state s;
    sdt_scaler_get_state(job->engine.scaler, &s);
    s.scale = (float)num(sc, "scale");
    s.growth_tracker = (int64_t)num(sc, "growth_tracker");
    s.hysteresis_tracker = (int)num(sc, "hysteresis_tracker");
    return sdt_scaler_set_state(job->engine.scaler, &s, error) == SDT_CORE_OK;
}

/* The average from the state ("ema.<group>"); a state without it (a run without --ema) starts it
 * from the resumed values. */
static bool apply_state(sdt_train_job *job, const sdt_safetensors *st, const cJSON *j, const char *path,
                        sdt_error *error)
{
    if (!restore_tensors(job, st, path, error) ||
        !sdt_ema_restore(&job->ema, &job->engine, job->pb.be, st,
                         cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(j, "options"), "ema_decay")),
                         path, job->host, error))
        return false;
    sdt_validation_from_json(&job->val, j);
    sdt_step_engine *e = &job->engine;
    job->step = (int64_t)num(j, "step");
    job->initial_step = (int64_t)num(j, "initial_step");
    e->skipped = (int64_t)num(j, "skipped");
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(j, "groups");
    for (int g = 0; g < e->n_groups; g++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(groups, e->groups[g].name);
        sdt_optimizer_set_step_count(e->groups[g].opt, (int64_t)num(o ? o : j, "optimizer_steps"));
        e->groups[g].skipped = o ? (int64_t)num(o, "skipped") : e->skipped;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "fallback");
    e->fallback.fired = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "fired"));
    e->fallback.fired_at_step = (int64_t)num(f, "fired_at_step");
    e->fallback.fired_by = (sdt_fallback_trigger)(int)num(f, "fired_by");
    e->fallback.nonfinite_total = (int64_t)num(f, "nonfinite_total");
    e->fallback.consecutive = (int)num(f, "consecutive");
    /* The schedules come from this panel (max steps may have grown since the state was saved),
     * parsed at the resumed step, with the fallback's backoff applied again if it fired. */
    if (job->opt.max_steps < job->step)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "%s: the run is already at step %lld, past max steps (%lld); raise max steps "
                        "to continue it",
                        path, (long long)job->step, (long long)job->opt.max_steps);
    if (job->opt.max_steps == job->step) { /* e.g. killed between the final state and the final files: write them */
        sdt_host_log(job->host, SDT_LOG_INFO,
                     "%s is at step %lld, which is max steps: nothing is left to train, so the run "
                     "only writes the trained files from it; raise max steps to train further",
                     path, (long long)job->step);
        job->end_step = job->step; /* no schedule to parse: no step will run */
    } else if (!sdt_step_engine_parse_schedules(e, job->step, job->opt.max_steps, &job->end_step, error) ||
               !sdt_step_engine_reapply_backoff(e, job->step, error)) {
        return false;
    }
    const char *prec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "precision"));
    if (prec && strcmp(prec, "fp32") == 0 && job->precision != SDT_PRECISION_FP32) {
        if (!sdt_train_job_use_fp32(job, error)) return false;
    }
    if (!restore_scaler(job, cJSON_GetObjectItemCaseSensitive(j, "scaler"), error)) return false;
    if (!sdt_data_order_set_position(&job->data.order, (int64_t)num(j, "data_epoch"), (int)num(j, "data_position"),
                                     error))
        return false;
    sdt_run_outputs_from_json(&job->outputs, j, job->step, job->host);
    return true;
}

bool sdt_train_job_load_state(sdt_train_job *job, const char *path, sdt_error *error)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* load_state() with a log folder, as resume_state_path */
        if (!sdt_train_job_resolve_resume(job, path, error)) return false;
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
