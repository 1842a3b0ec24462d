/* serve_log_runs.c - see serve_log_runs.h. */
#include <string.h>
#include <sys/stat.h>

#include "serve_log_runs.h"

#define RUNS_LIMIT 200
#define FILES_LIMIT 400

typedef struct log_run {
    char *folder; /* relative to the log folder */
    char *date, *name;
    gint64 modified;
} log_run;

static gint newest_first(gconstpointer a, gconstpointer b)
{
    const log_run *x = *(log_run *const *)a, *y = *(log_run *const *)b;
    if (x->modified != y->modified) return x->modified < y->modified ? 1 : -1;
    return g_strcmp0(x->folder, y->folder);
}

static void free_run(gpointer p)
{
    log_run *r = p;
    g_free(r->folder), g_free(r->date), g_free(r->name), g_free(r);
}

static gint64 modified_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (gint64)st.st_mtime : 0;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* Files of a run folder, one level of sub-folders (images/, embeddings/, hypernetworks/, ...). */
static void add_files(cJSON *run, const char *logs, const char *folder)
{
    cJSON *files = cJSON_AddArrayToObject(run, "files"), *images = cJSON_AddArrayToObject(run, "images");
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    char *dir = g_build_filename(logs, folder, NULL);
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d)) && names->len < FILES_LIMIT) {
        if (name[0] == '.') continue; /* the run's lock file */
        char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
            GDir *sub = g_dir_open(path, 0, NULL);
            const char *inner;
            while (sub && (inner = g_dir_read_name(sub)) && names->len < FILES_LIMIT)
                g_ptr_array_add(names, g_build_filename(name, inner, NULL));
            if (sub) g_dir_close(sub);
        } else {
            g_ptr_array_add(names, g_strdup(name));
        }
        g_free(path);
    }
    if (d) g_dir_close(d);
    g_ptr_array_sort(names, by_name);
    for (guint i = 0; i < names->len; i++) {
        const char *file = g_ptr_array_index(names, i);
        char *relative = g_build_filename(folder, file, NULL);
        cJSON_AddItemToArray(files, cJSON_CreateString(relative));
        if (g_str_has_prefix(file, "images/") && g_str_has_suffix(file, ".png")) cJSON_AddItemToArray(images, cJSON_CreateString(relative));
        if (g_str_has_suffix(file, "_loss.csv")) cJSON_AddStringToObject(run, "csv", relative);
        if (strcmp(file, "metrics.jsonl") == 0) cJSON_AddStringToObject(run, "metrics", relative); /* every step: the Runs plot */
        if (g_str_has_prefix(file, "settings-") && g_str_has_suffix(file, ".json")) { /* the last by name: the newest */
            cJSON_DeleteItemFromObjectCaseSensitive(run, "settings");
            cJSON_AddStringToObject(run, "settings", relative);
        }
        g_free(relative);
    }
    g_ptr_array_unref(names);
    g_free(dir);
}

cJSON *serve_log_runs_json(const serve_folders *folders)
{
    const char *logs = folders->root[SERVE_LOGS];
    GPtrArray *found = g_ptr_array_new_with_free_func(free_run);
    GDir *top = g_dir_open(logs, 0, NULL);
    const char *date;
    while (top && (date = g_dir_read_name(top))) {
        char *date_dir = g_build_filename(logs, date, NULL);
        GDir *d = date[0] != '.' ? g_dir_open(date_dir, 0, NULL) : NULL;
        const char *name;
        while (d && (name = g_dir_read_name(d))) {
            char *path = g_build_filename(date_dir, name, NULL);
            if (name[0] != '.' && g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
                log_run *r = g_new0(log_run, 1);
                r->folder = g_build_filename(date, name, NULL);
                r->date = g_strdup(date);
                r->name = g_strdup(name);
                r->modified = modified_of(path);
                g_ptr_array_add(found, r);
            }
            g_free(path);
        }
        if (d) g_dir_close(d);
        g_free(date_dir);
    }
    if (top) g_dir_close(top);
    g_ptr_array_sort(found, newest_first);
    cJSON *list = cJSON_CreateArray();
    for (guint i = 0; i < found->len && i < RUNS_LIMIT; i++) {
        const log_run *r = g_ptr_array_index(found, i);
        cJSON *run = cJSON_CreateObject();
        cJSON_AddStringToObject(run, "folder", r->folder);
        cJSON_AddStringToObject(run, "date", r->date);
        cJSON_AddStringToObject(run, "name", r->name);
        cJSON_AddNumberToObject(run, "modified", (double)r->modified);
        add_files(run, logs, r->folder);
        cJSON_AddItemToArray(list, run);
    }
    g_ptr_array_unref(found);
    return list;
}
