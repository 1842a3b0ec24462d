/* serve_folders.c - configured folders and the inside-the-folder check (see serve_folders.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "data_dirs.h"
#include "serve_folders.h"

static const char *const root_names[SERVE_N_ROOTS] = {"models",        "datasets", "embeddings",
                                                      "hypernetworks", "logs",     "templates"};
/* Under --webui DIR, as A1111 lays its folders out (datasets: sdtrain's choice, A1111 has none). */
static const char *const webui_layout[SERVE_N_ROOTS] = {"models/Stable-diffusion", "datasets",          "embeddings",
                                                        "models/hypernetworks",    "textual_inversion", NULL};
static const char *const option_names[SERVE_N_ROOTS] = {"--models",        "--datasets", "--embeddings",
                                                        "--hypernetworks", "--log-dir",  NULL};
/* Folders the panel writes into: made when missing, as A1111 does. */
static const gboolean created[SERVE_N_ROOTS] = {FALSE, FALSE, TRUE, TRUE, TRUE, FALSE};

const char *serve_root_name(serve_root r)
{
    return root_names[r];
}

int serve_root_named(const char *name)
{
    for (int r = 0; r < SERVE_N_ROOTS; r++)
        if (name && strcmp(name, root_names[r]) == 0) return r;
    return -1;
}

gboolean serve_folders_init(serve_folders *f, char *const given[SERVE_N_ROOTS], const char *webui, char **error)
{
    memset(f, 0, sizeof *f);
    for (int r = 0; r < SERVE_N_ROOTS; r++) {
        char *folder = NULL;
        if (r == SERVE_TEMPLATES)
            folder = host_data_dir("templates");
        else if (given[r])
            folder = g_strdup(given[r]);
        else if (webui)
            folder = g_build_filename(webui, webui_layout[r], NULL);
        else {
            *error =
                g_strdup_printf("sdt-host serve needs the %s folder: give %s DIR, or --webui DIR for A1111's layout.",
                                root_names[r], option_names[r]);
            serve_folders_clear(f);
            return FALSE;
        }
        if (created[r]) g_mkdir_with_parents(folder, 0777);
        char resolved[PATH_MAX];
        if (!realpath(folder, resolved) || !g_file_test(resolved, G_FILE_TEST_IS_DIR)) {
            *error = g_strdup_printf(
                "The %s folder %s does not exist or is not a folder (%s); give an existing folder%s%s.", root_names[r],
                folder, g_strerror(errno), option_names[r] ? " to " : "", option_names[r] ? option_names[r] : "");
            g_free(folder);
            serve_folders_clear(f);
            return FALSE;
        }
        g_free(folder);
        f->root[r] = g_strdup(resolved);
    }
    return TRUE;
}

void serve_folders_clear(serve_folders *f)
{
    for (int r = 0; r < SERVE_N_ROOTS; r++) g_free(f->root[r]);
    memset(f, 0, sizeof *f);
}

/* Whether resolved path lies in root (is root or below it). */
static gboolean inside(const char *root, const char *path)
{
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/' || strcmp(root, "/") == 0);
}

char *serve_folders_resolve(const serve_folders *f, serve_root r, const char *relative, char **error)
{
    if (!relative || strlen(relative) > PATH_MAX / 2 || !g_utf8_validate(relative, -1, NULL)) {
        *error = g_strdup_printf("The path given for the %s folder is missing, too long or not UTF-8.", root_names[r]);
        return NULL;
    }
    char *joined = g_path_is_absolute(relative) ? g_strdup(relative) : g_build_filename(f->root[r], relative, NULL);
    char resolved[PATH_MAX];
    char *result = NULL;
    if (!realpath(joined, resolved))
        *error = g_strdup_printf("'%s' does not exist in the %s folder (%s).", relative, root_names[r], f->root[r]);
    else if (!inside(f->root[r], resolved))
        *error = g_strdup_printf("'%s' lies outside the %s folder (%s); the panel reaches only the folders it was "
                                 "started with.",
                                 relative, root_names[r], f->root[r]);
    else
        result = g_strdup(resolved);
    g_free(joined);
    return result;
}

