/* hn_file.c - hypernetwork .safetensors files and A1111's key rules; see hn_file.h. */
#include "hn/hn_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_numeric.h"
#include "data/file_name.h"
#include "pickle_value.h"
#include "safetensors.h"
#include "torch_file.h"
#include "torch_save.h"

/* ---- A1111's key rules ---- */

void sdt_hn_fix_old_key(const char *key, char *out, size_t out_size)
{
    static const char *const renames[][2] = {
        {"linear1.bias", "linear.0.bias"},
        {"linear1.weight", "linear.0.weight"},
        {"linear2.bias", "linear.1.bias"},
        {"linear2.weight", "linear.1.weight"},
    };
    for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++)
        if (strcmp(key, renames[i][0]) == 0) {
            snprintf(out, out_size, "%s", renames[i][1]);
            return;
        }
    snprintf(out, out_size, "%s", key);
}

/* The file's base name without folder and extension, sanitised as a name. */
static void file_base_name(const char *path, char *out, size_t out_size)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char raw[SDT_HN_NAME_MAX + 1];
    snprintf(raw, sizeof(raw), "%.*s", (int)(len < SDT_HN_NAME_MAX ? len : SDT_HN_NAME_MAX), base);
    char *clean = sdt_file_name_sanitise(raw, SDT_HN_NAME_MAX);
    snprintf(out, out_size, "%s", clean ? clean : "");
    free(clean);
}

bool sdt_hn_keys_to_config(const sdt_hn_file_keys *keys, const char *fallback_name, const char *file,
                           sdt_hn_config *config, sdt_hn_info *info, sdt_error *error)
{
    sdt_hn_config c = sdt_hn_config_default();
    sdt_error ignored;
    if (keys->has_name && sdt_file_name_check("hypernetwork", keys->name, SDT_HN_NAME_MAX, &ignored))
        snprintf(c.name, sizeof(c.name), "%s", keys->name);
    else {
        /* A1111 names from the file name when the key is absent; a stored name that is not a
         * usable file name is sanitised rather than refused, so old files still load */
        char *clean = keys->has_name ? sdt_file_name_sanitise(keys->name, SDT_HN_NAME_MAX) : NULL;
        if (clean && clean[0])
            snprintf(c.name, sizeof(c.name), "%s", clean);
        else
            snprintf(c.name, sizeof(c.name), "%s", fallback_name ? fallback_name : "");
        free(clean);
        if (!c.name[0]) snprintf(c.name, sizeof(c.name), "hypernetwork");
    }
    if (keys->has_layer_structure) {
        c.entry_count = keys->entry_count;
        memcpy(c.layer_structure, keys->layer_structure, sizeof(c.layer_structure));
    } /* else A1111's [1, 2, 1] from the default */
    if (keys->has_activation && keys->activation[0] && strcmp(keys->activation, "None") != 0)
        snprintf(c.activation, sizeof(c.activation), "%s", keys->activation);
    else
        snprintf(c.activation, sizeof(c.activation), "linear");
    /* A1111 never reads the init of a file it loads (the weights are there), so an
     * unknown name is kept as Normal rather than refused */
    if (!keys->has_init || !sdt_hn_init_parse(keys->init, &c.init, &ignored)) c.init = SDT_HN_INIT_NORMAL;
    c.layer_norm = keys->has_layer_norm && keys->layer_norm;
    c.activate_output = keys->has_activate_output ? keys->activate_output : true;
    bool last_layer_dropout = keys->has_last_layer_dropout && keys->last_layer_dropout;
    if (keys->has_dropout_structure) {
        if (keys->dropout_count < c.entry_count)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: dropout_structure has %d entries but layer_structure has "
                            "%d; the file "
                            "is damaged (re-save it, or remove dropout_structure to use A1111's rebuild)",
                            file, keys->dropout_count, c.entry_count);
        bool any = false;
        for (int i = 0; i < c.entry_count; i++) {
            c.dropout_structure[i] = keys->dropout_structure[i];
            any = any || keys->dropout_structure[i] != 0.0;
        }
        c.use_dropout = any || (keys->has_use_dropout && keys->use_dropout);
    } else {
        c.use_dropout = keys->has_use_dropout && keys->use_dropout;
        sdt_hn_legacy_dropout(c.entry_count, c.use_dropout, last_layer_dropout, c.dropout_structure);
    }
    if (keys->width_count > 0) {
        c.width_count = keys->width_count;
        memcpy(c.widths, keys->widths, sizeof(c.widths));
    }
    sdt_error why;
    if (!sdt_hn_config_validate(&c, false, &why))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s", file, why.message);
    memset(info, 0, sizeof(*info));
    info->step = keys->has_step ? keys->step : 0;
    snprintf(info->sd_checkpoint, sizeof(info->sd_checkpoint), "%s", keys->sd_checkpoint);
    snprintf(info->sd_checkpoint_name, sizeof(info->sd_checkpoint_name), "%s", keys->sd_checkpoint_name);
    *config = c;
    return true;
}

