/* serve_log_runs.c - see serve_log_runs.h. */
#include <string.h>
#include <sys/stat.h>

#include "serve_log_runs.h"

#define RUNS_LIMIT 200
#define FILES_LIMIT 400
/* How far below the logs folder a typed log folder is looked for (logs/a/b/c/d/<date>/<name>), and how
 * many folders one listing opens at most: the walk stays cheap whatever the folder holds. */
#define LOG_FOLDER_DEPTH 4
#define FOLDERS_LIMIT 5000

typedef struct log_run {
    char *log_dir; /* the run's log folder, relative to the logs folder ("" for the logs folder itself) */
    char *date, *name;
    gint64 modified;
} log_run;

static char *folder_of(const log_run *r)
{
    return r->log_dir[0] ? g_build_filename(r->log_dir, r->date, r->name, NULL)
                         : g_build_filename(r->date, r->name, NULL);
}

static gint newest_first(gconstpointer a, gconstpointer b)
{
    const log_run *x = *(log_run *const *)a, *y = *(log_run *const *)b;
    if (x->modified != y->modified) return x->modified < y->modified ? 1 : -1;
    gint order = g_strcmp0(x->log_dir, y->log_dir);
    if (!order) order = g_strcmp0(x->date, y->date);
    return order ? order : g_strcmp0(x->name, y->name);
}

static void free_run(gpointer p)
{
    log_run *r = p;
    g_free(r->log_dir), g_free(r->date), g_free(r->name), g_free(r);
}

/* lstat: a link is never a folder here, so the walk never leaves the logs folder through one. */
static gboolean is_real_folder(const char *path, gint64 *modified)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return FALSE;
    if (modified) *modified = (gint64)st.st_mtime;
    return TRUE;
}

static gboolean is_real_file(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The plugin's date folder: <log-dir>/YYYY-MM-DD/<name>/ (plugin/data/outputs.c). */
static gboolean is_date(const char *name)
{
    if (strlen(name) != 10) return FALSE;
    for (int i = 0; i < 10; i++)
        if (i == 4 || i == 7 ? name[i] != '-' : !g_ascii_isdigit(name[i])) return FALSE;
    return TRUE;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

/* Files of a run folder, one level of sub-folders (images/, embeddings/, hypernetworks/, ...); links
 * are left out (/api/file would refuse one leading out anyway). */
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
        if (is_real_folder(path, NULL)) {
            GDir *sub = g_dir_open(path, 0, NULL);
            const char *inner;
            while (sub && (inner = g_dir_read_name(sub)) && names->len < FILES_LIMIT) {
                char *inner_path = g_build_filename(path, inner, NULL);
                if (is_real_file(inner_path)) g_ptr_array_add(names, g_build_filename(name, inner, NULL));
                g_free(inner_path);
            }
            if (sub) g_dir_close(sub);
        } else if (is_real_file(path)) {
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
        if (g_str_has_prefix(file, "images/") && g_str_has_suffix(file, ".png"))
            cJSON_AddItemToArray(images, cJSON_CreateString(relative));
        if (g_str_has_suffix(file, "_loss.csv")) cJSON_AddStringToObject(run, "csv", relative);
        if (strcmp(file, "metrics.jsonl") == 0)
            cJSON_AddStringToObject(run, "metrics", relative);                        /* every step: the Runs plot */
        if (g_str_has_prefix(file, "settings-") && g_str_has_suffix(file, ".json")) { /* the last by name: the newest */
            cJSON_DeleteItemFromObjectCaseSensitive(run, "settings");
            cJSON_AddStringToObject(run, "settings", relative);
        }
        g_free(relative);
    }
    g_ptr_array_unref(names);
    g_free(dir);
}

typedef struct walk {
    const char *logs;
    GPtrArray *found;
    int folders_left;
} walk;

/* The run folders of date folder date inside log folder log_dir. */
static void add_runs(walk *w, const char *log_dir, const char *date, const char *date_path)
{
    GDir *d = w->folders_left-- > 0 ? g_dir_open(date_path, 0, NULL) : NULL;
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        char *path = g_build_filename(date_path, name, NULL);
        gint64 modified = 0;
        if (name[0] != '.' && is_real_folder(path, &modified)) {
            log_run *r = g_new0(log_run, 1);
            r->log_dir = g_strdup(log_dir);
            r->date = g_strdup(date);
            r->name = g_strdup(name);
            r->modified = modified;
            g_ptr_array_add(w->found, r);
        }
        g_free(path);
    }
    if (d) g_dir_close(d);
}

/* A log folder (log_dir, relative): its date folders hold runs; its other folders may be log folders
 * typed on the Train tab (serve_train_request.c lets one be made inside the logs folder). */
static void walk_log_folder(walk *w, const char *log_dir, int depth)
{
    char *dir = log_dir[0] ? g_build_filename(w->logs, log_dir, NULL) : g_strdup(w->logs);
    GDir *d = w->folders_left-- > 0 ? g_dir_open(dir, 0, NULL) : NULL;
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        char *path = g_build_filename(dir, name, NULL);
        if (name[0] != '.' && is_real_folder(path, NULL)) {
            if (is_date(name))
                add_runs(w, log_dir, name, path);
            else if (depth > 0) {
                char *inner = log_dir[0] ? g_build_filename(log_dir, name, NULL) : g_strdup(name);
                walk_log_folder(w, inner, depth - 1);
                g_free(inner);
            }
        }
        g_free(path);
    }
    if (d) g_dir_close(d);
    g_free(dir);
}

cJSON *serve_log_runs_json(const serve_folders *folders)
{
    walk w = {folders->root[SERVE_LOGS], g_ptr_array_new_with_free_func(free_run), FOLDERS_LIMIT};
    walk_log_folder(&w, "", LOG_FOLDER_DEPTH);
    g_ptr_array_sort(w.found, newest_first);
    cJSON *list = cJSON_CreateArray();
    for (guint i = 0; i < w.found->len && i < RUNS_LIMIT; i++) {
        const log_run *r = g_ptr_array_index(w.found, i);
        char *folder = folder_of(r);
        cJSON *run = cJSON_CreateObject();
        cJSON_AddStringToObject(run, "folder", folder);
        cJSON_AddStringToObject(run, "log_dir", r->log_dir);
        cJSON_AddStringToObject(run, "date", r->date);
        cJSON_AddStringToObject(run, "name", r->name);
        cJSON_AddNumberToObject(run, "modified", (double)r->modified);
        add_files(run, w.logs, folder);
        cJSON_AddItemToArray(list, run);
        g_free(folder);
    }
    g_ptr_array_unref(w.found);
    return list;
}