gboolean serve_folders_check_links(const serve_folders *f, serve_root r, const char *folder, int depth, char **error)
{
    GDir *d = g_dir_open(folder, 0, NULL);
    const char *name;
    gboolean ok = TRUE;
    while (d && ok && (name = g_dir_read_name(d))) {
        char *path = g_build_filename(folder, name, NULL);
        char resolved[PATH_MAX];
        if (g_file_test(path, G_FILE_TEST_IS_SYMLINK)) {
            if (realpath(path, resolved) && !inside(f->root[r], resolved)) {
                *error = g_strdup_printf("%s is a link to %s, outside the %s folder (%s); the panel reaches only the "
                                         "folders it was started with: put the file itself there.",
                                         path, resolved, root_names[r], f->root[r]);
                ok = FALSE;
            }
        } else if (depth > 1 && g_file_test(path, G_FILE_TEST_IS_DIR)) {
            ok = serve_folders_check_links(f, r, path, depth - 1, error);
        }
        g_free(path);
    }
    if (d) g_dir_close(d);
    return ok;
}

char *serve_folders_relative(const serve_folders *f, serve_root r, const char *path)
{
    char resolved[PATH_MAX];
    if (!path || !realpath(path, resolved) || !inside(f->root[r], resolved)) return NULL;
    const char *rest = resolved + strlen(f->root[r]);
    while (*rest == '/') rest++;
    return g_strdup(rest);
}

/* What root r's list offers from a folder entry. */
static gboolean offered(serve_root r, const char *name, gboolean is_dir)
{
    if (name[0] == '.') return FALSE;
    switch (r) {
        case SERVE_MODELS:
            return is_dir || g_str_has_suffix(name, ".safetensors") || g_str_has_suffix(name, ".ckpt");
        case SERVE_DATASETS:
            return is_dir;
        case SERVE_EMBEDDINGS:
            return !is_dir && (g_str_has_suffix(name, ".safetensors") || g_str_has_suffix(name, ".pt") ||
                               g_str_has_suffix(name, ".bin") || g_str_has_suffix(name, ".png"));
        case SERVE_HYPERNETWORKS:
            return !is_dir && (g_str_has_suffix(name, ".pt") || g_str_has_suffix(name, ".safetensors"));
        case SERVE_TEMPLATES:
            return !is_dir && g_str_has_suffix(name, ".txt");
        default:
            return FALSE;
    }
}

/* A dataset is a folder with images in it. */
static gboolean has_images(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    const char *name;
    gboolean yes = FALSE;
    while (d && !yes && (name = g_dir_read_name(d))) {
        char *lower = g_ascii_strdown(name, -1);
        yes = g_str_has_suffix(lower, ".png") || g_str_has_suffix(lower, ".jpg") || g_str_has_suffix(lower, ".jpeg") ||
              g_str_has_suffix(lower, ".webp") || g_str_has_suffix(lower, ".bmp");
        g_free(lower);
    }
    if (d) g_dir_close(d);
    return yes;
}

/* A diffusers folder is a model itself: its parts are not listed one by one. */
static gboolean is_model_folder(const char *path)
{
    char *index = g_build_filename(path, "model_index.json", NULL);
    char *unet = g_build_filename(path, "unet", NULL);
    gboolean yes = g_file_test(index, G_FILE_TEST_EXISTS) || g_file_test(unet, G_FILE_TEST_IS_DIR);
    g_free(index);
    g_free(unet);
    return yes;
}

#define LIST_DEPTH 2
#define LIST_LIMIT 2000

static void list_into(GPtrArray *out, const char *dir, const char *prefix, serve_root r, int depth)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d)) && out->len < LIST_LIMIT) {
        char *path = g_build_filename(dir, name, NULL);
        char *relative = prefix[0] ? g_build_filename(prefix, name, NULL) : g_strdup(name);
        gboolean is_dir = g_file_test(path, G_FILE_TEST_IS_DIR);
        gboolean folder_is_item =
            is_dir && ((r == SERVE_DATASETS && has_images(path)) || (r == SERVE_MODELS && is_model_folder(path)));
        if (offered(r, name, is_dir) && (!is_dir || folder_is_item)) g_ptr_array_add(out, g_strdup(relative));
        /* a dataset may hold sub-datasets; a model folder is one model */
        if (is_dir && (r == SERVE_DATASETS || !folder_is_item) && depth > 1 && name[0] != '.')
            list_into(out, path, relative, r, depth - 1);
        g_free(path);
        g_free(relative);
    }
    if (d) g_dir_close(d);
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

GPtrArray *serve_folders_list(const serve_folders *f, serve_root r)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    list_into(out, f->root[r], "", r, LIST_DEPTH);
    g_ptr_array_sort(out, compare_names);
    return out;
}