/* ---- metadata text ---- */

/* Python's repr of a float: the shortest digits that read back to the same double, and
 * ".0" on integral values ("1.0", "0.05"). */
static void format_double(double v, char *out, size_t out_size)
{
    for (int digits = 1; digits <= 17; digits++) {
        sdt_c_snprintf(out, out_size, "%.*g", digits, v);
        if (sdt_c_strtod(out, NULL) == v) break;
    }
    if (isfinite(v) && !strpbrk(out, ".e")) strncat(out, ".0", out_size - strlen(out) - 1);
}

static void format_list(const double *v, int n, char *out, size_t out_size)
{
    size_t used = (size_t)snprintf(out, out_size, "[");
    for (int i = 0; i < n && used < out_size; i++) {
        char num[40];
        format_double(v[i], num, sizeof(num));
        used += (size_t)snprintf(out + used, out_size - used, "%s%s", i ? ", " : "", num);
    }
    if (used < out_size) snprintf(out + used, out_size - used, "]");
}

static void format_int_list(const int *v, int n, char *out, size_t out_size)
{
    size_t used = (size_t)snprintf(out, out_size, "[");
    for (int i = 0; i < n && used < out_size; i++)
        used += (size_t)snprintf(out + used, out_size - used, "%s%d", i ? ", " : "", v[i]);
    if (used < out_size) snprintf(out + used, out_size - used, "]");
}

static bool parse_bool(const char *file, const char *key, const char *text, bool *out, sdt_error *error)
{
    if (!strcmp(text, "true") || !strcmp(text, "True") || !strcmp(text, "1")) return *out = true, true;
    if (!strcmp(text, "false") || !strcmp(text, "False") || !strcmp(text, "0")) return *out = false, true;
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: metadata %s is \"%s\", not true or false; fix or remove the "
                    "key",
                    file, key, text);
}

/* "[1.0, 2.0, 1.0]" (brackets optional) -> numbers. */
static bool parse_list(const char *file, const char *key, const char *text, double *out, int max, int *count,
                       sdt_error *error)
{
    char inner[1024];
    const char *start = text, *end = text + strlen(text);
    while (*start == ' ') start++;
    if (*start == '[') start++;
    while (end > start && end[-1] == ' ') end--;
    if (end > start && end[-1] == ']') end--;
    if ((size_t)(end - start) >= sizeof(inner))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: metadata %s is too long; the file is damaged", file, key);
    snprintf(inner, sizeof(inner), "%.*s", (int)(end - start), start);
    sdt_error why;
    if (!sdt_hn_parse_numbers(key, inner, out, max, count, &why))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: metadata %s", file, why.message);
    return true;
}

/* The four true/false keys of a file and where each lands in the keys. */
#define HN_FLAG_KEYS 4
typedef struct hn_flag_key {
    const char *key;
    bool *has, *value;
} hn_flag_key;

static void hn_flag_keys(sdt_hn_file_keys *k, hn_flag_key *out)
{
    out[0] = (hn_flag_key){"is_layer_norm", &k->has_layer_norm, &k->layer_norm};
    out[1] = (hn_flag_key){"use_dropout", &k->has_use_dropout, &k->use_dropout};
    out[2] = (hn_flag_key){"activate_output", &k->has_activate_output, &k->activate_output};
    out[3] = (hn_flag_key){"last_layer_dropout", &k->has_last_layer_dropout, &k->last_layer_dropout};
}

static const char *meta_or_none(const char *value)
{
    return value && value[0] && strcmp(value, "None") != 0 ? value : NULL;
}

