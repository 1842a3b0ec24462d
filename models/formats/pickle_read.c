/* pickle_read.c - see pickle_read.h. Opcodes as in CPython's Lib/pickle.py and pickletools.py. */
#include "pickle_read.h"

#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_numeric.h"

/* Private kinds: on the stack only, never in a finished result. */
#define PV_GLOBAL ((sdt_pv_kind)100)
#define PV_STORAGE ((sdt_pv_kind)101)

typedef enum global_id {
    G_ORDERED_DICT,
    G_REBUILD_TENSOR_V2,
    G_REBUILD_TENSOR,
    G_REBUILD_PARAMETER,
    G_REBUILD_PARAMETER_STATE,
    G_REBUILD_FROM_TYPE_V2,
    G_TENSOR_TYPE,
    G_STORAGE_TYPE,
    G_INERT,
} global_id;

typedef struct allowed_global {
    const char *module, *name, *full;
    global_id id;
    sdt_st_dtype dtype; /* G_STORAGE_TYPE */
} allowed_global;

static const allowed_global allowed[] = {
    {"collections", "OrderedDict", "collections.OrderedDict", G_ORDERED_DICT, 0},
    {"torch._utils", "_rebuild_tensor_v2", "torch._utils._rebuild_tensor_v2", G_REBUILD_TENSOR_V2, 0},
    {"torch._utils", "_rebuild_tensor", "torch._utils._rebuild_tensor", G_REBUILD_TENSOR, 0},
    {"torch._utils", "_rebuild_parameter", "torch._utils._rebuild_parameter", G_REBUILD_PARAMETER, 0},
    {"torch._utils", "_rebuild_parameter_with_state", "torch._utils._rebuild_parameter_with_state",
     G_REBUILD_PARAMETER_STATE, 0},
    {"torch._tensor", "_rebuild_from_type_v2", "torch._tensor._rebuild_from_type_v2", G_REBUILD_FROM_TYPE_V2, 0},
    {"torch", "Tensor", "torch.Tensor", G_TENSOR_TYPE, 0},
    {"torch.nn.parameter", "Parameter", "torch.nn.parameter.Parameter", G_TENSOR_TYPE, 0},
    {"torch", "FloatStorage", "torch.FloatStorage", G_STORAGE_TYPE, SDT_ST_F32},
    {"torch", "HalfStorage", "torch.HalfStorage", G_STORAGE_TYPE, SDT_ST_F16},
    {"torch", "BFloat16Storage", "torch.BFloat16Storage", G_STORAGE_TYPE, SDT_ST_BF16},
    {"torch", "DoubleStorage", "torch.DoubleStorage", G_STORAGE_TYPE, SDT_ST_F64},
    {"torch", "LongStorage", "torch.LongStorage", G_STORAGE_TYPE, SDT_ST_I64},
    {"torch", "IntStorage", "torch.IntStorage", G_STORAGE_TYPE, SDT_ST_I32},
    {"torch", "ShortStorage", "torch.ShortStorage", G_STORAGE_TYPE, SDT_ST_I16},
    {"torch", "CharStorage", "torch.CharStorage", G_STORAGE_TYPE, SDT_ST_I8},
    {"torch", "ByteStorage", "torch.ByteStorage", G_STORAGE_TYPE, SDT_ST_U8},
    {"torch", "BoolStorage", "torch.BoolStorage", G_STORAGE_TYPE, SDT_ST_BOOL},
    {"torch", "UntypedStorage", "torch.UntypedStorage", G_STORAGE_TYPE, SDT_ST_U8},
    /* Inert records: bookkeeping in old embeddings and training checkpoints, kept as data, never called. */
    {"torch.nn.modules.container", "ParameterDict", "torch.nn.modules.container.ParameterDict", G_INERT, 0},
    {"pytorch_lightning.callbacks.model_checkpoint", "ModelCheckpoint",
     "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint", G_INERT, 0},
    {"numpy.core.multiarray", "scalar", "numpy.core.multiarray.scalar", G_INERT, 0},
    {"numpy", "dtype", "numpy.dtype", G_INERT, 0},
    {"_codecs", "encode", "_codecs.encode", G_INERT, 0},
    {"__builtin__", "set", "__builtin__.set", G_INERT, 0}, /* a pickled Module's _non_persistent_buffers_set */
    {"builtins", "set", "builtins.set", G_INERT, 0},
};

typedef struct vm {
    const uint8_t *buf;
    size_t size, pos;
    size_t op_pos; /* where the current opcode starts, for sentences */
    sdt_pv_arena *arena;
    const char *origin;
    GPtrArray *stack;
    GArray *marks;        /* size_t stack heights */
    GHashTable *memo;     /* index -> sdt_pv* */
    GHashTable *storages; /* key -> sdt_pv_storage* */
    size_t items;         /* container items added so far */
    sdt_error *error;
} vm;

