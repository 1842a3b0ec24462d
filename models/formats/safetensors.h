/* safetensors.h - reading and writing .safetensors files.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the data section; offsets are relative to its start.
 *
 * The reader maps the file (mmap) and validates everything before handing out
 * a single pointer: the header length against the file size, the JSON, each
 * dtype, shape x dtype size == byte range, every range inside the data section,
 * no two ranges overlapping, __metadata__ holding only strings. A bad file is
 * one error sentence naming the file, the key and the fix, never a crash.
 *
 * The writer pads the header with spaces so the data section starts 8-byte
 * aligned and lays tensors out contiguously (the reference implementation
 * rejects gaps), largest element size first, so every tensor is aligned to its
 * element size. It saves atomically (temp file, fsync, rename).
 */
#ifndef SDT_MODELS_SAFETENSORS_H
#define SDT_MODELS_SAFETENSORS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* Header lengths above this are refused (the reference implementation's limit). */
#define SDT_ST_MAX_HEADER ((uint64_t)100000000)
#define SDT_ST_MAX_DIMS 8

typedef enum sdt_st_dtype {
    SDT_ST_BOOL = 0,
    SDT_ST_U8,
    SDT_ST_I8,
    SDT_ST_I16,
    SDT_ST_U16,
    SDT_ST_F16,
    SDT_ST_BF16,
    SDT_ST_I32,
    SDT_ST_U32,
    SDT_ST_F32,
    SDT_ST_I64,
    SDT_ST_U64,
    SDT_ST_F64,
    SDT_ST_F8_E4M3, /* torch.float8_e4m3fn; read through fp8.h, upcast to bf16 by the weights layer */
    SDT_ST_F8_E5M2, /* torch.float8_e5m2 */
    SDT_ST_DTYPE_COUNT
} sdt_st_dtype;

/* "F32", "BF16", ... */
const char *sdt_st_dtype_name(sdt_st_dtype dtype);
size_t sdt_st_dtype_size(sdt_st_dtype dtype);
/* Parses a dtype name; false when the name is not one of the above. */
bool sdt_st_dtype_parse(const char *name, sdt_st_dtype *out);
/* The safetensors dtype of a tensor dtype (always exists). */
sdt_st_dtype sdt_st_dtype_of(sdt_dtype dtype);
/* The tensor dtype of a safetensors dtype; false for dtypes sdt_tensor cannot hold. */
bool sdt_st_dtype_to_tensor(sdt_st_dtype dtype, sdt_dtype *out);

/* One tensor of an open file. data points into the (read-only) mapping. */
typedef struct sdt_st_entry {
    const char *name;
    sdt_st_dtype dtype;
    int ndim;
    int64_t shape[SDT_ST_MAX_DIMS];
    uint64_t offset; /* into the data section */
    uint64_t nbytes;
    const void *data;
} sdt_st_entry;

typedef struct sdt_safetensors sdt_safetensors;

/* Maps and validates a file. NULL + error sentence on any problem. */
sdt_safetensors *sdt_st_open(const char *path, sdt_error *error);
/* Validates a file image already in memory (not copied: buf must outlive the
 * result). name is used in error sentences. For fuzzing and embedded data. */
sdt_safetensors *sdt_st_open_memory(const void *buf, size_t size, const char *name, sdt_error *error);
void sdt_st_close(sdt_safetensors *st);

const char *sdt_st_path(const sdt_safetensors *st);
/* Tensors in header order. */
size_t sdt_st_count(const sdt_safetensors *st);
const sdt_st_entry *sdt_st_at(const sdt_safetensors *st, size_t i);
/* NULL when absent. */
const sdt_st_entry *sdt_st_find(const sdt_safetensors *st, const char *name);
/* __metadata__ entries (absent metadata: count 0, lookups NULL). */
size_t sdt_st_metadata_count(const sdt_safetensors *st);
const char *sdt_st_metadata_key(const sdt_safetensors *st, size_t i);
const char *sdt_st_metadata_get(const sdt_safetensors *st, const char *key);

/* A tensor view of an entry (CPU, into the mapping; do not write through it).
 * false + error for dtypes sdt_tensor cannot hold or more than SDT_MAX_DIMS dims. */
bool sdt_st_entry_tensor(const sdt_safetensors *st, const sdt_st_entry *e, sdt_tensor *out, sdt_error *error);

/* ---- writer ------------------------------------------------------------- */

typedef struct sdt_st_write_item {
    const char *name;
    sdt_st_dtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data; /* shape x dtype size bytes, host memory */
} sdt_st_write_item;

typedef struct sdt_st_kv {
    const char *key;
    const char *value;
} sdt_st_kv;

/* Fills a write item from a CPU tensor. */
sdt_st_write_item sdt_st_item_from_tensor(const char *name, const sdt_tensor *t);

/* Writes n tensors and n_meta metadata pairs to path atomically.
 * Names must be unique, non-empty and not "__metadata__". */
bool sdt_st_write(const char *path, const sdt_st_write_item *items, size_t n, const sdt_st_kv *meta, size_t n_meta,
                  sdt_error *error);

#endif