/* Metadata -> keys. Absent keys keep their presence flag false. */
static bool st_read_keys(const sdt_safetensors *st, const char *file, sdt_hn_file_keys *k, sdt_error *error)
{
    memset(k, 0, sizeof(*k));
    const char *v;
    if ((v = sdt_st_metadata_get(st, "name"))) k->has_name = true, snprintf(k->name, sizeof(k->name), "%s", v);
    if ((v = sdt_st_metadata_get(st, "step"))) {
        char *end;
        errno = 0;
        long long step = strtoll(v, &end, 10);
        if (*end || end == v || errno || step < 0)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: metadata step is \"%s\", not a step count; fix or remove "
                            "the key",
                            file, v);
        k->has_step = true, k->step = step;
    }
    if ((v = sdt_st_metadata_get(st, "layer_structure"))) {
        k->has_layer_structure = true;
        if (!parse_list(file, "layer_structure", v, k->layer_structure, SDT_HN_MAX_ENTRIES, &k->entry_count, error))
            return false;
    }
    if ((v = meta_or_none(sdt_st_metadata_get(st, "activation_func"))))
        k->has_activation = true, snprintf(k->activation, sizeof(k->activation), "%s", v);
    if ((v = sdt_st_metadata_get(st, "weight_initialization")))
        k->has_init = true, snprintf(k->init, sizeof(k->init), "%s", v);
    hn_flag_key flags[HN_FLAG_KEYS];
    hn_flag_keys(k, flags);
    for (size_t i = 0; i < HN_FLAG_KEYS; i++)
        if ((v = sdt_st_metadata_get(st, flags[i].key))) {
            *flags[i].has = true;
            if (!parse_bool(file, flags[i].key, v, flags[i].value, error)) return false;
        }
    if ((v = meta_or_none(sdt_st_metadata_get(st, "dropout_structure")))) {
        k->has_dropout_structure = true;
        if (!parse_list(file, "dropout_structure", v, k->dropout_structure, SDT_HN_MAX_ENTRIES, &k->dropout_count,
                        error))
            return false;
    }
    if ((v = meta_or_none(sdt_st_metadata_get(st, "sd_checkpoint"))))
        snprintf(k->sd_checkpoint, sizeof(k->sd_checkpoint), "%s", v);
    if ((v = meta_or_none(sdt_st_metadata_get(st, "sd_checkpoint_name"))))
        snprintf(k->sd_checkpoint_name, sizeof(k->sd_checkpoint_name), "%s", v);
    if ((v = sdt_st_metadata_get(st, "modules"))) {
        double widths[SDT_HN_MAX_WIDTHS];
        if (!parse_list(file, "modules", v, widths, SDT_HN_MAX_WIDTHS, &k->width_count, error)) return false;
        for (int i = 0; i < k->width_count; i++) {
            if (widths[i] != floor(widths[i]) || widths[i] < 1 || widths[i] > SDT_HN_MAX_WIDTH)
                return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                "%s: metadata modules lists %g, not a width; fix or "
                                "remove the key",
                                file, widths[i]);
            k->widths[i] = (int)widths[i];
        }
    }
    return true;
}

/* Splits "<width>.<0|1>.<state-dict key>"; false when the name has another shape. */
static bool split_tensor_name(const char *name, int *width, int *kind, char *key, size_t key_size)
{
    char *end;
    long w = strtol(name, &end, 10);
    if (end == name || *end != '.' || w < 1 || w > SDT_HN_MAX_WIDTH) return false;
    const char *p = end + 1;
    if ((p[0] != '0' && p[0] != '1') || p[1] != '.') return false;
    *width = (int)w;
    *kind = p[0] - '0';
    snprintf(key, key_size, "%s", p + 2);
    return true;
}

/* Widths in order of first appearance when the file does not list them. */
static void widths_from_names(const sdt_safetensors *st, sdt_hn_file_keys *k)
{
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        int width, kind;
        char key[128];
        if (!split_tensor_name(sdt_st_at(st, i)->name, &width, &kind, key, sizeof(key))) continue;
        bool seen = false;
        for (int j = 0; j < k->width_count; j++) seen = seen || k->widths[j] == width;
        if (!seen && k->width_count < SDT_HN_MAX_WIDTHS) k->widths[k->width_count++] = width;
    }
    /* header order is not kept by every writer: ascending is the stable choice */
    for (int i = 1; i < k->width_count; i++)
        for (int j = i; j > 0 && k->widths[j - 1] > k->widths[j]; j--) {
            int t = k->widths[j];
            k->widths[j] = k->widths[j - 1], k->widths[j - 1] = t;
        }
}

static int64_t param_offset(const sdt_hn *hn, int index)
{
    int64_t offset = 0;
    for (int i = 0; i < index; i++) offset += sdt_tensor_numel(&sdt_hn_param_at_const(hn, i)->value);
    return offset;
}

static void format_shape(int ndim, const int64_t *shape, char *out, size_t out_size)
{
    size_t used = (size_t)snprintf(out, out_size, "[");
    for (int d = 0; d < ndim && used < out_size; d++)
        used += (size_t)snprintf(out + used, out_size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < out_size) snprintf(out + used, out_size - used, "]");
}

static void describe_structure(const sdt_hn_config *c, char *out, size_t out_size)
{
    char ls[256];
    format_list(c->layer_structure, c->entry_count, ls, sizeof(ls));
    snprintf(out, out_size, "layer structure %s, activation %s%s, layer norm %s", ls, c->activation,
             c->activate_output && strcmp(c->activation, "linear") ? " (output "
                                                                     "too)"
                                                                   : "",
             c->layer_norm ? "on" : "off");
}

