/* torch_file.c - see torch_file.h. Layouts as torch/serialization.py writes them. */
#include "torch_file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_read.h"
#include "pickle_read.h"
#include "zip_read.h"

/* pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2): the legacy format's first pickle. */
static const uint8_t legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                       0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

#define FIX_DAMAGED "the file is truncated or damaged: copy or download it again"

struct sdt_torch_file {
    char *path;
    void *map;
    size_t map_size;
    const uint8_t *buf;
    size_t size;
    sdt_torch_layout layout;
    sdt_zip *zip;
    sdt_pv_arena *arena;
    sdt_pv *root;
    GPtrArray *owned; /* inflated entries and tensor copies */
};

sdt_torch_layout sdt_torch_sniff(const void *buf, size_t size)
{
    if (sdt_zip_sniff(buf, size)) return SDT_TORCH_ZIP;
    if (size >= sizeof legacy_magic && memcmp(buf, legacy_magic, sizeof legacy_magic) == 0) return SDT_TORCH_LEGACY;
    return SDT_TORCH_NOT_TORCH;
}

sdt_torch_layout sdt_torch_sniff_file(const char *path)
{
    uint8_t head[sizeof legacy_magic];
    int fd = sdt_file_open_regular(path, "file", NULL, NULL);
    if (fd < 0) return SDT_TORCH_NOT_TORCH; /* the reader that opens it next says why */
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return sdt_torch_sniff(head, n > 0 ? (size_t)n : 0);
}

void sdt_torch_close(sdt_torch_file *f)
{
    if (!f) return;
    sdt_zip_close(f->zip);
    sdt_pv_arena_free(f->arena);
    if (f->owned) g_ptr_array_free(f->owned, TRUE);
    if (f->map) munmap(f->map, f->map_size);
    g_free(f->path);
    g_free(f);
}

sdt_torch_layout sdt_torch_layout_of(const sdt_torch_file *f)
{
    return f->layout;
}
const sdt_pv *sdt_torch_root(const sdt_torch_file *f)
{
    return f->root;
}

static bool storage_bytes(const sdt_torch_file *f, const sdt_pv_storage *s, uint64_t *bytes, sdt_error *error)
{
    size_t el = sdt_st_dtype_size(s->dtype);
    if (s->numel > UINT64_MAX / el) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: storage '%s' declares %llu elements, too many to exist; " FIX_DAMAGED,
                 f->path, s->key, (unsigned long long)s->numel);
        return false;
    }
    *bytes = s->numel * el;
    return true;
}

/* ---- zip layout ----------------------------------------------------------------------- */

/* The folder holding data.pkl ("archive/" or "<stem>/"), with its trailing slash. */
static bool zip_prefix(sdt_torch_file *f, char **prefix, sdt_error *error)
{
    *prefix = NULL;
    for (size_t i = 0; i < sdt_zip_count(f->zip); i++) {
        const char *name = sdt_zip_at(f->zip, i)->name, *slash = strchr(name, '/');
        if (!slash || strcmp(slash, "/data.pkl") != 0) continue;
        if (*prefix) {
            g_free(*prefix);
            *prefix = NULL;
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: the zip archive holds several data.pkl records; it is not one torch.save file", f->path);
            return false;
        }
        *prefix = g_strndup(name, (size_t)(slash - name) + 1);
    }
    if (!*prefix) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the zip archive has no <folder>/data.pkl record, so it is not a PyTorch file; give "
                 "a file written by torch.save, or a .safetensors file",
                 f->path);
        return false;
    }
    return true;
}

static bool read_record(sdt_torch_file *f, const char *prefix, const char *rel, const void **data, uint64_t *size,
                        bool required, sdt_error *error)
{
    char *name = g_strconcat(prefix, rel, NULL);
    const sdt_zip_entry *e = sdt_zip_find(f->zip, name);
    *data = NULL;
    *size = 0;
    bool ok = true;
    if (!e) {
        if (required) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: record '%s' is missing from the archive; " FIX_DAMAGED, f->path,
                     name);
            ok = false;
        }
    } else {
        void *owned = NULL;
        ok = sdt_zip_read(f->zip, e, data, &owned, error);
        if (owned) g_ptr_array_add(f->owned, owned);
        *size = e->size;
    }
    g_free(name);
    return ok;
}