static bool failf(vm *m, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool failf(vm *m, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    sdt_c_vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sdt_fail(m->error, SDT_ERR_BAD_FORMAT, "%s: %s (pickle byte %zu)", m->origin, what, m->op_pos);
}

#define FIX_DAMAGED "the file is truncated or damaged: copy or download it again"

static sdt_pv *new_value(vm *m, sdt_pv_kind kind)
{
    if (sdt_pv_arena_values(m->arena) >= SDT_PICKLE_MAX_VALUES) return NULL;
    return sdt_pv_new(m->arena, kind);
}

/* Room for one more value (the constructors of pickle_value.h never fail). */
static bool room(const vm *m)
{
    return sdt_pv_arena_values(m->arena) < SDT_PICKLE_MAX_VALUES;
}

static bool too_many_values(vm *m)
{
    return failf(m,
                 "the pickle builds more than %zu values, more than any model file holds; this is not a "
                 "PyTorch weights file",
                 SDT_PICKLE_MAX_VALUES);
}

/* ---- reading bytes ----------------------------------------------------------------- */

static bool take(vm *m, size_t n, const uint8_t **p)
{
    *p = NULL;
    if (n > m->size - m->pos)
        return failf(m, "the pickle ends in the middle of an opcode (needs %zu more bytes, has %zu); " FIX_DAMAGED, n,
                     m->size - m->pos);
    *p = m->buf + m->pos;
    m->pos += n;
    return true;
}

static bool take_uint(vm *m, int width, uint64_t *out)
{
    const uint8_t *p = NULL;
    *out = 0;
    if (!take(m, (size_t)width, &p)) return false;
    uint64_t v = 0;
    for (int i = width; i-- > 0;) v = v << 8 | p[i];
    *out = v;
    return true;
}

/* A text line (protocol 0 arguments), without its newline. */
static bool take_line(vm *m, const char **line, size_t *len)
{
    *line = NULL;
    *len = 0;
    const uint8_t *start = m->buf + m->pos;
    const uint8_t *nl = memchr(start, '\n', m->size - m->pos);
    if (!nl) return failf(m, "the pickle ends inside a text argument; " FIX_DAMAGED);
    *line = (const char *)start;
    *len = (size_t)(nl - start);
    m->pos += *len + 1;
    return true;
}

/* A decimal memo index on a text line (protocol 0 PUT/GET). */
static bool take_line_index(vm *m, uint64_t *out)
{
    const char *line = NULL;
    size_t len = 0;
    *out = 0;
    if (!take_line(m, &line, &len)) return false;
    char buf[24], *end;
    if (!len || len >= sizeof buf) return failf(m, "a memo index is malformed; " FIX_DAMAGED);
    memcpy(buf, line, len);
    buf[len] = 0;
    *out = strtoull(buf, &end, 10);
    if (*end) return failf(m, "a memo index is malformed; " FIX_DAMAGED);
    return true;
}

/* ---- the stack ---------------------------------------------------------------------- */

static bool push(vm *m, sdt_pv *v)
{
    if (!v) return too_many_values(m);
    if (m->stack->len >= SDT_PICKLE_MAX_ITEMS)
        return failf(m, "the pickle's stack grows past %zu entries", SDT_PICKLE_MAX_ITEMS);
    g_ptr_array_add(m->stack, v);
    return true;
}

static size_t mark_base(const vm *m)
{
    return m->marks->len ? g_array_index(m->marks, size_t, m->marks->len - 1) : 0;
}

static bool pop(vm *m, sdt_pv **out)
{
    *out = NULL;
    if (m->stack->len <= mark_base(m)) return failf(m, "an opcode pops from an empty stack; " FIX_DAMAGED);
    *out = g_ptr_array_steal_index(m->stack, m->stack->len - 1);
    return true;
}

static bool top(vm *m, sdt_pv **out)
{
    *out = NULL;
    if (m->stack->len <= mark_base(m)) return failf(m, "an opcode reads an empty stack; " FIX_DAMAGED);
    *out = g_ptr_array_index(m->stack, m->stack->len - 1);
    return true;
}

/* Pops to the last mark: the popped values are stack[*first, end) until the caller truncates. */
static bool pop_mark(vm *m, size_t *first)
{
    *first = 0;
    if (!m->marks->len) return failf(m, "an opcode needs a MARK but none is open; " FIX_DAMAGED);
    *first = g_array_index(m->marks, size_t, m->marks->len - 1);
    g_array_set_size(m->marks, m->marks->len - 1);
    return true;
}

static bool count_items(vm *m, size_t n)
{
    if (n > SDT_PICKLE_MAX_ITEMS - m->items)
        return failf(m, "the pickle's containers hold more than %zu items, more than any model file holds",
                     SDT_PICKLE_MAX_ITEMS);
    m->items += n;
    return true;
}

/* Python's rule for dict keys: scalars, strings and tuples of them (nested at most SDT_PV_MAX_DEPTH deep). */
static bool hashable(const sdt_pv *k, int depth)
{
    if (k->kind == SDT_PV_TUPLE) {
        if (depth >= SDT_PV_MAX_DEPTH) return false;
        for (size_t i = 0; i < k->u.seq.n; i++)
            if (!hashable(k->u.seq.items[i], depth + 1)) return false;
        return true;
    }
    return k->kind <= SDT_PV_BYTES;
}

static bool add_pairs(vm *m, sdt_pv *dict, size_t first)
{
    size_t n = m->stack->len - first;
    if (dict->kind != SDT_PV_DICT)
        return failf(m, "SETITEM(S) targets a %s, not a dict; " FIX_DAMAGED, sdt_pv_kind_name(dict->kind));
    if (n % 2) return failf(m, "SETITEMS has an odd number of keys and values; " FIX_DAMAGED);
    if (!count_items(m, n)) return false;
    for (size_t i = first; i < m->stack->len; i += 2) {
        sdt_pv *k = g_ptr_array_index(m->stack, i);
        if (!hashable(k, 0))
            return failf(m, "a dict key is a %s, which Python cannot hash (or nests too deep); " FIX_DAMAGED,
                         sdt_pv_kind_name(k->kind));
        sdt_pv_dict_add(dict, k, g_ptr_array_index(m->stack, i + 1));
    }
    g_ptr_array_set_size(m->stack, (guint)first);
    return true;
}

static bool add_items(vm *m, sdt_pv *list, size_t first)
{
    if (list->kind != SDT_PV_LIST)
        return failf(m, "APPEND(S) targets a %s, not a list; " FIX_DAMAGED, sdt_pv_kind_name(list->kind));
    if (!count_items(m, m->stack->len - first)) return false;
    for (size_t i = first; i < m->stack->len; i++) sdt_pv_append(list, g_ptr_array_index(m->stack, i));
    g_ptr_array_set_size(m->stack, (guint)first);
    return true;
}

static bool make_tuple(vm *m, size_t first)
{
    sdt_pv *t = new_value(m, SDT_PV_TUPLE);
    if (!t) return too_many_values(m);
    if (!count_items(m, m->stack->len - first)) return false;
    for (size_t i = first; i < m->stack->len; i++) sdt_pv_append(t, g_ptr_array_index(m->stack, i));
    g_ptr_array_set_size(m->stack, (guint)first);
    return push(m, t);
}

/* ---- globals, persistent ids, calls -------------------------------------------------- */

static bool push_global(vm *m, const char *module, size_t mlen, const char *name, size_t nlen)
{
    for (size_t i = 0; i < G_N_ELEMENTS(allowed); i++) {
        if (strlen(allowed[i].module) == mlen && strlen(allowed[i].name) == nlen &&
            memcmp(allowed[i].module, module, mlen) == 0 && memcmp(allowed[i].name, name, nlen) == 0) {
            sdt_pv *g = new_value(m, PV_GLOBAL);
            if (!g) return too_many_values(m);
            g->u.i = (int64_t)i;
            return push(m, g);
        }
    }
    char shown[160];
    snprintf(shown, sizeof shown, "%.*s.%.*s", (int)(mlen > 70 ? 70 : mlen), module, (int)(nlen > 70 ? 70 : nlen),
             name);
    for (char *c = shown; *c; c++)
        if ((unsigned char)*c < 32 || (unsigned char)*c > 126) *c = '?';
    return failf(m,
                 "the pickle asks for the Python global '%s', which is not a tensor, storage or plain container; "
                 "sdtrain never runs code from a pickle, so it refuses the file: re-save it holding only tensors and "
                 "plain containers, or convert it to .safetensors",
                 shown);
}

static const allowed_global *global_of(const sdt_pv *v)
{
    return v && v->kind == PV_GLOBAL ? &allowed[v->u.i] : NULL;
}

/* Reads an int argument (bools count, as in Python). */
static bool arg_int(vm *m, const sdt_pv *v, const char *what, int64_t *out)
{
    if (sdt_pv_as_int(v, out)) return true;
    return failf(m, "%s is a %s, not an int; " FIX_DAMAGED, what, v ? sdt_pv_kind_name(v->kind) : "nothing");
}

static bool persistent_load(vm *m, sdt_pv *pid)
{
    if (!sdt_pv_is(pid, SDT_PV_TUPLE) || pid->u.seq.n < 5 || pid->u.seq.n > 6 ||
        g_strcmp0(sdt_pv_as_str(pid->u.seq.items[0]), "storage") != 0)
        return failf(m, "a persistent id is not torch's ('storage', type, key, location, size) tuple; this file was "
                        "not written by torch.save");
    sdt_pv **f = pid->u.seq.items;
    const allowed_global *type = global_of(f[1]);
    if (!type || type->id != G_STORAGE_TYPE)
        return failf(m, "a persistent id names no torch storage type; this file was not written by torch.save");
    char key[64];
    int64_t numel, ikey;
    if (sdt_pv_as_str(f[2]) && f[2]->u.s.len < sizeof key && f[2]->u.s.len > 0)
        snprintf(key, sizeof key, "%s", f[2]->u.s.data);
    else if (sdt_pv_is(f[2], SDT_PV_INT) && sdt_pv_as_int(f[2], &ikey))
        snprintf(key, sizeof key, "%lld", (long long)ikey);
    else
        return failf(m, "a storage's key is neither a short string nor an int; " FIX_DAMAGED);
    if (!arg_int(m, f[4], "a storage's size", &numel)) return false;
    if (numel < 0 || (uint64_t)numel > (UINT64_MAX >> 4))
        return failf(m, "storage '%s' declares %lld elements; " FIX_DAMAGED, key, (long long)numel);
    if (pid->u.seq.n == 6 && !sdt_pv_is(f[5], SDT_PV_NONE))
        return failf(m,
                     "storage '%s' is a view of another storage (a format of torch before 1.0), which is not "
                     "supported; load and re-save the file with a current torch",
                     key);
    sdt_pv_storage *s = g_hash_table_lookup(m->storages, key);
    if (s && (s->dtype != type->dtype || s->numel != (uint64_t)numel))
        return failf(m, "storage '%s' is declared twice with different types or sizes; " FIX_DAMAGED, key);
    if (!s) {
        s = sdt_pv_new_storage(m->arena, key, type->dtype, (uint64_t)numel, NULL);
        g_hash_table_insert(m->storages, s->key, s);
    }
    sdt_pv *v = new_value(m, PV_STORAGE);
    if (!v) return too_many_values(m);
    v->u.t.storage = s;
    return push(m, v);
}

/* Reads a size or stride tuple into out[ndim]. */
static bool dims_arg(vm *m, const sdt_pv *v, const char *what, int64_t *out, int *ndim)
{
    if (!sdt_pv_is(v, SDT_PV_TUPLE) && !sdt_pv_is(v, SDT_PV_LIST))
        return failf(m, "a tensor's %s is a %s, not a tuple; " FIX_DAMAGED, what,
                     v ? sdt_pv_kind_name(v->kind) : "nothing");
    if (v->u.seq.n > SDT_PV_MAX_DIMS)
        return failf(m, "a tensor has %zu dimensions, more than the %d supported", v->u.seq.n, SDT_PV_MAX_DIMS);
    *ndim = (int)v->u.seq.n;
    for (int d = 0; d < *ndim; d++) {
        if (!arg_int(m, v->u.seq.items[d], "a tensor dimension", &out[d])) return false;
        if (out[d] < 0 || out[d] > ((int64_t)1 << 48))
            return failf(m, "a tensor's %s holds %lld; " FIX_DAMAGED, what, (long long)out[d]);
    }
    return true;
}

/* _rebuild_tensor(_v2)(storage, storage_offset, size, stride, ...). */
static bool rebuild_tensor(vm *m, sdt_pv **a, size_t n)
{
    if (n < 4 || !a[0] || a[0]->kind != PV_STORAGE)
        return failf(m, "a tensor is rebuilt without a storage; " FIX_DAMAGED);
    sdt_pv *v = new_value(m, SDT_PV_TENSOR);
    if (!v) return too_many_values(m);
    sdt_pv_tensor *t = &v->u.t;
    t->storage = a[0]->u.t.storage;
    int sdims;
    if (!arg_int(m, a[1], "a tensor's storage offset", &t->offset) || !dims_arg(m, a[2], "size", t->shape, &t->ndim) ||
        !dims_arg(m, a[3], "stride", t->stride, &sdims))
        return false;
    if (sdims != t->ndim) return failf(m, "a tensor has %d sizes but %d strides; " FIX_DAMAGED, t->ndim, sdims);
    if (t->offset < 0) return failf(m, "a tensor has a negative storage offset; " FIX_DAMAGED);
    /* The last element viewed must lie inside the storage (shape and stride are < 2^48, so no overflow). */
    uint64_t last = (uint64_t)t->offset, numel = 1;
    bool empty = false;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            empty = true;
        else
            last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
        numel *= (uint64_t)t->shape[d];
        if (numel > ((uint64_t)1 << 48)) return failf(m, "a tensor has more than 2^48 elements; " FIX_DAMAGED);
        if (last > ((uint64_t)1 << 62)) return failf(m, "a tensor's strides reach past 2^62 elements; " FIX_DAMAGED);
    }
    if (!empty && last >= t->storage->numel)
        return failf(
            m, "a tensor of %llu elements reaches element %llu of storage '%s', which holds only %llu; " FIX_DAMAGED,
            (unsigned long long)numel, (unsigned long long)last, t->storage->key,
            (unsigned long long)t->storage->numel);
    if (n >= 5) {
        int64_t rg;
        if (!arg_int(m, a[4], "requires_grad", &rg)) return false;
        t->requires_grad = rg != 0;
    }
    return push(m, v);
}

