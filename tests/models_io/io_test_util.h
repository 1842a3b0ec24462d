/* io_test_util.h - temp folders and raw file writing for the models_io tests. */
#ifndef SDT_IO_TEST_UTIL_H
#define SDT_IO_TEST_UTIL_H

#include <glib.h>
#include <glib/gstdio.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A fresh temp folder; removed (with its files, one level of subfolders) by io_rm_tree. */
static inline char *io_make_tmpdir(void)
{
    GError *e = NULL;
    char *d = g_dir_make_tmp("sdt-io-XXXXXX", &e);
    if (!d) {
        fprintf(stderr, "cannot make a temp folder: %s\n", e->message);
        exit(1);
    }
    return d;
}

static inline void io_rm_tree(const char *path)
{
    GDir *dir = g_dir_open(path, 0, NULL);
    if (dir) {
        const char *name;
        while ((name = g_dir_read_name(dir))) {
            char *p = g_build_filename(path, name, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR))
                io_rm_tree(p);
            else
                g_remove(p);
            g_free(p);
        }
        g_dir_close(dir);
    }
    g_rmdir(path);
}

static inline bool io_write_bytes(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static inline bool io_contains(const char *haystack, const char *needle)
{
    return haystack && needle && strstr(haystack, needle) != NULL;
}

#endif