static bool open_zip(sdt_torch_file *f, sdt_error *error)
{
    f->zip = sdt_zip_open_memory(f->buf, f->size, f->path, error);
    char *prefix = NULL;
    if (!f->zip || !zip_prefix(f, &prefix, error)) return false;
    const void *data;
    uint64_t size;
    bool ok = read_record(f, prefix, "byteorder", &data, &size, false, error);
    if (ok && data && !(size == 6 && memcmp(data, "little", 6) == 0)) {
        sdt_fail(error, SDT_ERR_UNSUPPORTED,
                 "%s: the archive's byteorder record is not 'little'; big-endian files are not "
                 "supported: re-save the file on a little-endian machine",
                 f->path);
        ok = false;
    }
    if (ok) ok = read_record(f, prefix, "data.pkl", &data, &size, true, error);
    if (ok) {
        char *origin = g_strdup_printf("%s (%sdata.pkl)", f->path, prefix);
        ok = sdt_pickle_load(data, (size_t)size, f->arena, origin, &f->root, NULL, error);
        g_free(origin);
    }
    for (size_t i = 0; ok && i < sdt_pv_arena_storage_count(f->arena); i++) {
        sdt_pv_storage *s = sdt_pv_arena_storage(f->arena, i);
        char *rel = g_strconcat("data/", s->key, NULL);
        uint64_t need = 0;
        ok = storage_bytes(f, s, &need, error) && read_record(f, prefix, rel, &data, &size, true, error);
        if (ok && size < need) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: storage '%s%s' holds %llu bytes but its tensors need %llu (%llu %s elements); " FIX_DAMAGED,
                     f->path, prefix, rel, (unsigned long long)size, (unsigned long long)need,
                     (unsigned long long)s->numel, sdt_st_dtype_name(s->dtype));
            ok = false;
        }
        s->data = data;
        g_free(rel);
    }
    g_free(prefix);
    return ok;
}

/* ---- legacy layout -------------------------------------------------------------------- */

static bool legacy_pickle(sdt_torch_file *f, size_t *pos, const char *what, sdt_pv **out, sdt_error *error)
{
    char *origin = g_strdup_printf("%s (%s)", f->path, what);
    size_t used = 0;
    bool ok = sdt_pickle_load(f->buf + *pos, f->size - *pos, f->arena, origin, out, &used, error);
    g_free(origin);
    *pos += used;
    return ok;
}

static bool open_legacy(sdt_torch_file *f, sdt_error *error)
{
    size_t pos = sizeof legacy_magic;
    sdt_pv *proto = NULL, *sys_info = NULL, *keys = NULL;
    int64_t version = 0;
    if (!legacy_pickle(f, &pos, "protocol version", &proto, error)) return false;
    if (!sdt_pv_as_int(proto, &version) || version != 1001) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the legacy torch file has protocol version %lld, not 1001; re-save it with a "
                 "current torch",
                 f->path, (long long)version);
        return false;
    }
    if (!legacy_pickle(f, &pos, "sys_info", &sys_info, error)) return false;
    sdt_pv *little = sdt_pv_dict_get(sys_info, "little_endian");
    if (little && !(sdt_pv_is(little, SDT_PV_BOOL) && little->u.b)) {
        sdt_fail(error, SDT_ERR_UNSUPPORTED,
                 "%s: the file was saved on a big-endian machine, which is not supported; re-save it on "
                 "a little-endian one",
                 f->path);
        return false;
    }
    if (!legacy_pickle(f, &pos, "data pickle", &f->root, error)) return false;
    if (!legacy_pickle(f, &pos, "storage keys", &keys, error)) return false;
    if (!sdt_pv_is(keys, SDT_PV_LIST)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the legacy torch file's storage key list is a %s, not a list; " FIX_DAMAGED, f->path,
                 keys ? sdt_pv_kind_name(keys->kind) : "nothing");
        return false;
    }
    GHashTable *by_key = g_hash_table_new(g_str_hash, g_str_equal);
    for (size_t i = 0; i < sdt_pv_arena_storage_count(f->arena); i++) {
        sdt_pv_storage *s = sdt_pv_arena_storage(f->arena, i);
        g_hash_table_insert(by_key, s->key, s);
    }
    bool ok = true;
    for (size_t i = 0; ok && i < sdt_pv_len(keys); i++) {
        const char *key = sdt_pv_as_str(sdt_pv_item(keys, i));
        sdt_pv_storage *s = key ? g_hash_table_lookup(by_key, key) : NULL;
        uint64_t need = 0, count = 0;
        if (!s || s->data) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: the legacy torch file lists storage %zu under an unknown or repeated key; " FIX_DAMAGED,
                     f->path, i);
            ok = false;
        } else if (!storage_bytes(f, s, &need, error)) {
            ok = false;
        } else if (f->size - pos < 8 || (memcpy(&count, f->buf + pos, 8), count != s->numel) ||
                   need > f->size - pos - 8) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: storage '%s' should hold %llu %s elements but the file ends or disagrees "
                     "(byte %zu); " FIX_DAMAGED,
                     f->path, key, (unsigned long long)s->numel, sdt_st_dtype_name(s->dtype), pos);
            ok = false;
        } else {
            s->data = f->buf + pos + 8;
            pos += 8 + need;
        }
    }
    for (size_t i = 0; ok && i < sdt_pv_arena_storage_count(f->arena); i++) {
        const sdt_pv_storage *s = sdt_pv_arena_storage(f->arena, i);
        if (!s->data) {
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: storage '%s' is used by a tensor but missing from the file; " FIX_DAMAGED, f->path, s->key);
            ok = false;
        }
    }
    g_hash_table_destroy(by_key);
    return ok;
}

/* ---- opening ------------------------------------------------------------------------ */

