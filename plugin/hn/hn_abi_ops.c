/* hn_abi_ops.c - create_hypernetwork() and inspect() of the hypernetwork factory.
 *
 * The ABI's Train-tab struct is called sdt_hn_config, as is the module's shape struct
 * (hn/hn_config.h); the ABI header is read first with its name changed so both fit in this
 * one file, and the ABI's is not used here. */
#define sdt_hn_config sdt_hn_abi_train_config
#include "hn/hn_abi_ops.h"
#undef sdt_hn_config

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "c_numeric.h"
#include "hn/hn_file.h"
#include "train/train_state_describe.h"
#include "torch_file.h"
#include "c_json.h"

/* FNV-1a of the name: a reproducible seed per hypernetwork (A1111 draws from torch's global RNG). */
static uint64_t name_seed(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

static const char *text_or(const char *text, const char *fallback)
{
    return text && text[0] ? text : fallback;
}

/* The spec's text fields as the Create tab reads them, onto A1111's defaults. */
static bool spec_to_config(const sdt_hypernetwork_spec *spec, sdt_hn_config *c, sdt_error *error)
{
    *c = sdt_hn_config_default();
    if (spec->reserved0 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION, "spec.reserved0 must be 0; zero the spec before filling it");
    if (!spec->name || !spec->name[0])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "Name is empty: set spec.name to the hypernetwork's name, e.g. \"my_style\"");
    if (strlen(spec->name) > SDT_HN_NAME_MAX)
        return sdt_fail(error, SDT_ERR_VALIDATION, "Name is longer than %d bytes: choose a shorter spec.name",
                        SDT_HN_NAME_MAX);
    snprintf(c->name, sizeof c->name, "%s", spec->name);
    if (spec->widths && spec->widths[0] &&
        !sdt_hn_parse_widths(spec->widths, c->widths, SDT_HN_MAX_WIDTHS, &c->width_count, error))
        return false;
    if (spec->layer_structure && spec->layer_structure[0]) {
        if (!sdt_hn_parse_layer_structure(spec->layer_structure, c, error)) return false;
        memset(c->dropout_structure, 0, sizeof c->dropout_structure);
    }
    const char *activation = text_or(spec->activation, "linear");
    if (strlen(activation) >= sizeof c->activation)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "activation \"%.40s...\" is too long; use one of A1111's names, e.g. \"relu\"", activation);
    snprintf(c->activation, sizeof c->activation, "%s", activation);
    if (!sdt_hn_init_parse(text_or(spec->weight_init, "Normal"), &c->init, error)) return false;
    c->layer_norm = spec->layer_norm;
    c->use_dropout = spec->use_dropout;
    c->activate_output = spec->activate_output;
    /* A1111 reads the dropout structure only with "Use dropout" on; otherwise all zeros. */
    if (c->use_dropout && spec->dropout_structure && spec->dropout_structure[0] &&
        !sdt_hn_parse_dropout_structure(spec->dropout_structure, c, error))
        return false;
    return sdt_hn_config_validate(c, true, error);
}

bool sdt_hn_abi_create(const sdt_hypernetwork_spec *spec, char *path_out, size_t path_out_size, sdt_error *error)
{
    sdt_hn_config c;
    if (!spec_to_config(spec, &c, error)) return false;
    struct stat st;
    if (!spec->output_dir || !spec->output_dir[0])
        return sdt_fail(error, SDT_ERR_VALIDATION, "Output folder is empty: set spec.output_dir to an existing folder");
    if (stat(spec->output_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sdt_fail(error, SDT_ERR_NOT_FOUND, "%s: the output folder does not exist; create it or choose another",
                        spec->output_dir);
    char path[4096];
    snprintf(path, sizeof path, "%.3800s/%.200s.pt", spec->output_dir, c.name);
    sdt_backend *cpu = sdt_backend_cpu_create(1);
    if (!cpu)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "out of memory starting the CPU backend; close other programs and retry");
    sdt_hn *hn = sdt_hn_create_file(&c, path, spec->overwrite, cpu, name_seed(c.name), error);
    sdt_hn_free(hn);
    cpu->destroy(cpu);
    if (!hn) return false;
    snprintf(path_out, path_out_size, "%s", path);
    return true;
}

static void format_structure(const double *values, int count, char *out, size_t out_size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < count && used < out_size; i++)
        used += (size_t)sdt_c_snprintf(out + used, out_size - used, "%s%g", i ? ", " : "", values[i]);
}

static cJSON *number_array(const double *values, int count)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < count; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(values[i]));
    return a;
}