/* One tensor of a file, whatever the format, named "<width>.<0|1>.<state-dict key>". */
typedef struct hn_file_tensor {
    char name[192];
    sdt_dtype dtype;
    bool dtype_ok;          /* F32, F16 or BF16 */
    const char *dtype_name; /* for the sentence when not */
    int ndim;
    int64_t shape[SDT_ST_MAX_DIMS];
    const void *data;
} hn_file_tensor;

/* Copies every tensor into host (parameter order), checking names and shapes both ways. */
static bool hn_fill(const hn_file_tensor *tensors, size_t n, const char *file, sdt_hn *hn, float *host,
                    sdt_error *error)
{
    int count = sdt_hn_param_count(hn);
    bool *filled = calloc((size_t)count, sizeof(bool));
    if (!filled) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while reading", file);
    bool ok = true;
    char structure[512];
    describe_structure(sdt_hn_get_config(hn), structure, sizeof(structure));
    for (size_t i = 0; ok && i < n; i++) {
        const hn_file_tensor *e = &tensors[i];
        int width, kind;
        char key[128], fixed[160], name[192];
        sdt_hn_param *p = NULL;
        if (split_tensor_name(e->name, &width, &kind, key, sizeof(key))) {
            sdt_hn_fix_old_key(key, fixed, sizeof(fixed));
            snprintf(name, sizeof(name), "%d.%d.%s", width, kind, fixed);
            p = sdt_hn_param_find(hn, name);
        }
        if (!p) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: tensor \"%s\" does not belong to a hypernetwork with %s; "
                          "the metadata does not describe these tensors (re-save the file from its source)",
                          file, e->name, structure);
            break;
        }
        int index = (int)(p - sdt_hn_param_at(hn, 0));
        if (filled[index]) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" appears twice (old and new naming); keep one",
                          file, e->name);
            break;
        }
        bool shape_ok = e->ndim == p->value.ndim;
        for (int d = 0; shape_ok && d < e->ndim; d++) shape_ok = e->shape[d] == p->value.shape[d];
        if (!shape_ok) {
            char have[96], want[96];
            format_shape(e->ndim, e->shape, have, sizeof(have));
            format_shape(p->value.ndim, p->value.shape, want, sizeof(want));
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: tensor \"%s\" has shape %s but a hypernetwork with %s needs "
                          "%s; the metadata does not match the tensors",
                          file, e->name, have, structure, want);
            break;
        }
        if (!e->dtype_ok) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: tensor \"%s\" is %s; hypernetwork weights must be F32, F16 "
                          "or BF16",
                          file, e->name, e->dtype_name);
            break;
        }
        sdt_load_f32(e->data, e->dtype, host + param_offset(hn, index), sdt_tensor_numel(&p->value));
        filled[index] = true;
    }
    for (int i = 0; ok && i < count; i++)
        if (!filled[i])
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT,
                          "%s: tensor \"%s\" is missing for a hypernetwork with %s; the "
                          "file is incomplete (re-save it from its source)",
                          file, sdt_hn_param_at(hn, i)->name, structure);
    free(filled);
    return ok;
}

/* Keys + tensors -> a hypernetwork on be (both formats end here). */
static sdt_hn *hn_build(const sdt_hn_file_keys *keys, const hn_file_tensor *tensors, size_t n, const char *path,
                        sdt_backend *be, sdt_error *error)
{
    sdt_hn_config config;
    sdt_hn_info info;
    char fallback[SDT_HN_NAME_MAX + 1];
    file_base_name(path, fallback, sizeof(fallback));
    if (keys->width_count == 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: no tensor is named like a hypernetwork module "
                 "(\"768.0.linear.0.weight\"); this is not a hypernetwork file",
                 path);
        return NULL;
    }
    if (!sdt_hn_keys_to_config(keys, fallback, path, &config, &info, error)) return NULL;
    sdt_hn *hn = sdt_hn_alloc(&config, be, error);
    if (!hn) {
        sdt_error_wrap(error, "%s", path);
        return NULL;
    }
    float *host = calloc((size_t)sdt_hn_param_numel(hn), sizeof(float));
    bool ok = host != NULL;
    if (!ok)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld weights", path,
                 (long long)sdt_hn_param_numel(hn));
    ok = ok && hn_fill(tensors, n, path, hn, host, error) && sdt_hn_upload(hn, host, error);
    free(host);
    if (!ok) {
        sdt_hn_free(hn);
        return NULL;
    }
    *sdt_hn_get_info(hn) = info;
    return hn;
}

