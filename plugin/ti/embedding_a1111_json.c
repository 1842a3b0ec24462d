/* embedding_a1111_json.c - the JSON that A1111 stores in its PNG cards.
 *
 * A1111 (image_embedding.py) serialises the torch.save dict of a .pt file with
 * json.dumps (separators ", " and ": ", ensure_ascii) and turns each tensor into
 * {"TORCHTENSOR": nested list}. Keys in the .pt order: string_to_token,
 * string_to_param, name, step, sd_checkpoint, sd_checkpoint_name. Numbers are
 * Python float reprs of the float32 values widened to double (shortest text
 * that reads back as the same double), so vectors survive bit for bit.
 *
 * An SDXL card holds only {"clip_l": ..., "clip_g": ...}: A1111 1.10's and Forge's
 * create_embedding_from_data take SDXL vectors only from a dict whose every value is a
 * tensor (string_to_param holding the pair, or a name or step beside it, fails with
 * "'dict' object has no attribute 'detach'"). The name, step and checkpoint then travel
 * in sdtrain's own chunk (SDT_PNG_CARD_INFO_KEYWORD, the same keys as JSON), which
 * A1111 ignores.
 */
#include <cjson/cJSON.h>
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"
#include "ti/embedding_file.h"
#include "c_json.h"

/* Python's repr(float): shortest round-trip digits; fixed notation for
 * exponents -4..15 (with ".0" when integral), scientific otherwise. */