static char *describe_json(const sdt_hn *hn, const sdt_hypernetwork_info *info, const char *path, bool is_pt)
{
    const sdt_hn_config *c = sdt_hn_get_config(hn);
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "path", path);
    cJSON_AddStringToObject(root, "format", is_pt ? "a1111-pt" : "safetensors");
    cJSON_AddStringToObject(root, "kind", "hypernetwork");
    cJSON_AddStringToObject(root, "name", info->name);
    double widths[SDT_HN_MAX_WIDTHS];
    for (int i = 0; i < c->width_count; i++) widths[i] = c->widths[i];
    cJSON_AddItemToObject(root, "widths", number_array(widths, c->width_count));
    cJSON_AddItemToObject(root, "layer_structure", number_array(c->layer_structure, c->entry_count));
    cJSON_AddNumberToObject(root, "layers", info->layer_count);
    cJSON_AddStringToObject(root, "activation", info->activation);
    cJSON_AddStringToObject(root, "weight_initialization", info->weight_init);
    cJSON_AddBoolToObject(root, "layer_norm", c->layer_norm);
    cJSON_AddBoolToObject(root, "use_dropout", c->use_dropout);
    cJSON_AddItemToObject(root, "dropout_structure", number_array(c->dropout_structure, c->entry_count));
    cJSON_AddBoolToObject(root, "last_layer_dropout", sdt_hn_config_last_layer_dropout(c));
    cJSON_AddBoolToObject(root, "activate_output", c->activate_output);
    cJSON_AddNumberToObject(root, "step", (double)info->step);
    cJSON_AddNumberToObject(root, "parameter_count", (double)info->parameter_count);
    cJSON_AddBoolToObject(root, "all_finite", info->all_finite);
    if (info->checkpoint_name[0])
        cJSON_AddStringToObject(root, "sd_checkpoint_name", info->checkpoint_name);
    else
        cJSON_AddNullToObject(root, "sd_checkpoint_name");
    if (info->checkpoint_hash[0])
        cJSON_AddStringToObject(root, "sd_checkpoint", info->checkpoint_hash);
    else
        cJSON_AddNullToObject(root, "sd_checkpoint");
    char *text = sdt_json_print(root);
    cJSON_Delete(root);
    return text;
}

static bool values_finite(const sdt_hn *hn, bool *finite, sdt_error *error)
{
    int64_t n = sdt_hn_param_numel(hn);
    float *values = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!values) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory reading %lld parameters", (long long)n);
    bool ok = sdt_hn_download(hn, values, error);
    *finite = true;
    for (int64_t i = 0; ok && i < n && *finite; i++) *finite = isfinite(values[i]);
    free(values);
    return ok;
}

/* A run's resume state (a hypernetwork's, a joint run's, or an embedding's): the shared facts. */
static bool inspect_state(const char *path, sdt_hypernetwork_info *info, char **json_out, sdt_error *error)
{
    sdt_state_facts f;
    if (!sdt_state_describe(path, &f, NULL, json_out, error)) return false;
    const sdt_state_part_facts *hn = sdt_state_facts_part(&f, "hypernetwork");
    info->step = f.step;
    info->parameter_count = hn ? (uint64_t)hn->trained_values : 0;
    info->all_finite = f.all_finite;
    snprintf(info->name, sizeof info->name, "%s", f.name);
    snprintf(info->checkpoint_name, sizeof info->checkpoint_name, "%s", f.checkpoint_name);
    snprintf(info->checkpoint_hash, sizeof info->checkpoint_hash, "%s", f.checkpoint_hash);
    return true;
}

bool sdt_hn_abi_inspect(const char *path, sdt_hypernetwork_info *info, char **json_out, sdt_error *error)
{
    if (sdt_state_file_is_state(path)) return inspect_state(path, info, json_out, error);
    sdt_backend *cpu = sdt_backend_cpu_create(1);
    if (!cpu)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY,
                        "out of memory starting the CPU backend; close other programs and retry");
    bool is_pt = sdt_torch_sniff_file(path) != SDT_TORCH_NOT_TORCH;
    sdt_hn *hn = sdt_hn_load(path, cpu, error);
    bool ok = hn != NULL;
    if (ok) {
        const sdt_hn_config *c = sdt_hn_get_config(hn);
        const sdt_hn_info *file_info = sdt_hn_get_info_const(hn);
        info->width_count = (uint32_t)c->width_count;
        for (int i = 0; i < c->width_count && i < 8; i++) info->widths[i] = (uint32_t)c->widths[i];
        info->layer_count = (uint32_t)(c->entry_count - 1);
        info->step = file_info->step;
        info->parameter_count = (uint64_t)sdt_hn_param_numel(hn);
        info->layer_norm = c->layer_norm;
        info->use_dropout = c->use_dropout;
        info->activate_output = c->activate_output;
        snprintf(info->name, sizeof info->name, "%s", c->name);
        snprintf(info->activation, sizeof info->activation, "%s", c->activation[0] ? c->activation : "linear");
        snprintf(info->weight_init, sizeof info->weight_init, "%s", sdt_hn_init_name(c->init));
        format_structure(c->layer_structure, c->entry_count, info->layer_structure, sizeof info->layer_structure);
        snprintf(info->checkpoint_name, sizeof info->checkpoint_name, "%s", file_info->sd_checkpoint_name);
        snprintf(info->checkpoint_hash, sizeof info->checkpoint_hash, "%.71s", file_info->sd_checkpoint);
        ok = values_finite(hn, &info->all_finite, error);
    }
    if (ok && json_out) {
        *json_out = describe_json(hn, info, path, is_pt);
        if (!*json_out) ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of memory describing %s as JSON", path);
    }
    sdt_hn_free(hn);
    cpu->destroy(cpu);
    return ok;
}