sdt_hn *sdt_hn_load_safetensors(const char *path, sdt_backend *be, sdt_error *error)
{
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return NULL;
    sdt_hn_file_keys keys;
    sdt_hn *hn = NULL;
    size_t n = sdt_st_count(st);
    hn_file_tensor *tensors = calloc(n ? n : 1, sizeof(*tensors));
    if (!tensors)
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while reading", path);
    else if (st_read_keys(st, path, &keys, error)) {
        if (keys.width_count == 0) widths_from_names(st, &keys);
        for (size_t i = 0; i < n; i++) {
            const sdt_st_entry *e = sdt_st_at(st, i);
            hn_file_tensor *t = &tensors[i];
            snprintf(t->name, sizeof(t->name), "%s", e->name);
            t->dtype_ok = sdt_st_dtype_to_tensor(e->dtype, &t->dtype) && t->dtype != SDT_I32;
            t->dtype_name = sdt_st_dtype_name(e->dtype);
            t->ndim = e->ndim;
            memcpy(t->shape, e->shape, sizeof(t->shape));
            t->data = e->data;
        }
        hn = hn_build(&keys, tensors, n, path, be, error);
    }
    free(tensors);
    sdt_st_close(st);
    return hn;
}

bool sdt_hn_save_safetensors(const sdt_hn *hn, const char *path, sdt_error *error)
{
    const sdt_hn_config *c = sdt_hn_get_config(hn);
    const sdt_hn_info *info = sdt_hn_get_info_const(hn);
    int count = sdt_hn_param_count(hn);
    float *host = calloc((size_t)sdt_hn_param_numel(hn) + 1, sizeof(float));
    sdt_st_write_item *items = calloc((size_t)count, sizeof(*items));
    bool ok = host && items;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while saving; nothing was written", path);
    ok = ok && sdt_hn_download(hn, host, error);
    int64_t offset = 0;
    for (int i = 0; ok && i < count; i++) {
        const sdt_hn_param *p = sdt_hn_param_at_const(hn, i);
        items[i] = (sdt_st_write_item){.name = p->name,
                                       .dtype = SDT_ST_F32,
                                       .ndim = p->value.ndim,
                                       .shape = p->value.shape,
                                       .data = host + offset};
        offset += sdt_tensor_numel(&p->value);
    }
    char step[32], layers[512], dropout[512], modules[128];
    double effective[SDT_HN_MAX_ENTRIES];
    for (int i = 0; i < c->entry_count; i++) effective[i] = c->use_dropout ? c->dropout_structure[i] : 0.0;
    snprintf(step, sizeof(step), "%lld", (long long)info->step);
    format_list(c->layer_structure, c->entry_count, layers, sizeof(layers));
    format_list(effective, c->entry_count, dropout, sizeof(dropout));
    format_int_list(c->widths, c->width_count, modules, sizeof(modules));
    sdt_st_kv meta[16];
    size_t n = 0;
    meta[n++] = (sdt_st_kv){"name", c->name};
    meta[n++] = (sdt_st_kv){"step", step};
    meta[n++] = (sdt_st_kv){"layer_structure", layers};
    meta[n++] = (sdt_st_kv){"activation_func", c->activation};
    meta[n++] = (sdt_st_kv){"weight_initialization", sdt_hn_init_name(c->init)};
    meta[n++] = (sdt_st_kv){"is_layer_norm", c->layer_norm ? "true" : "false"};
    meta[n++] = (sdt_st_kv){"use_dropout", c->use_dropout ? "true" : "false"};
    meta[n++] = (sdt_st_kv){"dropout_structure", dropout};
    meta[n++] = (sdt_st_kv){"activate_output", c->activate_output ? "true" : "false"};
    meta[n++] = (sdt_st_kv){"last_layer_dropout", sdt_hn_config_last_layer_dropout(c) ? "true" : "false"};
    meta[n++] = (sdt_st_kv){"modules", modules};
    if (info->sd_checkpoint[0]) meta[n++] = (sdt_st_kv){"sd_checkpoint", info->sd_checkpoint};
    if (info->sd_checkpoint_name[0]) meta[n++] = (sdt_st_kv){"sd_checkpoint_name", info->sd_checkpoint_name};
    ok = ok && sdt_st_write(path, items, (size_t)count, meta, n, error);
    free(items);
    free(host);
    return ok;
}

/* ---- A1111's .pt: torch.save of {width: (state_dict_K, state_dict_V), keys...} ---- */

