/* safetensors.c - validated mmap reader and atomic writer; see safetensors.h. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_read.h"
#include "atomic_file.h"
#include "c_json.h"

/* ---- dtypes --------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtype_table[SDT_ST_DTYPE_COUNT] = {
    [SDT_ST_BOOL] = {"BOOL", 1}, [SDT_ST_U8] = {"U8", 1},           [SDT_ST_I8] = {"I8", 1},
    [SDT_ST_I16] = {"I16", 2},   [SDT_ST_U16] = {"U16", 2},         [SDT_ST_F16] = {"F16", 2},
    [SDT_ST_BF16] = {"BF16", 2}, [SDT_ST_I32] = {"I32", 4},         [SDT_ST_U32] = {"U32", 4},
    [SDT_ST_F32] = {"F32", 4},   [SDT_ST_I64] = {"I64", 8},         [SDT_ST_U64] = {"U64", 8},
    [SDT_ST_F64] = {"F64", 8},   [SDT_ST_F8_E4M3] = {"F8_E4M3", 1}, [SDT_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *sdt_st_dtype_name(sdt_st_dtype dtype)
{
    return (unsigned)dtype < SDT_ST_DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

size_t sdt_st_dtype_size(sdt_st_dtype dtype)
{
    return (unsigned)dtype < SDT_ST_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

bool sdt_st_dtype_parse(const char *name, sdt_st_dtype *out)
{
    for (int i = 0; i < SDT_ST_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_table[i].name) == 0) {
            *out = (sdt_st_dtype)i;
            return true;
        }
    return false;
}

sdt_st_dtype sdt_st_dtype_of(sdt_dtype dtype)
{
    switch (dtype) {
        case SDT_F16:
            return SDT_ST_F16;
        case SDT_BF16:
            return SDT_ST_BF16;
        case SDT_I32:
            return SDT_ST_I32;
        case SDT_F32:
        default:
            return SDT_ST_F32;
    }
}

bool sdt_st_dtype_to_tensor(sdt_st_dtype dtype, sdt_dtype *out)
{
    switch (dtype) {
        case SDT_ST_F32:
            *out = SDT_F32;
            return true;
        case SDT_ST_F16:
            *out = SDT_F16;
            return true;
        case SDT_ST_BF16:
            *out = SDT_BF16;
            return true;
        case SDT_ST_I32:
            *out = SDT_I32;
            return true;
        default:
            return false;
    }
}

/* ---- the open file ---------------------------------------------------------- */

struct sdt_safetensors {
    char *path;
    void *map; /* the whole file when mapped (else NULL) */
    size_t map_size;
    void *aligned_copy; /* data section copy when the file's layout misaligns tensors */
    sdt_st_entry *entries;
    size_t n_entries;
    GHashTable *by_name; /* name -> index + 1 */
    char **meta_keys, **meta_values;
    size_t n_meta;
};

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        sdt_fail(error, SDT_ERR_BAD_FORMAT, __VA_ARGS__);                                                              \
        return false;                                                                                                  \
    } while (0)

static bool json_to_u64(const cJSON *v, uint64_t limit, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    /* Compare as double before converting: a huge value must not wrap. */
    if (!(d >= 0) || d != floor(d) || d > (double)limit || d > 9007199254740992.0) return false;
    *out = (uint64_t)d;
    return true;
}

static void shape_text(const sdt_st_entry *e, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < e->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)e->shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