static bool call(vm *m, sdt_pv *callable, sdt_pv *args, bool newobj);

static bool rebuild_parameter(vm *m, sdt_pv **a, size_t n)
{
    if (n < 2 || !sdt_pv_is(a[0], SDT_PV_TENSOR))
        return failf(m, "a Parameter is rebuilt from a non-tensor; " FIX_DAMAGED);
    sdt_pv *v = new_value(m, SDT_PV_TENSOR);
    if (!v) return too_many_values(m);
    v->u.t = a[0]->u.t;
    int64_t rg;
    if (!arg_int(m, a[1], "requires_grad", &rg)) return false;
    v->u.t.requires_grad = rg != 0;
    v->u.t.parameter = true;
    return push(m, v);
}

static bool call(vm *m, sdt_pv *callable, sdt_pv *args, bool newobj)
{
    const allowed_global *g = global_of(callable);
    if (!g)
        return failf(m, "the pickle calls a %s, which is not callable; " FIX_DAMAGED, sdt_pv_kind_name(callable->kind));
    if (!sdt_pv_is(args, SDT_PV_TUPLE)) return failf(m, "the arguments to %s are not a tuple; " FIX_DAMAGED, g->full);
    sdt_pv **a = args->u.seq.items;
    size_t n = args->u.seq.n;
    switch (g->id) {
        case G_ORDERED_DICT: {
            sdt_pv *d = new_value(m, SDT_PV_DICT);
            if (!d) return too_many_values(m);
            d->u.seq.ordered = true;
            if (n != 0 && !(n == 1 && sdt_pv_len(a[0]) == 0))
                return failf(m, "collections.OrderedDict is called with contents; only the empty form torch writes is "
                                "supported: re-save the file with torch.save");
            return push(m, d);
        }
        case G_REBUILD_TENSOR:
        case G_REBUILD_TENSOR_V2:
            if (!newobj) return rebuild_tensor(m, a, n);
            break;
        case G_REBUILD_PARAMETER:
        case G_REBUILD_PARAMETER_STATE:
            if (!newobj) return rebuild_parameter(m, a, n);
            break;
        case G_REBUILD_FROM_TYPE_V2: {
            /* (func, new_type, args, state): only plain tensors and Parameters, rebuilt by an allowed function. */
            const allowed_global *f = n == 4 ? global_of(a[0]) : NULL, *type = n == 4 ? global_of(a[1]) : NULL;
            if (newobj || !f || !type || type->id != G_TENSOR_TYPE ||
                (f->id != G_REBUILD_TENSOR_V2 && f->id != G_REBUILD_TENSOR && f->id != G_REBUILD_PARAMETER))
                return failf(m,
                             "torch._tensor._rebuild_from_type_v2 is used for something other than a plain tensor or "
                             "Parameter; re-save the file holding only plain tensors");
            return call(m, a[0], a[2], false);
        }
        case G_INERT: {
            sdt_pv *o = new_value(m, SDT_PV_OBJECT);
            if (!o) return too_many_values(m);
            o->u.obj.cls = g->full;
            o->u.obj.args = args;
            return push(m, o);
        }
        case G_TENSOR_TYPE:
        case G_STORAGE_TYPE:
            break;
    }
    return failf(m,
                 "the pickle calls %s in a way torch.save never does; sdtrain refuses it: re-save the file with "
                 "torch.save holding only tensors and plain containers",
                 g->full);
}

