/* fuzz_file.h - for targets whose reader takes a path: a private folder per process, and
 * the input written to a file in it (rewritten for every input, removed at exit). */
#ifndef SDT_FUZZ_FILE_H
#define SDT_FUZZ_FILE_H

#include <glib.h>
#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static char *fuzz_dir_path;

static void fuzz_remove_tree(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        const char *name;
        while ((name = g_dir_read_name(d))) {
            char *p = g_build_filename(path, name, NULL);
            fuzz_remove_tree(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    g_remove(path);
}

static void fuzz_dir_cleanup(void)
{
    if (fuzz_dir_path) fuzz_remove_tree(fuzz_dir_path);
}

/* The process's folder, made on first use. */
static const char *fuzz_dir(void)
{
    if (!fuzz_dir_path) {
        fuzz_dir_path = g_dir_make_tmp("sdt-fuzz-XXXXXX", NULL);
        if (!fuzz_dir_path) {
            fprintf(stderr, "fuzz: cannot make a temporary folder\n");
            abort();
        }
        atexit(fuzz_dir_cleanup);
    }
    return fuzz_dir_path;
}

/* A path under the process's folder (g_free). */
static char *fuzz_path(const char *relative)
{
    return g_build_filename(fuzz_dir(), relative, NULL);
}

/* Writes data to <folder>/<relative> (parent folders made) and returns its path (g_free). */
static char *fuzz_write(const char *relative, const uint8_t *data, size_t size)
{
    char *path = fuzz_path(relative);
    char *parent = g_path_get_dirname(path);
    g_mkdir_with_parents(parent, 0700);
    g_free(parent);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
    return path;
}

#endif
