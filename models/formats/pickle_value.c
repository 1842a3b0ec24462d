/* pickle_value.c - see pickle_value.h. */
#include "pickle_value.h"

#include <glib.h>
#include <string.h>

struct sdt_pv_arena {
    GPtrArray *values;   /* sdt_pv*, freed with their item arrays and text */
    GPtrArray *storages; /* sdt_pv_storage* */
};

static void free_value(gpointer p)
{
    sdt_pv *v = p;
    if (v->kind == SDT_PV_STR || v->kind == SDT_PV_BYTES) g_free(v->u.s.data);
    if (v->kind == SDT_PV_LIST || v->kind == SDT_PV_TUPLE || v->kind == SDT_PV_DICT) g_free(v->u.seq.items);
    g_free(v);
}

static void free_storage(gpointer p)
{
    sdt_pv_storage *s = p;
    g_free(s->key);
    g_free(s);
}

sdt_pv_arena *sdt_pv_arena_new(void)
{
    sdt_pv_arena *a = g_new0(sdt_pv_arena, 1);
    a->values = g_ptr_array_new_with_free_func(free_value);
    a->storages = g_ptr_array_new_with_free_func(free_storage);
    return a;
}

void sdt_pv_arena_free(sdt_pv_arena *a)
{
    if (!a) return;
    g_ptr_array_free(a->values, TRUE);
    g_ptr_array_free(a->storages, TRUE);
    g_free(a);
}

size_t sdt_pv_arena_values(const sdt_pv_arena *a)
{
    return a->values->len;
}
size_t sdt_pv_arena_storage_count(const sdt_pv_arena *a)
{
    return a->storages->len;
}
sdt_pv_storage *sdt_pv_arena_storage(const sdt_pv_arena *a, size_t i)
{
    return i < a->storages->len ? g_ptr_array_index(a->storages, i) : NULL;
}

sdt_pv *sdt_pv_new(sdt_pv_arena *a, sdt_pv_kind kind)
{
    sdt_pv *v = g_new0(sdt_pv, 1);
    v->kind = kind;
    if (kind == SDT_PV_STR || kind == SDT_PV_BYTES) v->u.s.data = g_strdup("");
    g_ptr_array_add(a->values, v);
    return v;
}

sdt_pv *sdt_pv_new_bool(sdt_pv_arena *a, bool b)
{
    sdt_pv *v = sdt_pv_new(a, SDT_PV_BOOL);
    v->u.b = b;
    return v;
}

sdt_pv *sdt_pv_new_int(sdt_pv_arena *a, int64_t i)
{
    sdt_pv *v = sdt_pv_new(a, SDT_PV_INT);
    v->u.i = i;
    return v;
}

sdt_pv *sdt_pv_new_float(sdt_pv_arena *a, double f)
{
    sdt_pv *v = sdt_pv_new(a, SDT_PV_FLOAT);
    v->u.f = f;
    return v;
}

sdt_pv *sdt_pv_new_text(sdt_pv_arena *a, sdt_pv_kind kind, const char *data, size_t len)
{
    sdt_pv *v = g_new0(sdt_pv, 1);
    v->kind = kind;
    v->u.s.data = g_malloc(len + 1);
    if (len) memcpy(v->u.s.data, data, len);
    v->u.s.data[len] = 0;
    v->u.s.len = len;
    g_ptr_array_add(a->values, v);
    return v;
}

sdt_pv *sdt_pv_new_str(sdt_pv_arena *a, const char *s)
{
    return sdt_pv_new_text(a, SDT_PV_STR, s, strlen(s));
}

sdt_pv *sdt_pv_new_dict(sdt_pv_arena *a, bool ordered)
{
    sdt_pv *v = sdt_pv_new(a, SDT_PV_DICT);
    v->u.seq.ordered = ordered;
    return v;
}

sdt_pv_storage *sdt_pv_new_storage(sdt_pv_arena *a, const char *key, sdt_st_dtype dtype, uint64_t numel,
                                   const void *data)
{
    sdt_pv_storage *s = g_new0(sdt_pv_storage, 1);
    s->key = g_strdup(key);
    s->dtype = dtype;
    s->numel = numel;
    s->data = data;
    g_ptr_array_add(a->storages, s);
    return s;
}

sdt_pv *sdt_pv_new_tensor(sdt_pv_arena *a, sdt_st_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    sdt_pv *v = sdt_pv_new(a, SDT_PV_TENSOR);
    sdt_pv_tensor *t = &v->u.t;
    t->ndim = ndim < 0 ? 0 : ndim > SDT_PV_MAX_DIMS ? SDT_PV_MAX_DIMS : ndim;
    int64_t stride = 1;
    for (int d = t->ndim; d-- > 0;) {
        t->shape[d] = shape[d];
        t->stride[d] = stride;
        stride *= shape[d];
    }
    char key[32];
    g_snprintf(key, sizeof key, "%u", a->storages->len);
    t->storage = sdt_pv_new_storage(a, key, dtype, (uint64_t)stride, data);
    return v;
}