static bool build(vm *m, sdt_pv *target, sdt_pv *state)
{
    switch (target->kind) {
        case SDT_PV_DICT:
            target->u.seq.attrs = state; /* an OrderedDict's __dict__, e.g. a state_dict's _metadata */
            return true;
        case SDT_PV_OBJECT:
            target->u.obj.state = state;
            return true;
        case SDT_PV_TENSOR:
            return true; /* Python attributes on a tensor: not data */
        default:
            return failf(m, "BUILD sets state on a %s, which torch.save never does; " FIX_DAMAGED,
                         sdt_pv_kind_name(target->kind));
    }
}

/* ---- memo -------------------------------------------------------------------------- */

static bool memo_put(vm *m, uint64_t index)
{
    sdt_pv *v = NULL;
    if (!top(m, &v)) return false;
    if (g_hash_table_size(m->memo) >= SDT_PICKLE_MAX_VALUES && !g_hash_table_contains(m->memo, GSIZE_TO_POINTER(index)))
        return failf(m, "the pickle's memo grows past %zu entries", SDT_PICKLE_MAX_VALUES);
    g_hash_table_insert(m->memo, GSIZE_TO_POINTER((gsize)index), v);
    return true;
}

static bool memo_get(vm *m, uint64_t index)
{
    sdt_pv *v = g_hash_table_lookup(m->memo, GSIZE_TO_POINTER((gsize)index));
    if (!v)
        return failf(m, "the pickle reads memo entry %llu, which was never stored; " FIX_DAMAGED,
                     (unsigned long long)index);
    return push(m, v);
}