static sdt_torch_file *open_buffer(sdt_torch_file *f, sdt_error *error)
{
    f->arena = sdt_pv_arena_new();
    f->owned = g_ptr_array_new_with_free_func(g_free);
    f->layout = sdt_torch_sniff(f->buf, f->size);
    bool ok = false;
    if (f->layout == SDT_TORCH_ZIP)
        ok = open_zip(f, error);
    else if (f->layout == SDT_TORCH_LEGACY)
        ok = open_legacy(f, error);
    else
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: this is neither a PyTorch zip archive nor a legacy torch.save file (first bytes "
                 "do not match); give a .ckpt/.pt/.bin written by torch.save, or a .safetensors file",
                 f->path);
    if (!ok) {
        sdt_torch_close(f);
        return NULL;
    }
    return f;
}

sdt_torch_file *sdt_torch_open_memory(const void *buf, size_t size, const char *origin, sdt_error *error)
{
    sdt_torch_file *f = g_new0(sdt_torch_file, 1);
    f->path = g_strdup(origin);
    f->buf = buf;
    f->size = size;
    return open_buffer(f, error);
}

sdt_torch_file *sdt_torch_open(const char *path, sdt_error *error)
{
    uint64_t file_size = 0;
    int fd = sdt_file_open_regular(path, "PyTorch file", &file_size, error);
    if (fd < 0) {
        sdt_error_append(error, "; check the path and permissions");
        return NULL;
    }
    struct stat sb = {.st_size = (off_t)file_size};
    sdt_torch_file *f = g_new0(sdt_torch_file, 1);
    f->path = g_strdup(path);
    if (sb.st_size > 0) {
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            sdt_fail(error, SDT_ERR_IO,
                     "%s: cannot map the file into memory (%s); check free address space and the file", path,
                     strerror(errno));
            close(fd);
            g_free(f->path);
            g_free(f);
            return NULL;
        }
        f->map = map;
        f->map_size = (size_t)sb.st_size;
    }
    close(fd); /* the mapping keeps the file's pages */
    f->buf = f->map;
    f->size = f->map_size;
    return open_buffer(f, error);
}

/* ---- tensors -------------------------------------------------------------------------- */

bool sdt_torch_tensor_bytes(sdt_torch_file *f, const sdt_pv *v, const char *what, const void **data, sdt_error *error)
{
    *data = NULL;
    if (!sdt_pv_is(v, SDT_PV_TENSOR)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: '%s' is a %s, not a tensor; the file does not hold what its kind needs", f->path, what,
                 v ? sdt_pv_kind_name(v->kind) : "missing value");
        return false;
    }
    const sdt_pv_tensor *t = &v->u.t;
    size_t el = sdt_st_dtype_size(t->storage->dtype);
    const uint8_t *base = sdt_pv_tensor_data(v);
    int64_t numel = sdt_pv_tensor_numel(v);
    if (sdt_pv_tensor_contiguous(v) && ((uintptr_t)base % el) == 0) {
        *data = base;
        return true;
    }
    /* A strided or misaligned view: gather its elements in row-major order. Views that repeat elements
     * (stride 0, overlaps) could ask for far more memory than the file holds: torch.save never writes them
     * for weights, so they are refused. */
    if ((uint64_t)numel > t->storage->numel) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: tensor '%s' views %lld elements of a storage holding %llu (an expanded or "
                 "overlapping view); save it with .contiguous() or .clone() first",
                 f->path, what, (long long)numel, (unsigned long long)t->storage->numel);
        return false;
    }
    uint8_t *copy = g_try_malloc((size_t)numel * el + 1);
    if (!copy) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory copying tensor '%s' (%lld elements)", f->path, what,
                 (long long)numel);
        return false;
    }
    int64_t idx[SDT_PV_MAX_DIMS] = {0};
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        memcpy(copy + (size_t)i * el, base + (size_t)off * el, el);
        for (int d = t->ndim; d-- > 0;) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    g_ptr_array_add(f->owned, copy);
    *data = copy;
    return true;
}

bool sdt_torch_tensor(sdt_torch_file *f, const sdt_pv *v, const char *what, sdt_tensor *out, sdt_error *error)
{
    memset(out, 0, sizeof *out);
    const void *data;
    if (!sdt_torch_tensor_bytes(f, v, what, &data, error)) return false;
    sdt_dtype dt;
    if (!sdt_st_dtype_to_tensor(v->u.t.storage->dtype, &dt)) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: tensor '%s' is stored as %s, which the models cannot use; convert it to F32, F16 "
                 "or BF16",
                 f->path, what, sdt_st_dtype_name(v->u.t.storage->dtype));
        return false;
    }
    if (v->u.t.ndim > SDT_MAX_DIMS) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: tensor '%s' has %d dimensions, more than the %d a model tensor holds",
                 f->path, what, v->u.t.ndim, SDT_MAX_DIMS);
        return false;
    }
    out->data = (void *)data;
    out->dtype = dt;
    out->device = SDT_DEVICE_CPU;
    out->ndim = v->u.t.ndim;
    for (int d = 0; d < out->ndim; d++) out->shape[d] = v->u.t.shape[d];
    return true;
}
