/* safetensors_tensor.c - see safetensors_tensor.h. */
#include "safetensors_tensor.h"

#include <string.h>

#include "file_read.h"
#include "host_json.h"

#define ST_FILE_LIMIT ((gsize)64 << 20) /* an embedding of 75 vectors x 6144 floats is 1.8 MiB */

gboolean st_file_read(const char *path, st_file *file, char **reason)
{
    memset(file, 0, sizeof *file);
    if (!host_read_file(path, ST_FILE_LIMIT, &file->data, &file->size, reason)) return FALSE;
    uint64_t n = 0;
    for (int i = 7; i >= 0 && file->size >= 8; i--) n = (n << 8) | (uint8_t)file->data[i];
    if (file->size < 8 || n < 2 || n > file->size - 8 || file->data[8] != '{') {
        *reason = g_strdup("it is not a .safetensors file (no JSON header after the 8-byte length)");
        st_file_free(file);
        return FALSE;
    }
    file->header = host_json_parse(file->data + 8, (size_t)n);
    if (!cJSON_IsObject(file->header)) {
        *reason = g_strdup("its .safetensors header is not a JSON object");
        st_file_free(file);
        return FALSE;
    }
    file->data_start = 8 + (gsize)n;
    return TRUE;
}

void st_file_free(st_file *file)
{
    cJSON_Delete(file->header);
    g_free(file->data);
    memset(file, 0, sizeof *file);
}

static gsize dtype_size(const char *dtype)
{
    if (!strcmp(dtype, "F32")) return 4;
    if (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16")) return 2;
    return 0;
}

gboolean st_file_tensor(const st_file *file, const char *name, st_tensor *tensor, char **reason)
{
    memset(tensor, 0, sizeof *tensor);
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(file->header, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!entry) {
        *reason = g_strdup_printf("it holds no tensor \"%s\"", name);
        return FALSE;
    }
    if (!cJSON_IsString(dtype) || !dtype_size(dtype->valuestring) || !cJSON_IsArray(shape) ||
        cJSON_GetArraySize(shape) != 2 || !cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2) {
        *reason = g_strdup_printf("its tensor \"%s\" is not a 2-D F32, F16 or BF16 table", name);
        return FALSE;
    }
    double rows = cJSON_GetArrayItem(shape, 0)->valuedouble, cols = cJSON_GetArrayItem(shape, 1)->valuedouble;
    double begin = cJSON_GetArrayItem(offsets, 0)->valuedouble, end = cJSON_GetArrayItem(offsets, 1)->valuedouble;
    gsize elem = dtype_size(dtype->valuestring), room = file->size - file->data_start;
    if (!(rows >= 1 && cols >= 1 && rows <= 1e6 && cols <= 1e6 && begin >= 0 && end >= begin && end <= (double)room &&
          end - begin == rows * cols * (double)elem)) {
        *reason = g_strdup_printf("its tensor \"%s\" lies outside the file or does not match its shape", name);
        return FALSE;
    }
    g_strlcpy(tensor->dtype, dtype->valuestring, sizeof tensor->dtype);
    tensor->rows = (int64_t)rows;
    tensor->cols = (int64_t)cols;
    tensor->data = (const uint8_t *)file->data + file->data_start + (gsize)begin;
    tensor->bytes = (gsize)(end - begin);
    return TRUE;
}

gboolean st_write_one(const char *path, const char *name, const st_tensor *tensor, const char *const (*metadata)[2],
                      gsize n_metadata, GError **error)
{
    cJSON *header = cJSON_CreateObject();
    if (n_metadata) {
        cJSON *meta = cJSON_AddObjectToObject(header, "__metadata__");
        for (gsize i = 0; i < n_metadata; i++) cJSON_AddStringToObject(meta, metadata[i][0], metadata[i][1]);
    }
    cJSON *entry = cJSON_AddObjectToObject(header, name);
    cJSON_AddStringToObject(entry, "dtype", tensor->dtype);
    cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)tensor->rows));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)tensor->cols));
    cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber(0));
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)tensor->bytes));
    char *text = host_json_print(header);
    cJSON_Delete(header);
    if (!text) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOMEM, "out of memory for the header");
        return FALSE;
    }
    GByteArray *out = g_byte_array_new();
    gsize n = strlen(text), padded = (n + 7) / 8 * 8; /* the data starts 8-byte aligned, as safetensors writes it */
    uint8_t length[8];
    for (int i = 0; i < 8; i++) length[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    g_byte_array_append(out, length, 8);
    g_byte_array_append(out, (const guint8 *)text, (guint)n);
    for (gsize i = n; i < padded; i++) g_byte_array_append(out, (const guint8 *)" ", 1);
    g_byte_array_append(out, tensor->data, (guint)tensor->bytes);
    cJSON_free(text);
    gboolean ok = g_file_set_contents_full(path, (const char *)out->data, out->len,
                                           G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0644, error);
    g_byte_array_free(out, TRUE);
    return ok;
}