/* ---- numbers ----------------------------------------------------------------------- */

/* A little-endian two's complement int of n bytes (LONG1/LONG4), at most 64 bits. */
static bool push_long(vm *m, size_t n)
{
    const uint8_t *p = NULL;
    if (n > 8) {
        if (n > m->size - m->pos) return take(m, n, &p);
        return failf(m, "the pickle holds an int of %zu bytes, wider than 64 bits; no tensor file needs one", n);
    }
    if (!take(m, n, &p)) return false;
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    if (n && n < 8 && (p[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);
    return push(m, room(m) ? sdt_pv_new_int(m->arena, (int64_t)v) : NULL);
}

static bool push_text_number(vm *m, char kind)
{
    const char *line = NULL;
    size_t len = 0;
    if (!take_line(m, &line, &len)) return false;
    char buf[64];
    if (len >= sizeof buf) return failf(m, "a text number is %zu characters long; " FIX_DAMAGED, len);
    memcpy(buf, line, len);
    buf[len] = 0;
    if (kind == 'L' && len && buf[len - 1] == 'L') buf[len - 1] = 0;
    char *end;
    if (kind == 'F') {
        double f = g_ascii_strtod(buf, &end);
        if (end == buf || *end) return failf(m, "a text float is malformed; " FIX_DAMAGED);
        return push(m, room(m) ? sdt_pv_new_float(m->arena, f) : NULL);
    }
    if (kind == 'I' && (strcmp(buf, "00") == 0 || strcmp(buf, "01") == 0))
        return push(m, room(m) ? sdt_pv_new_bool(m->arena, buf[1] == '1') : NULL);
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || *end || errno) return failf(m, "a text int is malformed or wider than 64 bits; " FIX_DAMAGED);
    return push(m, room(m) ? sdt_pv_new_int(m->arena, v) : NULL);
}

/* ---- strings ----------------------------------------------------------------------- */

static bool push_text(vm *m, sdt_pv_kind kind, int len_width)
{
    uint64_t n = 0;
    const uint8_t *p = NULL;
    if (!take_uint(m, len_width, &n)) return false;
    if (n > m->size - m->pos)
        return failf(m, "a %s of %llu bytes runs past the end of the pickle; " FIX_DAMAGED, sdt_pv_kind_name(kind),
                     (unsigned long long)n);
    if (!take(m, (size_t)n, &p)) return false;
    if (kind == SDT_PV_STR && !g_utf8_validate((const char *)p, (gssize)n, NULL))
        return failf(m, "a string is not valid UTF-8; " FIX_DAMAGED);
    return push(m, room(m) ? sdt_pv_new_text(m->arena, kind, (const char *)p, (size_t)n) : NULL);
}

/* ---- the loop ---------------------------------------------------------------------- */

static bool step(vm *m, bool *stop)
{
    const uint8_t *p = NULL;
    sdt_pv *a = NULL, *b = NULL, *c = NULL;
    size_t first = 0;
    uint64_t u = 0;
    m->op_pos = m->pos;
    if (!take(m, 1, &p)) return false;
    uint8_t op = *p;
    switch (op) {
        case 0x80: /* PROTO */
            if (!take_uint(m, 1, &u)) return false;
            if (u > 5)
                return failf(m, "the pickle uses protocol %llu; protocols 0 to 5 are supported", (unsigned long long)u);
            return true;
        case 0x95: /* FRAME: a length hint only */
            return take_uint(m, 8, &u);
        case '.': /* STOP */
            *stop = true;
            return true;
        case '(': /* MARK */
            if (m->marks->len >= SDT_PICKLE_MAX_MARKS)
                return failf(m, "the pickle nests more than %d marks; this is not a PyTorch weights file",
                             SDT_PICKLE_MAX_MARKS);
            {
                size_t h = m->stack->len;
                g_array_append_val(m->marks, h);
            }
            return true;
        case '0': /* POP */
            return pop(m, &a);
        case '1': /* POP_MARK */
            if (!pop_mark(m, &first)) return false;
            g_ptr_array_set_size(m->stack, (guint)first);
            return true;
        case '2': /* DUP */
            return top(m, &a) && push(m, a);
        case 'N':
            return push(m, new_value(m, SDT_PV_NONE));
        case 0x88:
            return push(m, room(m) ? sdt_pv_new_bool(m->arena, true) : NULL);
        case 0x89:
            return push(m, room(m) ? sdt_pv_new_bool(m->arena, false) : NULL);
        case 'J': /* BININT */
            if (!take_uint(m, 4, &u)) return false;
            return push(m, room(m) ? sdt_pv_new_int(m->arena, (int32_t)(uint32_t)u) : NULL);
        case 'K': /* BININT1 */
            if (!take_uint(m, 1, &u)) return false;
            return push(m, room(m) ? sdt_pv_new_int(m->arena, (int64_t)u) : NULL);
        case 'M': /* BININT2 */
            if (!take_uint(m, 2, &u)) return false;
            return push(m, room(m) ? sdt_pv_new_int(m->arena, (int64_t)u) : NULL);
        case 0x8a: /* LONG1 */
            if (!take_uint(m, 1, &u)) return false;
            return push_long(m, (size_t)u);
        case 0x8b: /* LONG4 */
            if (!take_uint(m, 4, &u)) return false;
            return push_long(m, (size_t)u);
        case 'I':
        case 'L':
        case 'F':
            return push_text_number(m, (char)op);
        case 'G': { /* BINFLOAT: big-endian double */
            if (!take(m, 8, &p)) return false;
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++) bits = bits << 8 | p[i];
            double f;
            memcpy(&f, &bits, sizeof f);
            return push(m, room(m) ? sdt_pv_new_float(m->arena, f) : NULL);
        }
        case 'X':
            return push_text(m, SDT_PV_STR, 4); /* BINUNICODE */
        case 0x8c:
            return push_text(m, SDT_PV_STR, 1); /* SHORT_BINUNICODE */
        case 0x8d:
            return push_text(m, SDT_PV_STR, 8); /* BINUNICODE8 */
        case 'T':
            return push_text(m, SDT_PV_BYTES, 4); /* BINSTRING (py2 str) */
        case 'U':
            return push_text(m, SDT_PV_BYTES, 1); /* SHORT_BINSTRING */
        case 'B':
            return push_text(m, SDT_PV_BYTES, 4); /* BINBYTES */
        case 'C':
            return push_text(m, SDT_PV_BYTES, 1); /* SHORT_BINBYTES */
        case 0x8e:
            return push_text(m, SDT_PV_BYTES, 8); /* BINBYTES8 */
        case ')':
            return push(m, new_value(m, SDT_PV_TUPLE));
        case ']':
            return push(m, new_value(m, SDT_PV_LIST));
        case '}':
            return push(m, new_value(m, SDT_PV_DICT));
        case 't':
            return pop_mark(m, &first) && make_tuple(m, first);
        case 0x85:
        case 0x86:
        case 0x87: { /* TUPLE1..3 */
            size_t n = (size_t)(op - 0x84);
            if (m->stack->len < mark_base(m) + n)
                return failf(m, "TUPLE%zu finds too few values on the stack; " FIX_DAMAGED, n);
            return make_tuple(m, m->stack->len - n);
        }
        case 'l': /* LIST */
            if (!pop_mark(m, &first)) return false;
            if (!(a = new_value(m, SDT_PV_LIST))) return too_many_values(m);
            return add_items(m, a, first) && push(m, a);
        case 'd': /* DICT */
            if (!pop_mark(m, &first)) return false;
            if (!(a = new_value(m, SDT_PV_DICT))) return too_many_values(m);
            return add_pairs(m, a, first) && push(m, a);
        case 'a': /* APPEND */
            if (!pop(m, &b) || !top(m, &a)) return false;
            return add_items(m, a, m->stack->len) && (sdt_pv_append(a, b), true);
        case 'e': /* APPENDS */
            if (!pop_mark(m, &first)) return false;
            if (first == 0 || first <= mark_base(m))
                return failf(m, "APPENDS has no list below its mark; " FIX_DAMAGED);
            return add_items(m, g_ptr_array_index(m->stack, first - 1), first);
        case 's': /* SETITEM */
            if (!pop(m, &c) || !pop(m, &b) || !top(m, &a)) return false;
            if (!push(m, b) || !push(m, c)) return false;
            return add_pairs(m, a, m->stack->len - 2);
        case 'u': /* SETITEMS */
            if (!pop_mark(m, &first)) return false;
            if (first == 0 || first <= mark_base(m))
                return failf(m, "SETITEMS has no dict below its mark; " FIX_DAMAGED);
            return add_pairs(m, g_ptr_array_index(m->stack, first - 1), first);
        case 'p':
            return take_line_index(m, &u) && memo_put(m, u); /* PUT */
        case 'g':
            return take_line_index(m, &u) && memo_get(m, u); /* GET */
        case 'q':
            return take_uint(m, 1, &u) && memo_put(m, u); /* BINPUT */
        case 'r':
            return take_uint(m, 4, &u) && memo_put(m, u); /* LONG_BINPUT */
        case 'h':
            return take_uint(m, 1, &u) && memo_get(m, u); /* BINGET */
        case 'j':
            return take_uint(m, 4, &u) && memo_get(m, u); /* LONG_BINGET */
        case 0x94:
            return memo_put(m, g_hash_table_size(m->memo)); /* MEMOIZE */
        case 'c': {                                         /* GLOBAL "module\nname\n" */
            const char *mod = NULL, *name = NULL;
            size_t ml = 0, nl = 0;
            return take_line(m, &mod, &ml) && take_line(m, &name, &nl) && push_global(m, mod, ml, name, nl);
        }
        case 0x93: /* STACK_GLOBAL */
            if (!pop(m, &b) || !pop(m, &a)) return false;
            if (!sdt_pv_as_str(a) || !sdt_pv_as_str(b))
                return failf(m, "STACK_GLOBAL's names are not strings; " FIX_DAMAGED);
            return push_global(m, a->u.s.data, a->u.s.len, b->u.s.data, b->u.s.len);
        case 'Q': /* BINPERSID */
            return pop(m, &a) && persistent_load(m, a);
        case 'R': /* REDUCE */
            return pop(m, &b) && pop(m, &a) && call(m, a, b, false);
        case 0x81: /* NEWOBJ */
            return pop(m, &b) && pop(m, &a) && call(m, a, b, true);
        case 'b': /* BUILD */
            return pop(m, &b) && top(m, &a) && build(m, a, b);
        default:
            break;
    }
    if (op == 'i' || op == 'o' || op == 0x92 || op == 0x82 || op == 0x83 || op == 0x84)
        return failf(m,
                     "the pickle creates Python objects directly (opcode 0x%02x), which torch.save never does; "
                     "sdtrain refuses it: re-save the file holding only tensors and plain containers",
                     op);
    return failf(m,
                 "the pickle uses opcode 0x%02x, which no PyTorch weights file uses; the file is damaged or not a "
                 "PyTorch file",
                 op);
}

