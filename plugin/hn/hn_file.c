/* hn_file.c - hypernetwork .safetensors files and A1111's key rules; see hn_file.h. */
#include "hn/hn_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/file_name.h"
#include "safetensors.h"

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
        if (clean && clean[0]) snprintf(c.name, sizeof(c.name), "%s", clean);
        else snprintf(c.name, sizeof(c.name), "%s", fallback_name ? fallback_name : "");
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
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: dropout_structure has %d entries but layer_structure has %d; the file "
                             "is damaged (re-save it, or remove dropout_structure to use A1111's rebuild)", file,
                             keys->dropout_count, c.entry_count);
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
        snprintf(out, out_size, "%.*g", digits, v);
        if (strtod(out, NULL) == v) break;
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
    return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: metadata %s is \"%s\", not true or false; fix or remove the key", file, key,
                     text);
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
            return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: metadata step is \"%s\", not a step count; fix or remove the key",
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
    struct {
        const char *key;
        bool *has, *value;
    } flags[] = {{"is_layer_norm", &k->has_layer_norm, &k->layer_norm},
                 {"use_dropout", &k->has_use_dropout, &k->use_dropout},
                 {"activate_output", &k->has_activate_output, &k->activate_output},
                 {"last_layer_dropout", &k->has_last_layer_dropout, &k->last_layer_dropout}};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if ((v = sdt_st_metadata_get(st, flags[i].key))) {
            *flags[i].has = true;
            if (!parse_bool(file, flags[i].key, v, flags[i].value, error)) return false;
        }
    if ((v = meta_or_none(sdt_st_metadata_get(st, "dropout_structure")))) {
        k->has_dropout_structure = true;
        if (!parse_list(file, "dropout_structure", v, k->dropout_structure, SDT_HN_MAX_ENTRIES, &k->dropout_count, error))
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
                return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: metadata modules lists %g, not a width; fix or remove the key",
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
             c->activate_output && strcmp(c->activation, "linear") ? " (output too)" : "", c->layer_norm ? "on" : "off");
}

/* Copies every tensor of the file into host (parameter order), checking names and shapes both ways. */
static bool st_fill(const sdt_safetensors *st, const char *file, sdt_hn *hn, float *host, sdt_error *error)
{
    int count = sdt_hn_param_count(hn);
    bool *filled = calloc((size_t)count, sizeof(bool));
    if (!filled) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory while reading", file);
    bool ok = true;
    char structure[512];
    describe_structure(sdt_hn_get_config(hn), structure, sizeof(structure));
    for (size_t i = 0; ok && i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        int width, kind;
        char key[128], fixed[160], name[192];
        sdt_hn_param *p = NULL;
        if (split_tensor_name(e->name, &width, &kind, key, sizeof(key))) {
            sdt_hn_fix_old_key(key, fixed, sizeof(fixed));
            snprintf(name, sizeof(name), "%d.%d.%s", width, kind, fixed);
            p = sdt_hn_param_find(hn, name);
        }
        if (!p) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" does not belong to a hypernetwork with %s; the metadata "
                           "does not describe these tensors (re-save the file from its source)", file, e->name,
                           structure);
            break;
        }
        int index = (int)(p - sdt_hn_param_at(hn, 0));
        if (filled[index]) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" appears twice (old and new naming); keep one", file, e->name);
            break;
        }
        bool shape_ok = e->ndim == p->value.ndim;
        for (int d = 0; shape_ok && d < e->ndim; d++) shape_ok = e->shape[d] == p->value.shape[d];
        if (!shape_ok) {
            char have[96], want[96];
            format_shape(e->ndim, e->shape, have, sizeof(have));
            format_shape(p->value.ndim, p->value.shape, want, sizeof(want));
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" has shape %s but a hypernetwork with %s needs %s; the "
                           "metadata does not match the tensors", file, e->name, have, structure, want);
            break;
        }
        sdt_dtype dtype;
        if (!sdt_st_dtype_to_tensor(e->dtype, &dtype) || dtype == SDT_I32) {
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" is %s; hypernetwork weights must be F32, F16 or BF16",
                           file, e->name, sdt_st_dtype_name(e->dtype));
            break;
        }
        sdt_load_f32(e->data, dtype, host + param_offset(hn, index), sdt_tensor_numel(&p->value));
        filled[index] = true;
    }
    for (int i = 0; ok && i < count; i++)
        if (!filled[i])
            ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor \"%s\" is missing for a hypernetwork with %s; the file is "
                           "incomplete (re-save it from its source)", file, sdt_hn_param_at(hn, i)->name, structure);
    free(filled);
    return ok;
}

sdt_hn *sdt_hn_load_safetensors(const char *path, sdt_backend *be, sdt_error *error)
{
    sdt_safetensors *st = sdt_st_open(path, error);
    if (!st) return NULL;
    sdt_hn_file_keys keys;
    sdt_hn_config config;
    sdt_hn_info info;
    char fallback[SDT_HN_NAME_MAX + 1];
    file_base_name(path, fallback, sizeof(fallback));
    sdt_hn *hn = NULL;
    float *host = NULL;
    bool ok = st_read_keys(st, path, &keys, error);
    if (ok && keys.width_count == 0) widths_from_names(st, &keys);
    if (ok && keys.width_count == 0)
        ok = sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: no tensor is named like a hypernetwork module (\"768.0.linear.0.weight\"); "
                       "this is not a hypernetwork file", path);
    ok = ok && sdt_hn_keys_to_config(&keys, fallback, path, &config, &info, error);
    if (ok) {
        hn = sdt_hn_alloc(&config, be, error);
        if (!hn) ok = sdt_error_wrap(error, "%s", path);
    }
    if (ok) {
        host = calloc((size_t)sdt_hn_param_numel(hn), sizeof(float));
        if (!host) ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld weights", path,
                                  (long long)sdt_hn_param_numel(hn));
    }
    ok = ok && st_fill(st, path, hn, host, error) && sdt_hn_upload(hn, host, error);
    if (ok) *sdt_hn_get_info(hn) = info;
    free(host);
    sdt_st_close(st);
    if (!ok) {
        sdt_hn_free(hn);
        return NULL;
    }
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
        items[i] = (sdt_st_write_item){.name = p->name, .dtype = SDT_ST_F32, .ndim = p->value.ndim,
                                       .shape = p->value.shape, .data = host + offset};
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

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

sdt_hn *sdt_hn_create_file(const sdt_hn_config *c, const char *path, bool overwrite, sdt_backend *be,
                           uint64_t init_seed, sdt_error *error)
{
    if (!sdt_hn_config_validate(c, true, error)) return NULL;
    if (!path || !has_suffix(path, ".safetensors")) {
        sdt_fail(error, SDT_ERR_UNSUPPORTED, "%s: hypernetworks are created as .safetensors files here; name the file "
                  "\"<name>.safetensors\"", path ? path : "(no path)");
        return NULL;
    }
    if (!overwrite && access(path, F_OK) == 0) {
        sdt_fail(error, SDT_ERR_ALREADY_EXISTS, "file %s already exists; choose another name or turn on overwrite", path);
        return NULL;
    }
    sdt_hn *hn = sdt_hn_create(c, be, init_seed, error);
    if (hn && !sdt_hn_save_safetensors(hn, path, error)) {
        sdt_hn_free(hn);
        return NULL;
    }
    return hn;
}