static void append_py_float(GString *s, double v)
{
    char buf[48];
    /* Most float32 values need 16-17 digits as doubles: try 15 first, then search. */
    int prec = 15;
    sdt_c_snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
    if (sdt_c_strtod(buf, NULL) == v) {
        for (prec = 1; prec < 15; prec++) {
            sdt_c_snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
            if (sdt_c_strtod(buf, NULL) == v) break;
        }
    } else {
        sdt_c_snprintf(buf, sizeof(buf), "%.*e", 15, v);
        prec = sdt_c_strtod(buf, NULL) == v ? 16 : 17;
    }
    sdt_c_snprintf(buf, sizeof(buf), "%.*e", prec - 1, v); /* [-]d.ddde[+-]xx */
    const char *p = buf;
    if (*p == '-') {
        g_string_append_c(s, '-');
        p++;
    }
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int exp = atoi(p + 1);
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            g_string_append(s, "0.");
            for (int i = 0; i < -exp - 1; i++) g_string_append_c(s, '0');
            g_string_append_len(s, digits, nd);
        } else {
            for (int i = 0; i <= exp; i++) g_string_append_c(s, i < nd ? digits[i] : '0');
            g_string_append_c(s, '.');
            if (nd > exp + 1)
                g_string_append_len(s, digits + exp + 1, nd - exp - 1);
            else
                g_string_append_c(s, '0');
        }
    } else {
        g_string_append_c(s, digits[0]);
        if (nd > 1) {
            g_string_append_c(s, '.');
            g_string_append_len(s, digits + 1, nd - 1);
        }
        g_string_append_printf(s, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
}

/* json.dumps string with ensure_ascii: non-ASCII as \uXXXX (surrogate pairs above U+FFFF).
 * Text that is not UTF-8 (a name read from another file's metadata) is written with U+FFFD
 * in place of its bad bytes: walking it as UTF-8 could step past its end. */
static void append_json_string(GString *s, const char *text)
{
    char *valid = g_utf8_validate(text, -1, NULL) ? NULL : g_utf8_make_valid(text, -1);
    if (valid) text = valid;
    g_string_append_c(s, '"');
    for (const char *p = text; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        switch (c) {
            case '"':
                g_string_append(s, "\\\"");
                break;
            case '\\':
                g_string_append(s, "\\\\");
                break;
            case '\n':
                g_string_append(s, "\\n");
                break;
            case '\r':
                g_string_append(s, "\\r");
                break;
            case '\t':
                g_string_append(s, "\\t");
                break;
            case '\b':
                g_string_append(s, "\\b");
                break;
            case '\f':
                g_string_append(s, "\\f");
                break;
            default:
                if (c < 0x20 || (c >= 0x7f && c <= 0xffff))
                    g_string_append_printf(s, "\\u%04x", (unsigned)c);
                else if (c > 0xffff) {
                    unsigned v = (unsigned)c - 0x10000;
                    g_string_append_printf(s, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                } else
                    g_string_append_c(s, (char)c);
        }
    }
    g_string_append_c(s, '"');
    g_free(valid);
}

static void append_optional_string(GString *s, const char *text)
{
    if (text)
        append_json_string(s, text);
    else
        g_string_append(s, "null");
}

/* {"TORCHTENSOR": [[...], ...]} for columns [c0, c1) of every row. */
static void append_tensor(GString *s, const sdt_embedding *e, int c0, int c1)
{
    g_string_append(s, "{\"TORCHTENSOR\": [");
    for (int r = 0; r < e->n_vectors; r++) {
        g_string_append(s, r ? ", [" : "[");
        for (int c = c0; c < c1; c++) {
            if (c > c0) g_string_append(s, ", ");
            append_py_float(s, (double)e->vectors[(size_t)r * e->dim + c]);
        }
        g_string_append_c(s, ']');
    }
    g_string_append(s, "]}");
}

/* "name": ..., "step": ..., "sd_checkpoint": ..., "sd_checkpoint_name": ... (A1111's order). */
static void append_info(GString *s, const sdt_embedding *e)
{
    g_string_append(s, "\"name\": ");
    append_optional_string(s, e->name);
    g_string_append_printf(s, ", \"step\": %" PRId64 ", \"sd_checkpoint\": ", e->step);
    append_optional_string(s, e->checkpoint_hash);
    g_string_append(s, ", \"sd_checkpoint_name\": ");
    append_optional_string(s, e->checkpoint_name);
}

static char *finish(GString *s)
{
    char *out = strdup(s->str);
    g_string_free(s, TRUE);
    return out;
}

char *sdt_embedding_a1111_json(const sdt_embedding *e)
{
    if (!sdt_embedding_is_finite(e)) return NULL;
    GString *s = g_string_sized_new((size_t)e->n_vectors * (size_t)e->dim * 22 + 256);
    if (e->clip_l_dim) { /* the tensors alone: see the top of this file */
        g_string_append(s, "{\"clip_l\": ");
        append_tensor(s, e, 0, e->clip_l_dim);
        g_string_append(s, ", \"clip_g\": ");
        append_tensor(s, e, e->clip_l_dim, e->dim);
        g_string_append_c(s, '}');
        return finish(s);
    }
    g_string_append(s, "{\"string_to_token\": {\"*\": 265}, \"string_to_param\": {\"*\": ");
    append_tensor(s, e, 0, e->dim);
    g_string_append(s, "}, ");
    append_info(s, e);
    g_string_append_c(s, '}');
    return finish(s);
}

char *sdt_embedding_card_info_json(const sdt_embedding *e)
{
    if (!e->clip_l_dim) return NULL; /* A1111's own JSON holds them */
    GString *s = g_string_new("{");
    append_info(s, e);
    g_string_append_c(s, '}');
    return finish(s);
}

/* ---- reading ------------------------------------------------------------ */

/* Shape of a {"TORCHTENSOR": list} value: [dim] or [rows][dim]. */
static bool tensor_shape(const cJSON *obj, const char *origin, const cJSON **list, int64_t *rows, int64_t *cols,
                         bool *one_d, sdt_error *error)
{
    *list = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, "TORCHTENSOR") : NULL;
    if (!cJSON_IsArray(*list) || !cJSON_GetArraySize(*list)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the embedding tensor is missing or empty (expected {\"TORCHTENSOR\": [[...]]})", origin);
        return false;
    }
    const cJSON *first = (*list)->child;
    *one_d = !cJSON_IsArray(first);
    *rows = *one_d ? 1 : cJSON_GetArraySize(*list);
    *cols = *one_d ? cJSON_GetArraySize(*list) : cJSON_GetArraySize(first);
    return true;
}

/* Copies a list (one row, or rows x cols) into dst with row stride. */
static bool tensor_copy(const cJSON *list, bool one_d, int64_t rows, int64_t cols, float *dst, int64_t stride,
                        const char *origin, sdt_error *error)
{
    const cJSON *row = one_d ? list : list->child;
    for (int64_t r = 0; r < rows; r++, row = row ? row->next : NULL) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: row %" PRId64 " of the embedding tensor is not a list of %" PRId64
                     " numbers; the card is damaged",
                     origin, r, cols);
            return false;
        }
        int64_t c = 0;
        for (const cJSON *v = row->child; v; v = v->next, c++) {
            if (!cJSON_IsNumber(v)) {
                sdt_fail(error, SDT_ERR_BAD_FORMAT,
                         "%s: value %" PRId64 " of row %" PRId64 " is not a number; the card is damaged", origin, c, r);
                return false;
            }
            dst[r * stride + c] = (float)v->valuedouble;
        }
    }
    return true;
}

