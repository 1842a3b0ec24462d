/* embedding_file.c - format detection, save checks, inspection; see embedding_file.h. */
#include "ti/embedding_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_read.h"
#include "torch_file.h"
#include "c_json.h"

#define MAX_LOADED_VECTORS 1024 /* generous: only inspection ever sees more than 75 */

const char *sdt_embedding_format_name(sdt_embedding_format f)
{
    switch (f) {
        case SDT_EMBEDDING_FORMAT_SAFETENSORS:
            return "safetensors";
        case SDT_EMBEDDING_FORMAT_PNG_CARD:
            return "a1111-png-card";
        case SDT_EMBEDDING_FORMAT_A1111_PT:
            return "a1111-pt";
        case SDT_EMBEDDING_FORMAT_TORCH_CONCEPT:
            return "torch-concept";
        default:
            return "unknown";
    }
}

bool sdt_embedding_check_save(const sdt_embedding *e, const char *path, bool overwrite, sdt_error *error)
{
    if (!e->vectors || e->n_vectors <= 0 || e->dim <= 0) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the embedding has no vectors to save", path);
        return false;
    }
    if (!sdt_embedding_is_finite(e)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the embedding holds NaN or infinite values, so it was not saved (the previous file is kept); "
                 "resume from the last good copy with a lower learning rate",
                 path);
        return false;
    }
    if (!overwrite && access(path, F_OK) == 0) {
        sdt_fail(error, SDT_ERR_ALREADY_EXISTS,
                 "%s already exists; choose another name or allow overwriting (--overwrite)", path);
        return false;
    }
    return true;
}

bool sdt_embedding_alloc_loaded(sdt_embedding *e, int64_t n_vectors, int64_t dim, const char *origin, sdt_error *error)
{
    if (n_vectors < 1 || n_vectors > MAX_LOADED_VECTORS || dim < 1 || dim > SDT_EMBEDDING_MAX_DIM) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: an embedding of %lld x %lld values is not plausible (expected up to %d x %d)", origin,
                 (long long)n_vectors, (long long)dim, SDT_EMBEDDING_MAX_VECTORS, SDT_EMBEDDING_MAX_DIM);
        return false;
    }
    e->vectors = malloc((size_t)n_vectors * (size_t)dim * sizeof(float));
    if (!e->vectors) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory", origin);
        return false;
    }
    e->n_vectors = (int)n_vectors;
    e->dim = (int)dim;
    return true;
}

bool sdt_embedding_load(const char *path, sdt_embedding *e, sdt_embedding_format *format, sdt_error *error)
{
    memset(e, 0, sizeof(*e));
    if (format) *format = SDT_EMBEDDING_FORMAT_UNKNOWN;
    unsigned char magic[9] = {0};
    int fd = sdt_file_open_regular(path, "embedding file", NULL, error);
    if (fd < 0) {
        sdt_error_append(error, "; check the path");
        return false;
    }
    ssize_t n_read = read(fd, magic, sizeof(magic));
    close(fd);
    size_t got = n_read > 0 ? (size_t)n_read : 0;
    if (got >= 8 && memcmp(magic, "\x89PNG\r\n\x1a\n", 8) == 0) {
        if (format) *format = SDT_EMBEDDING_FORMAT_PNG_CARD;
        return sdt_embedding_load_png_card(path, e, error);
    }
    /* .pt/.bin embeddings are torch.save files: read by the restricted reader, which runs no code. */
    if (sdt_torch_sniff_file(path) != SDT_TORCH_NOT_TORCH) return sdt_embedding_load_torch(path, e, format, error);
    /* safetensors starts with a little-endian header length, then '{'. */
    if ((got == 9 && magic[8] == '{') || g_str_has_suffix(path, ".safetensors")) {
        if (format) *format = SDT_EMBEDDING_FORMAT_SAFETENSORS;
        return sdt_embedding_load_safetensors(path, e, error);
    }
    sdt_fail(error, SDT_ERR_BAD_FORMAT,
             "%s: not an embedding file this tool reads (expected .safetensors, an A1111 PNG card, or a PyTorch "
             ".pt/.bin written by torch.save)",
             path);
    return false;
}

/* The norm of vector r's finite values; a table embedding's vector spans its tables. */
static double finite_row_norm(const sdt_embedding *e, int r)
{
    bool tables = sdt_embedding_has_tables(e);
    double sq = 0;
    for (int k = 0; k < (tables ? SDT_EMBEDDING_ENCODERS : 1); k++) {
        int width = tables ? e->encoder_dims[k] : e->dim;
        const float *row = tables ? sdt_embedding_table(e, k) : e->vectors;
        if (!row) continue;
        row += (size_t)r * (size_t)width;
        for (int c = 0; c < width; c++)
            if (isfinite(row[c])) sq += (double)row[c] * row[c];
    }
    return sqrt(sq);
}

