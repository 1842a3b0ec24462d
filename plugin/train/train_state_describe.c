/* train_state_describe.c - see train_state_describe.h. */
#include "train/train_state_describe.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/state_seal.h"
#include "safetensors.h"
#include "c_json.h"

#define STATE_MARKER "sdtrain_state"
#define PART_FILE_SUFFIX "_file"

bool sdt_state_file_is_state(const char *path)
{
    sdt_error ignored = {0};
    sdt_safetensors *st = sdt_st_open(path, &ignored);
    bool state = st && sdt_st_metadata_get(st, STATE_MARKER) != NULL;
    sdt_st_close(st);
    return state;
}

const sdt_state_part_facts *sdt_state_facts_part(const sdt_state_facts *facts, const char *what)
{
    for (int i = 0; i < facts->n_parts; i++)
        if (strcmp(facts->parts[i].what, what) == 0) return &facts->parts[i];
    return NULL;
}

static int64_t meta_int(const sdt_safetensors *st, const char *key, int64_t fallback)
{
    const char *v = sdt_st_metadata_get(st, key);
    if (!v || !*v) return fallback;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *end ? fallback : (int64_t)n;
}

static void meta_copy(const sdt_safetensors *st, const char *key, char *out, size_t size)
{
    const char *v = sdt_st_metadata_get(st, key);
    snprintf(out, size, "%s", v ? v : "");
}

/* Every "<what>_file" key names a part (the writer adds the hashes beside it). */
static void read_parts(const sdt_safetensors *st, sdt_state_facts *f)
{
    size_t suffix = strlen(PART_FILE_SUFFIX);
    for (size_t i = 0; i < sdt_st_metadata_count(st) && f->n_parts < SDT_STATE_FACTS_MAX_PARTS; i++) {
        const char *key = sdt_st_metadata_key(st, i);
        size_t len = strlen(key);
        if (len <= suffix || len - suffix >= sizeof f->parts[0].what ||
            strcmp(key + len - suffix, PART_FILE_SUFFIX) != 0)
            continue;
        sdt_state_part_facts *p = &f->parts[f->n_parts];
        snprintf(p->what, sizeof p->what, "%.*s", (int)(len - suffix), key);
        char k[64];
        snprintf(k, sizeof k, "%s_sha256", p->what);
        if (!sdt_st_metadata_get(st, k)) continue; /* not a part's record */
        meta_copy(st, k, p->sha256, sizeof p->sha256);
        meta_copy(st, key, p->file, sizeof p->file);
        snprintf(k, sizeof k, "%s_start_sha256", p->what);
        meta_copy(st, k, p->start_sha256, sizeof p->start_sha256);
        snprintf(k, sizeof k, "%s_start_step", p->what);
        p->start_step = meta_int(st, k, -1);
        f->n_parts++;
    }
}

/* The mean L2 norm of a 2-D f32 tensor's rows (0 for another dtype). */
static double mean_row_norm(const sdt_st_entry *e)
{
    if (e->dtype != SDT_ST_F32 || e->shape[0] <= 0 || e->nbytes / sizeof(float) < (uint64_t)(e->shape[0] * e->shape[1]))
        return 0;
    const float *v = e->data;
    double sum = 0;
    for (int64_t r = 0; r < e->shape[0]; r++) {
        double s = 0;
        for (int64_t c = 0; c < e->shape[1]; c++) s += (double)v[r * e->shape[1] + c] * v[r * e->shape[1] + c];
        sum += sqrt(s);
    }
    return sum / (double)e->shape[0];
}

/* A tensor belongs to a part by its "<what>." prefix, or to the only part of a lone run;
 * AdamW's moments (adamw_m, adamw_v) are not trained values. */
static void count_tensors(const sdt_safetensors *st, sdt_state_facts *f)
{
    f->all_finite = true;
    f->tensor_count = (int64_t)sdt_st_count(st);
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        if (e->dtype == SDT_ST_F32) {
            const float *v = e->data;
            for (uint64_t k = 0; k < e->nbytes / sizeof(float) && f->all_finite; k++) f->all_finite = isfinite(v[k]);
        }
        sdt_state_part_facts *part = f->n_parts == 1 ? &f->parts[0] : NULL;
        const char *rest = e->name;
        for (int p = 0; p < f->n_parts; p++) {
            size_t n = strlen(f->parts[p].what);
            if (strncmp(e->name, f->parts[p].what, n) == 0 && e->name[n] == '.') {
                part = &f->parts[p];
                rest = e->name + n + 1;
            }
        }
        if (!part || strncmp(rest, "adamw_m", 7) == 0 || strncmp(rest, "adamw_v", 7) == 0) continue;
        int64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= e->shape[d];
        part->trained_values += numel;
        if (strcmp(part->what, "embedding") == 0 && e->ndim == 2) {
            part->rows = e->shape[0], part->cols = e->shape[1];
            part->vector_norm_mean = mean_row_norm(e);
        }
    }
}

