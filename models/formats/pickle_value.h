/* pickle_value.h - the values a PyTorch file holds, as a tree in an arena.
 *
 * The restricted unpickler (pickle_read.h) builds these and nothing else; the
 * torch writer (torch_save.h) writes them. Only what torch's weights_only
 * loader accepts exists here: None, bools, ints (64-bit), floats, strings,
 * bytes, lists, tuples, dicts (OrderedDict flagged), tensors over typed
 * storages, plus inert records of a few allow-listed classes found in
 * checkpoints' bookkeeping (never called: class name, arguments and state).
 *
 * Every value belongs to an arena and lives until the arena is freed. A
 * pickle may share a value in several places (its memo), so the tree is a
 * DAG; the unpickler refuses cycles and nesting deeper than SDT_PV_MAX_DEPTH,
 * so recursive walks over a loaded tree are safe to that depth.
 *
 * Dicts keep insertion order and may hold non-string keys (a hypernetwork's
 * int widths). Lookups by string return the last match, as Python's dict does.
 */
#ifndef SDT_MODELS_PICKLE_VALUE_H
#define SDT_MODELS_PICKLE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"
#include "sdt_error.h"

#define SDT_PV_MAX_DEPTH 64
#define SDT_PV_MAX_DIMS 8

typedef enum sdt_pv_kind {
    SDT_PV_NONE = 0,
    SDT_PV_BOOL,
    SDT_PV_INT,
    SDT_PV_FLOAT,
    SDT_PV_STR,
    SDT_PV_BYTES,
    SDT_PV_LIST,
    SDT_PV_TUPLE,
    SDT_PV_DICT,
    SDT_PV_TENSOR,
    SDT_PV_OBJECT,
} sdt_pv_kind;

/* One storage (torch's flat typed buffer). Several tensors may view one storage. */
typedef struct sdt_pv_storage {
    char *key; /* the file's name for it: archive/data/<key> */
    sdt_st_dtype dtype;
    uint64_t numel;   /* elements */
    const void *data; /* numel x element size bytes; NULL until the file's data is attached */
} sdt_pv_storage;

typedef struct sdt_pv_tensor {
    sdt_pv_storage *storage;
    int ndim;
    int64_t shape[SDT_PV_MAX_DIMS];
    int64_t stride[SDT_PV_MAX_DIMS]; /* in elements */
    int64_t offset;                  /* in elements, into the storage */
    bool requires_grad;
    bool parameter; /* came from (or is written as) torch.nn.Parameter */
} sdt_pv_tensor;

typedef struct sdt_pv sdt_pv;
struct sdt_pv {
    sdt_pv_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            char *data; /* NUL-terminated (str: UTF-8) */
            size_t len;
        } s; /* STR, BYTES */
        struct {
            sdt_pv **items; /* DICT: key, value, key, value, ... */
            size_t n, cap;  /* n counts items (a dict's pairs are n / 2) */
            bool ordered;   /* DICT built as collections.OrderedDict */
            sdt_pv *attrs;  /* DICT: attributes set on it (an OrderedDict's _metadata), or NULL */
        } seq;              /* LIST, TUPLE, DICT */
        sdt_pv_tensor t;
        struct {
            const char *cls; /* "module.name" */
            sdt_pv *args;    /* tuple, or NULL */
            sdt_pv *state;   /* from BUILD, or NULL */
        } obj;
    } u;
};

typedef struct sdt_pv_arena sdt_pv_arena;

sdt_pv_arena *sdt_pv_arena_new(void);
void sdt_pv_arena_free(sdt_pv_arena *a);
/* Values and storages made in it so far (for bounding and walking storages). */
size_t sdt_pv_arena_values(const sdt_pv_arena *a);
size_t sdt_pv_arena_storage_count(const sdt_pv_arena *a);
sdt_pv_storage *sdt_pv_arena_storage(const sdt_pv_arena *a, size_t i);

/* ---- making values (never fail: glib aborts on out-of-memory as elsewhere) ---- */
sdt_pv *sdt_pv_new(sdt_pv_arena *a, sdt_pv_kind kind); /* empty container / zero scalar */
sdt_pv *sdt_pv_new_bool(sdt_pv_arena *a, bool b);
sdt_pv *sdt_pv_new_int(sdt_pv_arena *a, int64_t i);
sdt_pv *sdt_pv_new_float(sdt_pv_arena *a, double f);
/* len bytes copied (NUL added); STR or BYTES. */
sdt_pv *sdt_pv_new_text(sdt_pv_arena *a, sdt_pv_kind kind, const char *data, size_t len);
sdt_pv *sdt_pv_new_str(sdt_pv_arena *a, const char *s);
sdt_pv *sdt_pv_new_dict(sdt_pv_arena *a, bool ordered);
/* A storage of numel elements over data (borrowed: it must outlive the arena's use). */
sdt_pv_storage *sdt_pv_new_storage(sdt_pv_arena *a, const char *key, sdt_st_dtype dtype, uint64_t numel,
                                   const void *data);
/* A contiguous tensor over its own new storage holding data (borrowed). */
sdt_pv *sdt_pv_new_tensor(sdt_pv_arena *a, sdt_st_dtype dtype, int ndim, const int64_t *shape, const void *data);

/* Appends to a LIST or TUPLE. */
void sdt_pv_append(sdt_pv *seq, sdt_pv *item);
/* Adds a pair to a DICT (appended; a later pair with an equal key wins on lookup). */
void sdt_pv_dict_add(sdt_pv *dict, sdt_pv *key, sdt_pv *value);
/* Convenience: a string key. */
void sdt_pv_dict_set(sdt_pv_arena *a, sdt_pv *dict, const char *key, sdt_pv *value);

/* ---- reading values (all NULL-safe: a NULL or wrong-kind value gives NULL/0) ---- */
const char *sdt_pv_kind_name(sdt_pv_kind kind); /* "dict", "tensor", ... */
bool sdt_pv_is(const sdt_pv *v, sdt_pv_kind kind);
/* Items of a LIST/TUPLE, pairs of a DICT. */
size_t sdt_pv_len(const sdt_pv *v);
sdt_pv *sdt_pv_item(const sdt_pv *seq, size_t i);
sdt_pv *sdt_pv_dict_key(const sdt_pv *dict, size_t i);
sdt_pv *sdt_pv_dict_value(const sdt_pv *dict, size_t i);
/* The value under a string (or int) key, the last one when repeated; NULL when absent. */
sdt_pv *sdt_pv_dict_get(const sdt_pv *dict, const char *key);
sdt_pv *sdt_pv_dict_get_int(const sdt_pv *dict, int64_t key);
/* The string of a STR value, else NULL. */
const char *sdt_pv_as_str(const sdt_pv *v);
/* Number-like reads: false when v is not of that kind (ints read as floats too; bools as ints). */
bool sdt_pv_as_int(const sdt_pv *v, int64_t *out);
bool sdt_pv_as_float(const sdt_pv *v, double *out);

/* Tensor facts. numel of a tensor value (0 for other kinds). */
int64_t sdt_pv_tensor_numel(const sdt_pv *v);
/* True when its strides are the row-major ones for its shape (size-1 dims ignored). */
bool sdt_pv_tensor_contiguous(const sdt_pv *v);
/* Start of its first element in the storage (storage data must be attached). */
const void *sdt_pv_tensor_data(const sdt_pv *v);

#endif