static sdt_pv *pt_number_list(sdt_pv_arena *a, const double *v, int n)
{
    sdt_pv *list = sdt_pv_new(a, SDT_PV_LIST);
    for (int i = 0; i < n; i++) sdt_pv_append(list, sdt_pv_new_float(a, v[i]));
    return list;
}

static sdt_pv *pt_str_or_none(sdt_pv_arena *a, const char *s)
{
    return s && s[0] ? sdt_pv_new_str(a, s) : sdt_pv_new(a, SDT_PV_NONE);
}

bool sdt_hn_save_pt(const sdt_hn *hn, const char *path, sdt_error *error)
{
    const sdt_hn_config *c = sdt_hn_get_config(hn);
    const sdt_hn_info *info = sdt_hn_get_info_const(hn);
    float *host = calloc((size_t)sdt_hn_param_numel(hn) + 1, sizeof(float));
    if (!host)
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while saving; nothing was written", path);
    if (!sdt_hn_download(hn, host, error)) {
        free(host);
        return false;
    }
    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = sdt_pv_new_dict(a, false);
    /* parameters come width by width, K then V, in Sequential order: one OrderedDict per module */
    sdt_pv *pair = NULL, *state = NULL;
    int64_t offset = 0;
    for (int i = 0; i < sdt_hn_param_count(hn); i++) {
        const sdt_hn_param *p = sdt_hn_param_at_const(hn, i);
        const sdt_hn_param *prev = i ? sdt_hn_param_at_const(hn, i - 1) : NULL;
        if (!prev || prev->width != p->width) {
            pair = sdt_pv_new(a, SDT_PV_TUPLE);
            sdt_pv_dict_add(root, sdt_pv_new_int(a, p->width), pair);
        }
        if (!prev || prev->width != p->width || prev->kind != p->kind) {
            state = sdt_pv_new_dict(a, true);
            sdt_pv_append(pair, state);
        }
        const char *key = strchr(strchr(p->name, '.') + 1, '.') + 1; /* past "<width>.<kind>." */
        sdt_pv_dict_set(a, state, key, sdt_pv_new_tensor(a, SDT_ST_F32, p->value.ndim, p->value.shape, host + offset));
        offset += sdt_tensor_numel(&p->value);
    }
    double dropout[SDT_HN_MAX_ENTRIES];
    for (int i = 0; i < c->entry_count; i++) dropout[i] = c->use_dropout ? c->dropout_structure[i] : 0.0;
    /* A1111's Hypernetwork.save, key for key and in its order */
    sdt_pv_dict_set(a, root, "step", sdt_pv_new_int(a, info->step));
    sdt_pv_dict_set(a, root, "name", sdt_pv_new_str(a, c->name));
    sdt_pv_dict_set(a, root, "layer_structure", pt_number_list(a, c->layer_structure, c->entry_count));
    sdt_pv_dict_set(a, root, "activation_func", sdt_pv_new_str(a, c->activation));
    sdt_pv_dict_set(a, root, "is_layer_norm", sdt_pv_new_bool(a, c->layer_norm));
    sdt_pv_dict_set(a, root, "weight_initialization", sdt_pv_new_str(a, sdt_hn_init_name(c->init)));
    sdt_pv_dict_set(a, root, "sd_checkpoint", pt_str_or_none(a, info->sd_checkpoint));
    sdt_pv_dict_set(a, root, "sd_checkpoint_name", pt_str_or_none(a, info->sd_checkpoint_name));
    sdt_pv_dict_set(a, root, "activate_output", sdt_pv_new_bool(a, c->activate_output));
    sdt_pv_dict_set(a, root, "use_dropout", sdt_pv_new_bool(a, c->use_dropout));
    sdt_pv_dict_set(a, root, "dropout_structure", pt_number_list(a, dropout, c->entry_count));
    sdt_pv_dict_set(a, root, "last_layer_dropout", sdt_pv_new_bool(a, sdt_hn_config_last_layer_dropout(c)));
    sdt_pv_dict_set(a, root, "optional_info", sdt_pv_new(a, SDT_PV_NONE));
    bool ok = sdt_torch_save(path, root, NULL, error);
    sdt_pv_arena_free(a);
    free(host);
    return ok;
}

static bool pt_bool(const sdt_pv *v, bool *out)
{
    int64_t i;
    if (!sdt_pv_as_int(v, &i)) return false; /* bools read as ints */
    *out = i != 0;
    return true;
}

