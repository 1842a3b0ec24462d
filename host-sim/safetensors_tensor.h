/* safetensors_tensor.h - sdt-host's view of a .safetensors file's tensors: one found by name, and a
 * file of one tensor written. The plugin reads embeddings (every format, every check) and inspect says
 * what a file holds; `convert` then copies the bytes of tensors inspect vouched for into the layout
 * another host reads, which needs the container only (sdt-host sees abi/ alone, not the plugin's
 * models/formats/safetensors). */
#ifndef SDT_HOST_SAFETENSORS_TENSOR_H
#define SDT_HOST_SAFETENSORS_TENSOR_H

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdint.h>

/* A .safetensors file read whole (an embedding is small: at most 64 MiB is read). */
typedef struct st_file {
    gchar *data;
    gsize size;
    cJSON *header;    /* the JSON header */
    gsize data_start; /* 8 + the header's length */
} st_file;

/* A 2-D tensor's bytes in the file, as stored (F32, F16 or BF16). */
typedef struct st_tensor {
    char dtype[8];
    int64_t rows, cols;
    const uint8_t *data;
    gsize bytes;
} st_tensor;

/* FALSE with *reason (g_malloc'd, without the path) when path is no .safetensors file. */
gboolean st_file_read(const char *path, st_file *file, char **reason);
void st_file_free(st_file *file);
/* The tensor name; FALSE with *reason when it is absent, not 2-D, not F32/F16/BF16 or out of the file. */
gboolean st_file_tensor(const st_file *file, const char *name, st_tensor *tensor, char **reason);
/* Writes path holding tensor under name, with metadata (string pairs, may be NULL), atomically
 * (temp file, fsync, rename). FALSE with *error set. */
gboolean st_write_one(const char *path, const char *name, const st_tensor *tensor, const char *const (*metadata)[2],
                      gsize n_metadata, GError **error);

#endif
