/* pickle_write.c - see pickle_write.h. */
#include "pickle_write.h"

#include <stdio.h>
#include <string.h>

typedef struct writer {
    GByteArray *out;
    GPtrArray *storages;
    const char *what;
    sdt_error *error;
} writer;

static void put_byte(writer *w, uint8_t b)
{
    g_byte_array_append(w->out, &b, 1);
}
static void put(writer *w, const void *p, size_t n)
{
    g_byte_array_append(w->out, p, (guint)n);
}

static void put_le(writer *w, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) put_byte(w, (uint8_t)(v >> (8 * i)));
}

static void put_int(writer *w, int64_t v)
{
    if (v >= 0 && v < 256) {
        put_byte(w, 'K');
        put_byte(w, (uint8_t)v);
    } else if (v >= 0 && v < 65536) {
        put_byte(w, 'M');
        put_le(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        put_byte(w, 'J');
        put_le(w, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else { /* LONG1: the shortest little-endian two's complement, as CPython's encode_long */
        int n = 8;
        while (n > 1) {
            int64_t shifted = v >> (8 * (n - 1) - 1);
            if (shifted != 0 && shifted != -1) break;
            n--;
        }
        put_byte(w, 0x8a);
        put_byte(w, (uint8_t)n);
        put_le(w, (uint64_t)v, n);
    }
}

static void put_str(writer *w, const char *s, size_t len)
{
    put_byte(w, 'X');
    put_le(w, len, 4);
    put(w, s, len);
}

static void put_global(writer *w, const char *module, const char *name)
{
    put_byte(w, 'c');
    put(w, module, strlen(module));
    put_byte(w, '\n');
    put(w, name, strlen(name));
    put_byte(w, '\n');
}

static void put_empty_ordered_dict(writer *w)
{
    put_global(w, "collections", "OrderedDict");
    put_byte(w, ')');
    put_byte(w, 'R');
}

static const char *storage_type(sdt_st_dtype dtype)
{
    switch (dtype) {
        case SDT_ST_F32:
            return "FloatStorage";
        case SDT_ST_F16:
            return "HalfStorage";
        case SDT_ST_BF16:
            return "BFloat16Storage";
        case SDT_ST_F64:
            return "DoubleStorage";
        case SDT_ST_I64:
            return "LongStorage";
        case SDT_ST_I32:
            return "IntStorage";
        case SDT_ST_I16:
            return "ShortStorage";
        case SDT_ST_I8:
            return "CharStorage";
        case SDT_ST_U8:
            return "ByteStorage";
        case SDT_ST_BOOL:
            return "BoolStorage";
        default:
            return NULL; /* U16, U32, U64: no typed storage in torch */
    }
}

static bool fail(writer *w, const char *why)
{
    return sdt_fail(w->error, SDT_ERR_INVALID_ARGUMENT, "%s: %s", w->what, why);
}

static bool put_tensor(writer *w, const sdt_pv_tensor *t)
{
    const char *type = storage_type(t->storage->dtype);
    if (!type) return fail(w, "a tensor's dtype has no torch storage type (unsigned 16-64 bit); convert it first");
    if (!t->storage->data && t->storage->numel) return fail(w, "a tensor has no data to write");
    guint index = 0;
    while (index < w->storages->len && g_ptr_array_index(w->storages, index) != t->storage) index++;
    if (index == w->storages->len) g_ptr_array_add(w->storages, t->storage);
    if (t->parameter) put_global(w, "torch._utils", "_rebuild_parameter");
    put_global(w, "torch._utils", "_rebuild_tensor_v2");
    put_byte(w, '(');
    put_byte(w, '(');
    put_str(w, "storage", 7);
    put_global(w, "torch", type);
    char key[24];
    snprintf(key, sizeof key, "%u", index);
    put_str(w, key, strlen(key));
    put_str(w, "cpu", 3);
    put_int(w, (int64_t)t->storage->numel);
    put_byte(w, 't');
    put_byte(w, 'Q'); /* BINPERSID */
    put_int(w, t->offset);
    for (int pass = 0; pass < 2; pass++) {
        const int64_t *dims = pass ? t->stride : t->shape;
        put_byte(w, '(');
        for (int d = 0; d < t->ndim; d++) put_int(w, dims[d]);
        put_byte(w, 't');
    }
    put_byte(w, t->requires_grad && !t->parameter ? 0x88 : 0x89);
    put_empty_ordered_dict(w);
    put_byte(w, 't');
    put_byte(w, 'R');
    if (t->parameter) {
        put_byte(w, t->requires_grad ? 0x88 : 0x89);
        put_empty_ordered_dict(w);
        put_byte(w, 0x87); /* TUPLE3: (tensor, requires_grad, hooks) */
        put_byte(w, 'R');
    }
    return true;
}

static bool put_value(writer *w, const sdt_pv *v, int depth)
{
    if (!v) return fail(w, "a value is missing (NULL) in the data to write");
    if (depth > SDT_PV_MAX_DEPTH) return fail(w, "the data nests too deep (or contains itself) to be written");
    switch (v->kind) {
        case SDT_PV_NONE:
            put_byte(w, 'N');
            return true;
        case SDT_PV_BOOL:
            put_byte(w, v->u.b ? 0x88 : 0x89);
            return true;
        case SDT_PV_INT:
            put_int(w, v->u.i);
            return true;
        case SDT_PV_FLOAT: {
            uint64_t bits;
            memcpy(&bits, &v->u.f, sizeof bits);
            put_byte(w, 'G');
            for (int i = 7; i >= 0; i--) put_byte(w, (uint8_t)(bits >> (8 * i)));
            return true;
        }
        case SDT_PV_STR:
            put_str(w, v->u.s.data, v->u.s.len);
            return true;
        case SDT_PV_LIST:
            put_byte(w, ']');
            if (v->u.seq.n) {
                put_byte(w, '(');
                for (size_t i = 0; i < v->u.seq.n; i++)
                    if (!put_value(w, v->u.seq.items[i], depth + 1)) return false;
                put_byte(w, 'e');
            }
            return true;
        case SDT_PV_TUPLE:
            if (v->u.seq.n == 0) {
                put_byte(w, ')');
                return true;
            }
            if (v->u.seq.n > 3) put_byte(w, '(');
            for (size_t i = 0; i < v->u.seq.n; i++)
                if (!put_value(w, v->u.seq.items[i], depth + 1)) return false;
            put_byte(w, v->u.seq.n > 3 ? 't' : (uint8_t)(0x84 + v->u.seq.n));
            return true;
        case SDT_PV_DICT:
            if (v->u.seq.ordered)
                put_empty_ordered_dict(w);
            else
                put_byte(w, '}');
            if (v->u.seq.n) {
                put_byte(w, '(');
                for (size_t i = 0; i < v->u.seq.n; i++)
                    if (!put_value(w, v->u.seq.items[i], depth + 1)) return false;
                put_byte(w, 'u');
            }
            return true;
        case SDT_PV_TENSOR:
            return put_tensor(w, &v->u.t);
        case SDT_PV_BYTES:
            return fail(w, "bytes values cannot be written (torch's weights_only loader refuses them); store a string");
        default:
            break;
    }
    return fail(w, "an object record cannot be written (torch's weights_only loader refuses objects); store plain "
                   "containers");
}

bool sdt_pickle_write(const sdt_pv *root, GByteArray *out, GPtrArray *storages, const char *what, sdt_error *error)
{
    writer w = {out, storages, what, error};
    put_byte(&w, 0x80);
    put_byte(&w, 2);
    if (!put_value(&w, root, 0)) return false;
    put_byte(&w, '.');
    return true;
}