static bool pt_numbers(const char *file, const char *key, const sdt_pv *v, double *out, int max, int *count,
                       sdt_error *error)
{
    if (!sdt_pv_is(v, SDT_PV_LIST) && !sdt_pv_is(v, SDT_PV_TUPLE))
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s is a %s, not a list of numbers; the file is damaged", file,
                        key, sdt_pv_kind_name(v ? v->kind : SDT_PV_NONE));
    size_t n = sdt_pv_len(v);
    if (n > (size_t)max)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s has %zu entries, more than the %d sdtrain takes", file, key,
                        n, max);
    for (size_t i = 0; i < n; i++)
        if (!sdt_pv_as_float(sdt_pv_item(v, i), &out[i]))
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s entry %zu is not a number; the file is damaged", file,
                            key, i + 1);
    *count = (int)n;
    return true;
}

/* The named keys of an A1111 dict (ints are the modules, read separately). */
static bool pt_read_keys(const sdt_pv *root, const char *file, sdt_hn_file_keys *k, sdt_error *error)
{
    memset(k, 0, sizeof(*k));
    const sdt_pv *v;
    const char *text;
    if ((text = sdt_pv_as_str(sdt_pv_dict_get(root, "name"))))
        k->has_name = true, snprintf(k->name, sizeof(k->name), "%s", text);
    if ((v = sdt_pv_dict_get(root, "step")) && !sdt_pv_is(v, SDT_PV_NONE)) {
        if (!sdt_pv_as_int(v, &k->step) || k->step < 0)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: step is not a step count; the file is damaged", file);
        k->has_step = true;
    }
    if ((v = sdt_pv_dict_get(root, "layer_structure")) && !sdt_pv_is(v, SDT_PV_NONE)) {
        k->has_layer_structure = true;
        if (!pt_numbers(file, "layer_structure", v, k->layer_structure, SDT_HN_MAX_ENTRIES, &k->entry_count, error))
            return false;
    }
    if ((text = sdt_pv_as_str(sdt_pv_dict_get(root, "activation_func"))))
        k->has_activation = true, snprintf(k->activation, sizeof(k->activation), "%s", text);
    if ((text = sdt_pv_as_str(sdt_pv_dict_get(root, "weight_initialization"))))
        k->has_init = true, snprintf(k->init, sizeof(k->init), "%s", text);
    hn_flag_key flags[HN_FLAG_KEYS];
    hn_flag_keys(k, flags);
    for (size_t i = 0; i < HN_FLAG_KEYS; i++)
        if ((v = sdt_pv_dict_get(root, flags[i].key)) && !sdt_pv_is(v, SDT_PV_NONE)) {
            *flags[i].has = true;
            if (!pt_bool(v, flags[i].value))
                return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s is a %s, not true or false; the file is damaged",
                                file, flags[i].key, sdt_pv_kind_name(v->kind));
        }
    if ((v = sdt_pv_dict_get(root, "dropout_structure")) && !sdt_pv_is(v, SDT_PV_NONE)) {
        k->has_dropout_structure = true;
        if (!pt_numbers(file, "dropout_structure", v, k->dropout_structure, SDT_HN_MAX_ENTRIES, &k->dropout_count,
                        error))
            return false;
    }
    if ((text = sdt_pv_as_str(sdt_pv_dict_get(root, "sd_checkpoint"))))
        snprintf(k->sd_checkpoint, sizeof(k->sd_checkpoint), "%s", text);
    if ((text = sdt_pv_as_str(sdt_pv_dict_get(root, "sd_checkpoint_name"))))
        snprintf(k->sd_checkpoint_name, sizeof(k->sd_checkpoint_name), "%s", text);
    return true;
}