/* Parses one tensor's description; data_size is the length of the data section. */
static bool parse_entry(const char *file, const cJSON *item, uint64_t data_size, sdt_st_entry *e, sdt_error *error)
{
    const char *key = item->string;
    const char *fix = "the file is damaged or was written by a broken tool; re-export or re-download it";
    if (!key[0]) FAIL("%s: a tensor has an empty name; %s", file, fix);
    if (!cJSON_IsObject(item))
        FAIL("%s: tensor '%s' is not a JSON object with dtype/shape/data_offsets; %s", file, key, fix);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt)) FAIL("%s: tensor '%s' has no \"dtype\" string; %s", file, key, fix);
    if (!sdt_st_dtype_parse(dt->valuestring, &e->dtype))
        FAIL(
            "%s: tensor '%s' has dtype \"%.32s\", which is not supported (supported: F32, F16, BF16, F8_E4M3, F8_E5M2, F64, I8, I16, I32, "
            "I64, U8, U16, U32, U64, BOOL); convert the checkpoint to F32, F16 or BF16",
            file, key, dt->valuestring);
    if (!cJSON_IsArray(shape)) FAIL("%s: tensor '%s' has no \"shape\" array; %s", file, key, fix);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > SDT_ST_MAX_DIMS)
        FAIL("%s: tensor '%s' has %d dimensions, more than the %d supported; %s", file, key, ndim, SDT_ST_MAX_DIMS,
             fix);
    e->ndim = ndim;
    uint64_t numel = 1;
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        uint64_t d;
        if (!json_to_u64(cJSON_GetArrayItem(shape, i), UINT64_MAX, &d))
            FAIL("%s: tensor '%s' has shape entry %d that is not a non-negative integer; %s", file, key, i, fix);
        e->shape[i] = (int64_t)d;
        overflow |= __builtin_mul_overflow(numel, d, &numel);
    }
    uint64_t want;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)sdt_st_dtype_size(e->dtype), &want);
    uint64_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_to_u64(cJSON_GetArrayItem(offs, 0), UINT64_MAX, &begin) ||
        !json_to_u64(cJSON_GetArrayItem(offs, 1), UINT64_MAX, &end))
        FAIL("%s: tensor '%s' needs \"data_offsets\": [begin, end] with two non-negative integers; %s", file, key, fix);
    if (begin > end)
        FAIL("%s: tensor '%s' has data_offsets [%llu, %llu] with begin after end; %s", file, key,
             (unsigned long long)begin, (unsigned long long)end, fix);
    if (end > data_size)
        FAIL("%s: tensor '%s' has data_offsets [%llu, %llu] but the data section holds only %llu bytes; the file is "
             "truncated or damaged; re-download or re-export it",
             file, key, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
    if (overflow || want != end - begin) {
        char s[160];
        shape_text(e, s, sizeof(s));
        if (overflow)
            FAIL("%s: tensor '%s' has shape %s of %s, larger than any file can hold; %s", file, key, s, dt->valuestring,
                 fix);
        FAIL("%s: tensor '%s' has shape %s of %s, which needs %llu bytes, but data_offsets span %llu bytes; %s", file,
             key, s, dt->valuestring, (unsigned long long)want, (unsigned long long)(end - begin), fix);
    }
    e->offset = begin;
    e->nbytes = end - begin;
    return true;
}

static bool parse_metadata(sdt_safetensors *st, const cJSON *meta, sdt_error *error)
{
    if (!cJSON_IsObject(meta))
        FAIL("%s: \"__metadata__\" is not a JSON object of strings; re-save the file with string metadata", st->path);
    size_t n = (size_t)cJSON_GetArraySize(meta);
    st->meta_keys = g_new0(char *, n + 1);
    st->meta_values = g_new0(char *, n + 1);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, meta)
    {
        if (!cJSON_IsString(kv))
            FAIL("%s: metadata key '%s' holds a non-string value; safetensors metadata must map strings to strings "
                 "(store numbers as text)",
                 st->path, kv->string);
        st->meta_keys[st->n_meta] = g_strdup(kv->string);
        st->meta_values[st->n_meta] = g_strdup(kv->valuestring);
        st->n_meta++;
    }
    return true;
}

static int compare_by_offset(const void *a, const void *b)
{
    const sdt_st_entry *x = *(const sdt_st_entry *const *)a, *y = *(const sdt_st_entry *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static bool check_no_overlap(const sdt_safetensors *st, sdt_error *error)
{
    if (st->n_entries < 2) return true;
    const sdt_st_entry **order = g_new(const sdt_st_entry *, st->n_entries);
    for (size_t i = 0; i < st->n_entries; i++) order[i] = &st->entries[i];
    qsort(order, st->n_entries, sizeof(*order), compare_by_offset);
    const sdt_st_entry *prev = NULL;
    bool ok = true;
    for (size_t i = 0; i < st->n_entries && ok; i++) {
        const sdt_st_entry *e = order[i];
        if (e->nbytes == 0) continue; /* empty tensors occupy no bytes */
        if (prev && e->offset < prev->offset + prev->nbytes) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: tensors '%s' and '%s' overlap in the data section (bytes %llu.. and %llu..%llu); the file is "
                     "damaged or was written by a broken tool; re-export it",
                     st->path, e->name, prev->name, (unsigned long long)e->offset, (unsigned long long)prev->offset,
                     (unsigned long long)(prev->offset + prev->nbytes));
            ok = false;
        }
        prev = e;
    }
    g_free(order);
    return ok;
}