/* Refuses cycles and nesting deeper than SDT_PV_MAX_DEPTH, and private values left in the result.
 * heights maps a checked value to its height + 1 (0: unseen); an in-progress value is marked -1. */
static bool check_tree(vm *m, sdt_pv *v, int depth, GHashTable *heights)
{
    if (depth > SDT_PV_MAX_DEPTH)
        return failf(m, "the pickle's data nests deeper than %d levels; this is not a PyTorch weights file",
                     SDT_PV_MAX_DEPTH);
    gpointer seen = g_hash_table_lookup(heights, v);
    if (GPOINTER_TO_INT(seen) == -1)
        return failf(m, "the pickle's data contains itself (a cycle); this is not a PyTorch weights file");
    if (seen) return true;
    if (v->kind == PV_GLOBAL || v->kind == PV_STORAGE)
        return failf(m,
                     "the pickle's result holds a bare %s rather than tensors; re-save the file holding only "
                     "tensors and plain containers",
                     v->kind == PV_GLOBAL ? allowed[v->u.i].full : "storage");
    g_hash_table_insert(heights, v, GINT_TO_POINTER(-1));
    sdt_pv *kids[3] = {0};
    size_t nk = 0;
    if (v->kind == SDT_PV_LIST || v->kind == SDT_PV_TUPLE || v->kind == SDT_PV_DICT) {
        for (size_t i = 0; i < v->u.seq.n; i++)
            if (!check_tree(m, v->u.seq.items[i], depth + 1, heights)) return false;
        if (v->kind == SDT_PV_DICT) kids[nk++] = v->u.seq.attrs;
    } else if (v->kind == SDT_PV_OBJECT) {
        kids[nk++] = v->u.obj.args;
        kids[nk++] = v->u.obj.state;
    }
    for (size_t i = 0; i < nk; i++)
        if (kids[i] && !check_tree(m, kids[i], depth + 1, heights)) return false;
    g_hash_table_insert(heights, v, GINT_TO_POINTER(1));
    return true;
}