/* The module entries ({width: (state_dict_K, state_dict_V)}) as named tensors; widths in file order. */
static bool pt_read_modules(sdt_torch_file *f, const sdt_pv *root, const char *file, sdt_hn_file_keys *k,
                            hn_file_tensor **out, size_t *count, sdt_error *error)
{
    size_t cap = 0, n = 0;
    for (size_t i = 0; i < sdt_pv_len(root); i++)
        for (size_t j = 0; j < 2 && sdt_pv_is(sdt_pv_dict_key(root, i), SDT_PV_INT); j++)
            cap += sdt_pv_len(sdt_pv_item(sdt_pv_dict_value(root, i), j));
    hn_file_tensor *tensors = calloc(cap ? cap : 1, sizeof(*tensors));
    if (!tensors) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while reading", file);
    *out = tensors;
    for (size_t i = 0; i < sdt_pv_len(root); i++) {
        const sdt_pv *key = sdt_pv_dict_key(root, i), *pair = sdt_pv_dict_value(root, i);
        if (!sdt_pv_is(key, SDT_PV_INT)) continue;
        int64_t width = key->u.i;
        if (width < 1 || width > SDT_HN_MAX_WIDTH || k->width_count >= SDT_HN_MAX_WIDTHS)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: module key %lld is not a width sdtrain takes (1..%d, at "
                            "most %d of them)",
                            file, (long long)width, SDT_HN_MAX_WIDTH, SDT_HN_MAX_WIDTHS);
        k->widths[k->width_count++] = (int)width;
        if ((!sdt_pv_is(pair, SDT_PV_TUPLE) && !sdt_pv_is(pair, SDT_PV_LIST)) || sdt_pv_len(pair) != 2)
            return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                            "%s: module %lld is not a pair of state dicts (K, V); the file "
                            "is damaged",
                            file, (long long)width);
        for (int kind = 0; kind < 2; kind++) {
            const sdt_pv *state = sdt_pv_item(pair, (size_t)kind);
            if (!sdt_pv_is(state, SDT_PV_DICT))
                return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: module %lld %s is a %s, not a state dict", file,
                                (long long)width, kind ? "V" : "K",
                                sdt_pv_kind_name(state ? state->kind : SDT_PV_NONE));
            for (size_t e = 0; e < sdt_pv_len(state); e++) {
                const char *name = sdt_pv_as_str(sdt_pv_dict_key(state, e));
                hn_file_tensor *t = &tensors[n];
                snprintf(t->name, sizeof(t->name), "%lld.%d.%s", (long long)width, kind, name ? name : "(not a name)");
                sdt_tensor view;
                if (!sdt_torch_tensor(f, sdt_pv_dict_value(state, e), t->name, &view, error)) return false;
                t->dtype = view.dtype;
                t->dtype_ok = view.dtype != SDT_I32;
                t->dtype_name = sdt_dtype_name(view.dtype);
                t->ndim = view.ndim;
                for (int d = 0; d < view.ndim; d++) t->shape[d] = view.shape[d];
                t->data = view.data;
                n++;
            }
        }
    }
    *count = n;
    return true;
}

sdt_hn *sdt_hn_load_pt(const char *path, sdt_backend *be, sdt_error *error)
{
    sdt_torch_file *f = sdt_torch_open(path, error);
    if (!f) return NULL;
    const sdt_pv *root = sdt_torch_root(f);
    sdt_hn_file_keys keys;
    hn_file_tensor *tensors = NULL;
    size_t n = 0;
    sdt_hn *hn = NULL;
    if (!sdt_pv_is(root, SDT_PV_DICT))
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: a torch file whose top level is a %s, not A1111's hypernetwork dict",
                 path, sdt_pv_kind_name(root ? root->kind : SDT_PV_NONE));
    else if (pt_read_keys(root, path, &keys, error) && pt_read_modules(f, root, path, &keys, &tensors, &n, error))
        hn = hn_build(&keys, tensors, n, path, be, error);
    free(tensors);
    sdt_torch_close(f);
    return hn;
}

/* ---- by file name ---- */

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

sdt_hn *sdt_hn_create_file(const sdt_hn_config *c, const char *path, bool overwrite, sdt_backend *be,
                           uint64_t init_seed, sdt_error *error)
{
    if (!sdt_hn_config_validate(c, true, error)) return NULL;
    if (!path || !(has_suffix(path, ".pt") || has_suffix(path, ".safetensors"))) {
        sdt_fail(error, SDT_ERR_UNSUPPORTED,
                 "%s: name the hypernetwork file \"<name>.pt\" (A1111) or "
                 "\"<name>.safetensors\"",
                 path ? path : "(no path)");
        return NULL;
    }
    if (!overwrite && access(path, F_OK) == 0) {
        sdt_fail(error, SDT_ERR_ALREADY_EXISTS,
                 "file %s already exists; choose another name or turn on "
                 "overwrite",
                 path);
        return NULL;
    }
    sdt_hn *hn = sdt_hn_create(c, be, init_seed, error);
    if (hn && !sdt_hn_save(hn, path, error)) {
        sdt_hn_free(hn);
        return NULL;
    }
    return hn;
}

bool sdt_hn_save(const sdt_hn *hn, const char *path, sdt_error *error)
{
    if (path && has_suffix(path, ".pt")) return sdt_hn_save_pt(hn, path, error);
    if (path && has_suffix(path, ".safetensors")) return sdt_hn_save_safetensors(hn, path, error);
    return sdt_fail(error, SDT_ERR_UNSUPPORTED,
                    "%s: name the hypernetwork file \"<name>.pt\" (A1111) or "
                    "\"<name>.safetensors\"",
                    path ? path : "(no path)");
}

sdt_hn *sdt_hn_load(const char *path, sdt_backend *be, sdt_error *error)
{
    if (sdt_torch_sniff_file(path) != SDT_TORCH_NOT_TORCH) return sdt_hn_load_pt(path, be, error);
    return sdt_hn_load_safetensors(path, be, error);
}