/* Points entries at their data. When the file's layout leaves any tensor off its
 * element alignment, reads go through an aligned copy (unaligned loads are UB). */
static bool place_data(sdt_safetensors *st, const uint8_t *data, uint64_t data_size, sdt_error *error)
{
    bool aligned = true;
    for (size_t i = 0; i < st->n_entries; i++)
        if (((uintptr_t)(data + st->entries[i].offset)) % sdt_st_dtype_size(st->entries[i].dtype)) aligned = false;
    if (!aligned && data_size > 0) {
        if (posix_memalign(&st->aligned_copy, 64, (size_t)data_size) != 0)
            return sdt_fail(
                error, SDT_ERR_OUT_OF_MEMORY,
                "%s: out of memory copying %llu bytes of misaligned tensor data; free memory or re-save the file with "
                "an aligned writer",
                st->path, (unsigned long long)data_size);
        memcpy(st->aligned_copy, data, (size_t)data_size);
        data = st->aligned_copy;
    }
    for (size_t i = 0; i < st->n_entries; i++) st->entries[i].data = data + st->entries[i].offset;
    return true;
}

static bool header_tail_is_blank(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') return false;
    return true;
}

static bool parse_file(sdt_safetensors *st, const uint8_t *buf, size_t size, sdt_error *error)
{
    const char *file = st->path;
    if (size < 8)
        FAIL("%s: the file is %zu bytes, too short for a safetensors header (8-byte length + JSON); it is truncated or "
             "not a safetensors file",
             file, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > SDT_ST_MAX_HEADER)
        FAIL("%s: the header length field says %llu bytes, more than the %llu allowed; the file is damaged or not a "
             "safetensors file",
             file, (unsigned long long)hlen, (unsigned long long)SDT_ST_MAX_HEADER);
    if (hlen > size - 8)
        FAIL("%s: the header claims %llu bytes but the file holds only %zu after the length field; the file is "
             "truncated (re-download or re-export it)",
             file, (unsigned long long)hlen, size - 8);
    const char *json = (const char *)buf + 8;
    if (hlen < 2 || json[0] != '{')
        FAIL("%s: the header is not a JSON object (it must start with '{'); this is not a safetensors file", file);
    const char *parse_end = NULL;
    cJSON *root = sdt_json_parse_prefix(json, (size_t)hlen, &parse_end);
    if (!root || !cJSON_IsObject(root) || !parse_end || !header_tail_is_blank(parse_end, json + hlen)) {
        size_t at =
            parse_end ? (size_t)(parse_end - json) : (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - json : 0);
        cJSON_Delete(root);
        FAIL("%s: the header is not valid JSON (error near byte %zu of %llu); the file is damaged or not a safetensors "
             "file",
             file, at > hlen ? (size_t)hlen : at, (unsigned long long)hlen);
    }
    uint64_t data_size = size - 8 - hlen;
    size_t n = (size_t)cJSON_GetArraySize(root);
    st->entries = g_new0(sdt_st_entry, n ? n : 1);
    st->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    bool ok = true;
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        if (!ok) break;
        if (strcmp(item->string, "__metadata__") == 0) {
            if (st->meta_keys)
                ok = false, sdt_fail(error, SDT_ERR_BAD_FORMAT,
                                     "%s: \"__metadata__\" appears twice in the header; re-export the file", file);
            else
                ok = parse_metadata(st, item, error);
            continue;
        }
        sdt_st_entry *e = &st->entries[st->n_entries];
        if (!parse_entry(file, item, data_size, e, error)) {
            ok = false;
            break;
        }
        e->name = g_strdup(item->string);
        st->n_entries++;
        if (g_hash_table_contains(st->by_name, e->name)) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: tensor '%s' appears twice in the header; the file is damaged; re-export it", file, e->name);
            ok = false;
        } else {
            g_hash_table_insert(st->by_name, (gpointer)e->name, GSIZE_TO_POINTER(st->n_entries));
        }
    }
    cJSON_Delete(root);
    return ok && check_no_overlap(st, error) && place_data(st, buf + 8 + hlen, data_size, error);
}