bool sdt_pickle_load(const void *buf, size_t size, sdt_pv_arena *arena, const char *origin, sdt_pv **root,
                     size_t *consumed, sdt_error *error)
{
    vm m = {.buf = buf, .size = size, .arena = arena, .origin = origin, .error = error};
    *root = NULL;
    if (size > SDT_PICKLE_MAX_BYTES) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the pickle is %zu bytes, more than the %zu a weights file's index needs; this is "
                 "not a PyTorch weights file",
                 origin, size, SDT_PICKLE_MAX_BYTES);
        return false;
    }
    m.stack = g_ptr_array_new();
    m.marks = g_array_new(FALSE, FALSE, sizeof(size_t));
    m.memo = g_hash_table_new(g_direct_hash, g_direct_equal);
    m.storages = g_hash_table_new(g_str_hash, g_str_equal);
    bool stop = false, ok = true;
    while (ok && !stop) {
        if (m.pos >= m.size) {
            m.op_pos = m.pos;
            ok = failf(&m, "the pickle ends without its STOP opcode; " FIX_DAMAGED);
            break;
        }
        ok = step(&m, &stop);
    }
    if (ok && (m.stack->len != 1 || m.marks->len))
        ok = failf(&m, "the pickle stops with %u values and %u marks left instead of one result; " FIX_DAMAGED,
                   m.stack->len, m.marks->len);
    if (ok) {
        GHashTable *heights = g_hash_table_new(g_direct_hash, g_direct_equal);
        ok = check_tree(&m, g_ptr_array_index(m.stack, 0), 0, heights);
        g_hash_table_destroy(heights);
    }
    if (ok) {
        *root = g_ptr_array_index(m.stack, 0);
        if (consumed) *consumed = m.pos;
    }
    g_ptr_array_free(m.stack, TRUE);
    g_array_free(m.marks, TRUE);
    g_hash_table_destroy(m.memo);
    g_hash_table_destroy(m.storages);
    return ok;
}