char *sdt_embedding_describe_json(const sdt_embedding *e, sdt_embedding_format format, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (path) cJSON_AddStringToObject(root, "file", path);
    cJSON_AddStringToObject(root, "format", sdt_embedding_format_name(format));
    cJSON_AddStringToObject(root, "name", e->name ? e->name : "");
    cJSON_AddNumberToObject(root, "vectors", e->n_vectors);
    cJSON_AddNumberToObject(root, "dim", e->dim);
    if (e->clip_l_dim) {
        cJSON_AddNumberToObject(root, "clip_l_dim", e->clip_l_dim);
        cJSON_AddNumberToObject(root, "clip_g_dim", e->dim - e->clip_l_dim);
    }
    if (sdt_embedding_has_tables(e)) { /* SD3.5 / Flux.1: the family its tables say, and each table */
        cJSON_AddStringToObject(root, "family", sdt_embedding_family(e));
        cJSON_AddStringToObject(root, "family_title", sdt_embedding_family_title(e));
        cJSON *tables = cJSON_AddArrayToObject(root, "tables");
        for (int k = 0; k < SDT_EMBEDDING_ENCODERS; k++) {
            const float *t = sdt_embedding_table(e, k);
            if (!t) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "encoder", sdt_embedding_encoder_key(k));
            cJSON_AddNumberToObject(o, "dim", e->encoder_dims[k]);
            cJSON *norms = cJSON_AddArrayToObject(o, "norms");
            for (int r = 0; r < e->n_vectors; r++)
                cJSON_AddItemToArray(norms, cJSON_CreateNumber(sdt_embedding_vector_norm(
                                                t + (size_t)r * e->encoder_dims[k], e->encoder_dims[k])));
            cJSON_AddItemToArray(tables, o);
        }
    }
    cJSON_AddNumberToObject(root, "step", (double)e->step);
    if (e->checkpoint_hash)
        cJSON_AddStringToObject(root, "sd_checkpoint", e->checkpoint_hash);
    else
        cJSON_AddNullToObject(root, "sd_checkpoint");
    if (e->checkpoint_name)
        cJSON_AddStringToObject(root, "sd_checkpoint_name", e->checkpoint_name);
    else
        cJSON_AddNullToObject(root, "sd_checkpoint_name");
    if (e->init_text) cJSON_AddStringToObject(root, "init_text", e->init_text);
    if (e->training_note) cJSON_AddStringToObject(root, "sdtrain_fallback", e->training_note);
    if (format == SDT_EMBEDDING_FORMAT_PNG_CARD)
        cJSON_AddStringToObject(root, "copy_used", e->from_card_pixels ? "pixels" : "text chunk");
    if (e->load_note) cJSON_AddStringToObject(root, "load_note", e->load_note);

    bool finite = true;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    cJSON *norms = cJSON_AddArrayToObject(root, "norms");
    size_t n_values = (size_t)e->n_vectors * (size_t)e->dim;
    for (size_t i = 0; i < n_values; i++) {
        double v = e->vectors[i];
        if (!isfinite(v)) {
            finite = false;
            continue;
        }
        sum += v;
        lo = fmin(lo, v);
        hi = fmax(hi, v);
    }
    for (int r = 0; r < e->n_vectors; r++) cJSON_AddItemToArray(norms, cJSON_CreateNumber(finite_row_norm(e, r)));
    cJSON_AddBoolToObject(root, "finite", finite);
    size_t n = (size_t)e->n_vectors * (size_t)e->dim;
    if (n && isfinite(lo)) {
        cJSON_AddNumberToObject(root, "min", lo);
        cJSON_AddNumberToObject(root, "max", hi);
        cJSON_AddNumberToObject(root, "mean", sum / (double)n);
    }
    char *text = sdt_json_print(root);
    cJSON_Delete(root);
    return text;
}

char *sdt_embedding_inspect_file(const char *path, sdt_error *error)
{
    sdt_embedding e;
    sdt_embedding_format format;
    if (!sdt_embedding_load(path, &e, &format, error)) return NULL;
    char *text = sdt_embedding_describe_json(&e, format, path);
    sdt_embedding_free(&e);
    if (!text) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory describing the embedding", path);
    return text;
}