static sdt_safetensors *open_buffer(sdt_safetensors *st, const void *buf, size_t size, sdt_error *error)
{
    if (!parse_file(st, buf, size, error)) {
        sdt_st_close(st);
        return NULL;
    }
    return st;
}

sdt_safetensors *sdt_st_open_memory(const void *buf, size_t size, const char *name, sdt_error *error)
{
    sdt_safetensors *st = g_new0(sdt_safetensors, 1);
    st->path = g_strdup(name ? name : "(memory)");
    return open_buffer(st, buf, size, error);
}

sdt_safetensors *sdt_st_open(const char *path, sdt_error *error)
{
    uint64_t file_size = 0;
    int fd = sdt_file_open_regular(path, "safetensors file", &file_size, error);
    if (fd < 0) {
        sdt_error_append(error, "; check the path and permissions");
        return NULL;
    }
    sdt_safetensors *st = g_new0(sdt_safetensors, 1);
    st->path = g_strdup(path);
    size_t size = (size_t)file_size;
    if (size > 0) {
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: cannot map the file into memory (%s); check free address space and the file", path,
                     strerror(errno));
            close(fd);
            sdt_st_close(st);
            return NULL;
        }
        st->map = map;
        st->map_size = size;
    }
    close(fd); /* the mapping keeps the file's pages */
    return open_buffer(st, st->map, size, error);
}

void sdt_st_close(sdt_safetensors *st)
{
    if (!st) return;
    if (st->map) munmap(st->map, st->map_size);
    free(st->aligned_copy);
    for (size_t i = 0; i < st->n_entries; i++) g_free((char *)st->entries[i].name);
    g_free(st->entries);
    if (st->by_name) g_hash_table_destroy(st->by_name);
    for (size_t i = 0; i < st->n_meta; i++) {
        g_free(st->meta_keys[i]);
        g_free(st->meta_values[i]);
    }
    g_free(st->meta_keys);
    g_free(st->meta_values);
    g_free(st->path);
    g_free(st);
}

const char *sdt_st_path(const sdt_safetensors *st)
{
    return st->path;
}
size_t sdt_st_count(const sdt_safetensors *st)
{
    return st->n_entries;
}
const sdt_st_entry *sdt_st_at(const sdt_safetensors *st, size_t i)
{
    return i < st->n_entries ? &st->entries[i] : NULL;
}

const sdt_st_entry *sdt_st_find(const sdt_safetensors *st, const char *name)
{
    size_t idx = GPOINTER_TO_SIZE(g_hash_table_lookup(st->by_name, name));
    return idx ? &st->entries[idx - 1] : NULL;
}

size_t sdt_st_metadata_count(const sdt_safetensors *st)
{
    return st->n_meta;
}
const char *sdt_st_metadata_key(const sdt_safetensors *st, size_t i)
{
    return i < st->n_meta ? st->meta_keys[i] : NULL;
}

const char *sdt_st_metadata_get(const sdt_safetensors *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

bool sdt_st_entry_tensor(const sdt_safetensors *st, const sdt_st_entry *e, sdt_tensor *out, sdt_error *error)
{
    sdt_dtype dt;
    if (!sdt_st_dtype_to_tensor(e->dtype, &dt))
        FAIL("%s: tensor '%s' is stored as %s, which the models cannot use; convert the checkpoint to F32, F16 or BF16",
             st->path, e->name, sdt_st_dtype_name(e->dtype));
    if (e->ndim > SDT_MAX_DIMS)
        FAIL("%s: tensor '%s' has %d dimensions, more than the %d a model tensor holds; this is not a Stable Diffusion "
             "weight",
             st->path, e->name, e->ndim, SDT_MAX_DIMS);
    memset(out, 0, sizeof(*out));
    out->data = (void *)e->data; /* read-only mapping: models treat weights as const */
    out->dtype = dt;
    out->device = SDT_DEVICE_CPU;
    out->ndim = e->ndim;
    for (int i = 0; i < e->ndim; i++) out->shape[i] = e->shape[i];
    return true;
}

/* ---- writer ------------------------------------------------------------------ */

sdt_st_write_item sdt_st_item_from_tensor(const char *name, const sdt_tensor *t)
{
    sdt_st_write_item it = {name, sdt_st_dtype_of(t->dtype), t->ndim, t->shape, t->data};
    return it;
}

static bool item_nbytes(const sdt_st_write_item *it, uint64_t *out)
{
    uint64_t n = sdt_st_dtype_size(it->dtype);
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] < 0 || __builtin_mul_overflow(n, (uint64_t)it->shape[d], &n)) return false;
    }
    *out = n;
    return true;
}

