/* torch_save.c - see torch_save.h. */
#include "torch_save.h"

#include <glib.h>
#include <stdio.h>

#include "atomic_file.h"
#include "pickle_write.h"
#include "zip_write.h"

static bool add_record(sdt_zip_writer *z, const char *dir, const char *rel, const void *data, uint64_t size,
                       sdt_error *error)
{
    char *name = g_strconcat(dir, "/", rel, NULL);
    bool ok = sdt_zip_writer_add(z, name, data, size, error);
    g_free(name);
    return ok;
}

bool sdt_torch_save(const char *path, const sdt_pv *root, const char *archive_name, sdt_error *error)
{
    const char *dir = archive_name ? archive_name : "archive";
    GByteArray *pkl = g_byte_array_new();
    GPtrArray *storages = g_ptr_array_new();
    bool ok = sdt_pickle_write(root, pkl, storages, path, error);
    sdt_atomic_file af;
    if (ok) ok = sdt_atomic_begin(&af, path, error);
    if (ok) {
        sdt_zip_writer *z = sdt_zip_writer_new(af.fp, path);
        ok = add_record(z, dir, "data.pkl", pkl->data, pkl->len, error) &&
             add_record(z, dir, "byteorder", "little", 6, error);
        for (guint i = 0; ok && i < storages->len; i++) {
            const sdt_pv_storage *s = g_ptr_array_index(storages, i);
            char rel[32];
            snprintf(rel, sizeof rel, "data/%u", i);
            ok = add_record(z, dir, rel, s->data ? s->data : "", s->numel * sdt_st_dtype_size(s->dtype), error);
        }
        if (ok) ok = add_record(z, dir, "version", "3\n", 2, error);
        if (ok)
            ok = sdt_zip_writer_finish(z, error);
        else
            sdt_zip_writer_free(z);
        if (ok)
            ok = sdt_atomic_commit(&af, error);
        else
            sdt_atomic_abort(&af);
    }
    g_byte_array_free(pkl, TRUE);
    g_ptr_array_free(storages, TRUE);
    return ok;
}