static bool read_vectors(const cJSON *param, const char *origin, sdt_embedding *e, sdt_error *error)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(param, "clip_l");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(param, "clip_g");
    const cJSON *list, *list_g;
    int64_t rows, cols, rows_g, cols_g;
    bool one_d, one_d_g;
    if (l && g) { /* SDXL: two tensors side by side */
        if (!tensor_shape(l, origin, &list, &rows, &cols, &one_d, error) ||
            !tensor_shape(g, origin, &list_g, &rows_g, &cols_g, &one_d_g, error))
            return false;
        if (rows != rows_g) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: clip_l and clip_g have different vector counts; the card is damaged", origin);
            return false;
        }
        if (!sdt_embedding_alloc_loaded(e, rows, cols + cols_g, origin, error)) return false;
        e->clip_l_dim = (int)cols;
        return tensor_copy(list, one_d, rows, cols, e->vectors, cols + cols_g, origin, error) &&
               tensor_copy(list_g, one_d_g, rows, cols_g, e->vectors + cols, cols + cols_g, origin, error);
    }
    return tensor_shape(param, origin, &list, &rows, &cols, &one_d, error) &&
           sdt_embedding_alloc_loaded(e, rows, cols, origin, error) &&
           tensor_copy(list, one_d, rows, cols, e->vectors, cols, origin, error);
}

static bool optional_string(const cJSON *root, const char *key, char **field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return sdt_embedding_set_string(field, cJSON_IsString(v) ? v->valuestring : NULL);
}

/* name (fallback_name when absent), step, sd_checkpoint, sd_checkpoint_name from root; false only
 * without memory. */
static bool read_info(const cJSON *root, const char *fallback_name, sdt_embedding *e)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
    e->step =
        cJSON_IsNumber(step) && step->valuedouble >= 0 && step->valuedouble < 9e15 ? (int64_t)step->valuedouble : 0;
    return sdt_embedding_set_string(&e->name, cJSON_IsString(name) ? name->valuestring : fallback_name) &&
           optional_string(root, "sd_checkpoint", &e->checkpoint_hash) &&
           optional_string(root, "sd_checkpoint_name", &e->checkpoint_name);
}

bool sdt_embedding_apply_card_info(const char *json, size_t len, sdt_embedding *e)
{
    if (!g_utf8_validate(json, (gssize)len, NULL)) return false;
    cJSON *root = sdt_json_parse(json, len);
    bool ok = cJSON_IsObject(root) && e->name && read_info(root, e->name, e);
    cJSON_Delete(root);
    return ok;
}

bool sdt_embedding_from_a1111_json(const char *json, size_t len, const char *origin, const char *fallback_name,
                                   sdt_embedding *e, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    if (!g_utf8_validate(json, (gssize)len, NULL)) /* JSON is UTF-8; its strings become names and metadata */
        return sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the embedding data is not UTF-8 text; the card is damaged",
                        origin);
    cJSON *root = sdt_json_parse(json, len);
    if (!cJSON_IsObject(root)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the embedding data is not valid JSON; the card is damaged", origin);
        cJSON_Delete(root);
        return false;
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "string_to_param");
    const cJSON *param = NULL;
    bool ok = true;
    if (cJSON_IsObject(params)) {
        if (cJSON_GetArraySize(params) != 1) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: the embedding has %d terms in string_to_param; exactly one is supported", origin,
                     cJSON_GetArraySize(params));
            ok = false;
        }
        param = params->child;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "clip_l") && cJSON_GetObjectItemCaseSensitive(root, "clip_g")) {
        param = root; /* kohya SDXL dict stored directly */
    } else {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: no string_to_param (or clip_l/clip_g) in the embedding data; "
                 "this is not a textual-inversion embedding",
                 origin);
        ok = false;
    }
    ok = ok && read_vectors(param, origin, e, error);
    if (ok && !read_info(root, fallback_name, e))
        ok = sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", origin);
    cJSON_Delete(root);
    if (!ok) sdt_embedding_free(e);
    return ok;
}