/* precision and the loss scale from the state's training record. */
static void read_training(const sdt_safetensors *st, sdt_state_facts *f)
{
    const char *training = sdt_st_metadata_get(st, "training");
    cJSON *j = training ? sdt_json_parse(training, strlen(training)) : NULL;
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(j, "precision");
    snprintf(f->precision, sizeof f->precision, "%s", cJSON_IsString(precision) ? precision->valuestring : "");
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "scaler"), "scale");
    f->has_loss_scale = cJSON_IsNumber(scale);
    f->loss_scale = f->has_loss_scale ? scale->valuedouble : 0;
    cJSON_Delete(j);
}

static void add_or_replace(cJSON *root, const char *key, cJSON *item)
{
    if (cJSON_GetObjectItemCaseSensitive(root, key))
        cJSON_ReplaceItemInObjectCaseSensitive(root, key, item);
    else
        cJSON_AddItemToObject(root, key, item);
}

static cJSON *string_or_null(const char *s)
{
    return s[0] ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static char *facts_json(const sdt_state_facts *f, const char *path, const char *base_json)
{
    cJSON *root = base_json ? sdt_json_parse(base_json, strlen(base_json)) : NULL;
    if (!root) root = cJSON_CreateObject();
    if (!root) return NULL;
    add_or_replace(root, "format", cJSON_CreateString("sdtrain-training-state"));
    add_or_replace(root, "file", cJSON_CreateString(path));
    add_or_replace(root, "name", cJSON_CreateString(f->name));
    cJSON *methods = cJSON_CreateArray();
    for (int i = 0; i < f->n_parts; i++) cJSON_AddItemToArray(methods, cJSON_CreateString(f->parts[i].what));
    add_or_replace(root, "methods", methods);
    add_or_replace(root, "step", cJSON_CreateNumber((double)f->step));
    add_or_replace(root, "precision", string_or_null(f->precision));
    add_or_replace(root, "loss_scale", f->has_loss_scale ? cJSON_CreateNumber(f->loss_scale) : cJSON_CreateNull());
    add_or_replace(root, "sd_checkpoint", string_or_null(f->checkpoint_hash));
    add_or_replace(root, "sd_checkpoint_name", string_or_null(f->checkpoint_name));
    cJSON *pairs = cJSON_CreateArray();
    for (int i = 0; i < f->n_parts; i++) {
        const sdt_state_part_facts *p = &f->parts[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "method", p->what);
        cJSON_AddStringToObject(o, "file", p->file);
        cJSON_AddStringToObject(o, "sha256", p->sha256);
        cJSON_AddItemToObject(o, "start_sha256", string_or_null(p->start_sha256));
        cJSON_AddNumberToObject(o, "start_step", (double)p->start_step);
        cJSON_AddNumberToObject(o, "trained_values", (double)p->trained_values);
        cJSON_AddItemToArray(pairs, o);
    }
    add_or_replace(root, "paired_files", pairs);
    add_or_replace(root, "tensors", cJSON_CreateNumber((double)f->tensor_count));
    add_or_replace(root, "all_finite", cJSON_CreateBool(f->all_finite));
    add_or_replace(root, "sealed", cJSON_CreateBool(f->sealed));
    if (!f->sealed) add_or_replace(root, "seal_problem", cJSON_CreateString(f->seal_problem));
    char *text = sdt_json_print(root);
    cJSON_Delete(root);
    return text;
}

bool sdt_state_describe(const char *path, sdt_state_facts *f, const char *base_json, char **json_out, sdt_error *error)
{
    memset(f, 0, sizeof *f);
    if (json_out) *json_out = NULL;
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return false;
    if (!sdt_st_metadata_get(st, STATE_MARKER)) {
        sdt_st_close(st);
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: not an sdtrain training state (no %s in its metadata)", path,
                        STATE_MARKER);
    }
    meta_copy(st, "name", f->name, sizeof f->name);
    f->step = meta_int(st, "step", -1);
    meta_copy(st, "sd_checkpoint", f->checkpoint_hash, sizeof f->checkpoint_hash);
    meta_copy(st, "sd_checkpoint_name", f->checkpoint_name, sizeof f->checkpoint_name);
    read_training(st, f);
    read_parts(st, f);
    count_tensors(st, f);
    sdt_error seal = {0};
    f->sealed = sdt_state_seal_check(st, &seal);
    if (!f->sealed) snprintf(f->seal_problem, sizeof f->seal_problem, "%s", seal.message);
    sdt_st_close(st);
    if (!json_out) return true;
    *json_out = facts_json(f, path, base_json);
    return *json_out ? true : sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory describing %s as JSON", path);
}