static void push_item(sdt_pv *seq, sdt_pv *item)
{
    if (seq->u.seq.n == seq->u.seq.cap) {
        seq->u.seq.cap = seq->u.seq.cap ? seq->u.seq.cap * 2 : 4;
        seq->u.seq.items = g_renew(sdt_pv *, seq->u.seq.items, seq->u.seq.cap);
    }
    seq->u.seq.items[seq->u.seq.n++] = item;
}

void sdt_pv_append(sdt_pv *seq, sdt_pv *item)
{
    if (seq && (seq->kind == SDT_PV_LIST || seq->kind == SDT_PV_TUPLE)) push_item(seq, item);
}

void sdt_pv_dict_add(sdt_pv *dict, sdt_pv *key, sdt_pv *value)
{
    if (!dict || dict->kind != SDT_PV_DICT) return;
    push_item(dict, key);
    push_item(dict, value);
}

void sdt_pv_dict_set(sdt_pv_arena *a, sdt_pv *dict, const char *key, sdt_pv *value)
{
    sdt_pv_dict_add(dict, sdt_pv_new_str(a, key), value);
}

const char *sdt_pv_kind_name(sdt_pv_kind kind)
{
    static const char *const names[] = {"None", "bool",  "int",  "float",  "str",   "bytes",
                                        "list", "tuple", "dict", "tensor", "object"};
    return (unsigned)kind < G_N_ELEMENTS(names) ? names[kind] : "?";
}

bool sdt_pv_is(const sdt_pv *v, sdt_pv_kind kind)
{
    return v && v->kind == kind;
}

static bool is_seq(const sdt_pv *v)
{
    return v && (v->kind == SDT_PV_LIST || v->kind == SDT_PV_TUPLE || v->kind == SDT_PV_DICT);
}

size_t sdt_pv_len(const sdt_pv *v)
{
    if (!is_seq(v)) return 0;
    return v->kind == SDT_PV_DICT ? v->u.seq.n / 2 : v->u.seq.n;
}

sdt_pv *sdt_pv_item(const sdt_pv *seq, size_t i)
{
    return is_seq(seq) && seq->kind != SDT_PV_DICT && i < seq->u.seq.n ? seq->u.seq.items[i] : NULL;
}

sdt_pv *sdt_pv_dict_key(const sdt_pv *dict, size_t i)
{
    return sdt_pv_is(dict, SDT_PV_DICT) && i < dict->u.seq.n / 2 ? dict->u.seq.items[2 * i] : NULL;
}

sdt_pv *sdt_pv_dict_value(const sdt_pv *dict, size_t i)
{
    return sdt_pv_is(dict, SDT_PV_DICT) && i < dict->u.seq.n / 2 ? dict->u.seq.items[2 * i + 1] : NULL;
}

sdt_pv *sdt_pv_dict_get(const sdt_pv *dict, const char *key)
{
    for (size_t i = sdt_pv_len(dict); i-- > 0;) {
        const char *k = sdt_pv_as_str(sdt_pv_dict_key(dict, i));
        if (k && strcmp(k, key) == 0) return sdt_pv_dict_value(dict, i);
    }
    return NULL;
}

sdt_pv *sdt_pv_dict_get_int(const sdt_pv *dict, int64_t key)
{
    for (size_t i = sdt_pv_len(dict); i-- > 0;) {
        const sdt_pv *k = sdt_pv_dict_key(dict, i);
        if (sdt_pv_is(k, SDT_PV_INT) && k->u.i == key) return sdt_pv_dict_value(dict, i);
    }
    return NULL;
}

const char *sdt_pv_as_str(const sdt_pv *v)
{
    return sdt_pv_is(v, SDT_PV_STR) ? v->u.s.data : NULL;
}

bool sdt_pv_as_int(const sdt_pv *v, int64_t *out)
{
    if (sdt_pv_is(v, SDT_PV_INT))
        *out = v->u.i;
    else if (sdt_pv_is(v, SDT_PV_BOOL))
        *out = v->u.b;
    else
        return false;
    return true;
}

bool sdt_pv_as_float(const sdt_pv *v, double *out)
{
    int64_t i;
    if (sdt_pv_is(v, SDT_PV_FLOAT))
        *out = v->u.f;
    else if (sdt_pv_as_int(v, &i))
        *out = (double)i;
    else
        return false;
    return true;
}

int64_t sdt_pv_tensor_numel(const sdt_pv *v)
{
    if (!sdt_pv_is(v, SDT_PV_TENSOR)) return 0;
    int64_t n = 1;
    for (int d = 0; d < v->u.t.ndim; d++) n *= v->u.t.shape[d];
    return n;
}

bool sdt_pv_tensor_contiguous(const sdt_pv *v)
{
    if (!sdt_pv_is(v, SDT_PV_TENSOR)) return false;
    int64_t want = 1;
    for (int d = v->u.t.ndim; d-- > 0;) {
        if (v->u.t.shape[d] != 1 && v->u.t.stride[d] != want) return false;
        want *= v->u.t.shape[d];
    }
    return true;
}

const void *sdt_pv_tensor_data(const sdt_pv *v)
{
    if (!sdt_pv_is(v, SDT_PV_TENSOR) || !v->u.t.storage->data) return NULL;
    return (const uint8_t *)v->u.t.storage->data + (size_t)v->u.t.offset * sdt_st_dtype_size(v->u.t.storage->dtype);
}