typedef struct write_slot {
    const sdt_st_write_item *item;
    uint64_t nbytes;
} write_slot;

/* Larger elements first keeps every tensor aligned to its element size in a
 * contiguous layout; names break ties so output is deterministic. */
static int compare_for_layout(const void *a, const void *b)
{
    const write_slot *x = a, *y = b;
    size_t sx = sdt_st_dtype_size(x->item->dtype), sy = sdt_st_dtype_size(y->item->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->item->name, y->item->name);
}

static bool validate_items(const char *path, const sdt_st_write_item *items, size_t n, sdt_error *error)
{
    GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const sdt_st_write_item *it = &items[i];
        uint64_t nb = 0;
        if (!it->name || !it->name[0] || strcmp(it->name, "__metadata__") == 0) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: tensor %zu has an empty or reserved name; give every tensor a unique name", path, i);
            ok = false;
        } else if (g_hash_table_contains(seen, it->name)) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' is listed twice; give every tensor a unique name",
                     path, it->name);
            ok = false;
        } else if ((unsigned)it->dtype >= SDT_ST_DTYPE_COUNT || it->ndim < 0 || it->ndim > SDT_ST_MAX_DIMS ||
                   !item_nbytes(it, &nb)) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' has an invalid dtype or shape; fix the caller", path,
                     it->name);
            ok = false;
        } else if (nb > 0 && !it->data) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' has no data pointer; fix the caller", path, it->name);
            ok = false;
        } else {
            g_hash_table_add(seen, (gpointer)it->name);
        }
    }
    g_hash_table_destroy(seen);
    return ok;
}

static char *build_header(const write_slot *slots, size_t n, const sdt_st_kv *meta, size_t n_meta)
{
    cJSON *root = cJSON_CreateObject();
    if (n_meta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (size_t i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[i].key, meta[i].value ? meta[i].value : "");
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        const sdt_st_write_item *it = slots[i].item;
        cJSON *t = cJSON_AddObjectToObject(root, it->name);
        cJSON_AddStringToObject(t, "dtype", sdt_st_dtype_name(it->dtype));
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < it->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)it->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + slots[i].nbytes)));
        offset += slots[i].nbytes;
    }
    char *text = sdt_json_print_compact(root);
    cJSON_Delete(root);
    return text;
}

bool sdt_st_write(const char *path, const sdt_st_write_item *items, size_t n, const sdt_st_kv *meta, size_t n_meta,
                  sdt_error *error)
{
    for (size_t i = 0; i < n_meta; i++) {
        if (!meta[i].key)
            return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: metadata entry %zu has no key; fix the caller", path,
                            i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                                "%s: metadata key '%s' is given twice; give each key once", path, meta[i].key);
    }
    if (!validate_items(path, items, n, error)) return false;
    write_slot *slots = g_new0(write_slot, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        slots[i].item = &items[i];
        item_nbytes(&items[i], &slots[i].nbytes);
    }
    qsort(slots, n, sizeof(*slots), compare_for_layout);
    char *header = build_header(slots, n, meta, n_meta);
    if (!header) {
        g_free(slots);
        return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory building the header; free memory and retry",
                        path);
    }
    size_t hlen = strlen(header);
    size_t padded = (hlen + 7) & ~(size_t)7; /* 8 + padded is a multiple of 8 */
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)padded >> (8 * i));

    sdt_atomic_file f;
    bool ok = sdt_atomic_begin(&f, path, error);
    if (ok) {
        ok = fwrite(lenbuf, 1, 8, f.fp) == 8 && fwrite(header, 1, hlen, f.fp) == hlen;
        for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f.fp) != EOF;
        for (size_t i = 0; ok && i < n; i++)
            if (slots[i].nbytes) ok = fwrite(slots[i].item->data, 1, (size_t)slots[i].nbytes, f.fp) == slots[i].nbytes;
        if (!ok) {
            sdt_fail(error, SDT_ERR_IO,
                     "%s: writing failed (%s); check free disk space; the previous file is untouched", path,
                     strerror(errno));
            sdt_atomic_abort(&f);
        } else {
            ok = sdt_atomic_commit(&f, error);
        }
    }
    cJSON_free(header);
    g_free(slots);
    return ok;
}
