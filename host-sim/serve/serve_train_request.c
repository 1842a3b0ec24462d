/* serve_train_request.c - see serve_train_request.h. */
#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "panel_options.h"
#include "serve_train_request.h"

#define GROUP "train"

static gboolean resolve_key(const serve_folders *f, GKeyFile *kf, const char *key, serve_root root, char **error)
{
    char *value = g_key_file_get_string(kf, GROUP, key, NULL);
    gboolean ok = TRUE;
    if (value && value[0]) {
        char *why = NULL;
        char *resolved = serve_folders_resolve(f, root, value, &why);
        if (resolved)
            g_key_file_set_string(kf, GROUP, key, resolved);
        else {
            *error = g_strdup_printf("%s: %s", key, why);
            ok = FALSE;
        }
        g_free(why);
        g_free(resolved);
    } else if (value) {
        g_key_file_remove_key(kf, GROUP, key, NULL); /* an empty field: the default */
    }
    g_free(value);
    return ok;
}

/* A list key (preview-hypernetworks): "FILE[:S]; FILE[:S]", each FILE in root. */
static gboolean resolve_list(const serve_folders *f, GKeyFile *kf, const char *key, serve_root root, char **error)
{
    char *value = g_key_file_get_string(kf, GROUP, key, NULL);
    if (!value) return TRUE;
    char **items = g_strsplit(value, ";", -1);
    GString *out = g_string_new(NULL);
    gboolean ok = TRUE;
    for (int i = 0; items[i] && ok; i++) {
        char *item = g_strstrip(items[i]);
        if (!item[0]) continue;
        char *colon = strrchr(item, ':');
        char *strength = colon && colon[1] && strspn(colon + 1, "0123456789.eE+-") == strlen(colon + 1) ? colon : NULL;
        if (strength) *strength = '\0';
        char *why = NULL;
        char *resolved = serve_folders_resolve(f, root, item, &why);
        if (!resolved) {
            *error = g_strdup_printf("%s: %s", key, why);
            ok = FALSE;
        } else {
            g_string_append_printf(out, "%s%s%s%s", out->len ? "; " : "", resolved, strength ? ":" : "",
                                   strength ? strength + 1 : "");
        }
        g_free(why);
        g_free(resolved);
    }
    if (ok) g_key_file_set_string(kf, GROUP, key, out->str);
    g_string_free(out, TRUE);
    g_strfreev(items);
    g_free(value);
    return ok;
}

/* A log folder typed on the page (A1111's "Log directory") may be new: its folders are made when the
 * deepest one that exists lies inside the logs folder and the rest are plain names; the check of
 * every path key (resolve_key) then confines the whole path. */
static gboolean make_log_folder(const serve_folders *f, GKeyFile *kf, char **error)
{
    char *value = g_key_file_get_string(kf, GROUP, "log-dir", NULL);
    char *path = value && value[0] ? (g_path_is_absolute(value) ? g_strdup(value)
                                                                : g_build_filename(f->root[SERVE_LOGS], value, NULL))
                                   : NULL;
    GPtrArray *missing = g_ptr_array_new_with_free_func(g_free); /* the new folders' names, innermost first */
    gboolean ok = TRUE;
    while (path && !g_file_test(path, G_FILE_TEST_EXISTS) && ok) {
        char *name = g_path_get_basename(path), *parent = g_path_get_dirname(path);
        ok = strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && strcmp(name, G_DIR_SEPARATOR_S) != 0 &&
             strcmp(parent, path) != 0;
        g_ptr_array_add(missing, name);
        g_free(path);
        path = parent;
    }
    if (!ok)
        *error = g_strdup_printf(
            "log-dir: '%s' is not a folder name inside the logs folder (%s); name one without '.' or '..'.", value,
            f->root[SERVE_LOGS]);
    char *why = NULL, *inside = ok && path && missing->len ? serve_folders_resolve(f, SERVE_LOGS, path, &why) : NULL;
    if (ok && missing->len && !inside) {
        *error = g_strdup_printf("log-dir: %s", why);
        ok = FALSE;
    }
    for (guint i = missing->len; ok && i > 0; i--) {
        char *next = g_build_filename(inside, g_ptr_array_index(missing, i - 1), NULL);
        g_free(inside);
        inside = next;
        if (g_mkdir(inside, 0777) != 0 && !g_file_test(inside, G_FILE_TEST_IS_DIR)) {
            *error = g_strdup_printf("log-dir: could not make the folder %s (%s).", inside, g_strerror(errno));
            ok = FALSE;
        }
    }
    g_free(why);
    g_free(inside);
    g_ptr_array_unref(missing);
    g_free(path);
    g_free(value);
    return ok;
}

/* How deep a link is looked for in a folder a run reads every file of (a dataset: its captions)
 * or writes into (the log folder: <date>/<name>/images/<file>). */
static const int link_depth[SERVE_N_ROOTS] = {[SERVE_DATASETS] = 1, [SERVE_LOGS] = 4};

/* Option i's folder (resolved already) holds no link leading out of its root. */
static gboolean check_links(const serve_folders *f, GKeyFile *kf, size_t i, char **error)
{
    panel_option_info info;
    panel_option_describe(i, &info);
    int root = info.folder && !info.folder_list ? serve_root_named(info.folder) : -1;
    char *value = root >= 0 && link_depth[root] ? g_key_file_get_string(kf, GROUP, info.name, NULL) : NULL;
    char *why = NULL;
    gboolean ok = !value || !g_file_test(value, G_FILE_TEST_IS_DIR) ||
                  serve_folders_check_links(f, root, value, link_depth[root], &why);
    if (!ok) *error = g_strdup_printf("%s: %s", info.name, why);
    g_free(why);
    g_free(value);
    return ok;
}

char *serve_train_request_check(const serve_folders *folders, const char *body, size_t n, char **error)
{
    GKeyFile *kf = g_key_file_new();
    GError *gerr = NULL;
    if (!g_utf8_validate(body, (gssize)n, NULL) || !g_key_file_load_from_data(kf, body, n, G_KEY_FILE_NONE, &gerr)) {
        /* the parser's message quotes the line: not echoed back, as the body may be anything */
        *error = g_strdup_printf(
            "The panel's settings are not a panel file (%s); send the options under a [%s] line.",
            gerr ? "a line is neither a key=value pair, a [group] nor a comment" : "not UTF-8 text", GROUP);
        g_clear_error(&gerr);
        g_key_file_unref(kf);
        return NULL;
    }
    gboolean ok = g_key_file_has_group(kf, GROUP);
    if (!ok) *error = g_strdup_printf("The panel's settings have no [%s] group.", GROUP);
    ok = ok && make_log_folder(folders, kf, error);
    /* Every key the option table marks as a path, so a new path option is confined too. */
    for (size_t i = 0; ok && i < panel_option_count(); i++) {
        panel_option_info info;
        panel_option_describe(i, &info);
        if (!info.folder) continue;
        int root = serve_root_named(info.folder);
        if (root < 0) {
            *error = g_strdup_printf("%s: the panel keeps no %s folder, so it cannot take this key.", info.name,
                                     info.folder);
            ok = FALSE;
        } else {
            ok = info.folder_list ? resolve_list(folders, kf, info.name, root, error)
                                  : resolve_key(folders, kf, info.name, root, error);
        }
    }
    if (ok) {
        /* Runs write into the configured log folder; the template defaults as on the command line. */
        if (!g_key_file_has_key(kf, GROUP, "log-dir", NULL))
            g_key_file_set_string(kf, GROUP, "log-dir", folders->root[SERVE_LOGS]);
        if (!g_key_file_has_key(kf, GROUP, "template", NULL)) {
            char *template = g_build_filename(folders->root[SERVE_TEMPLATES], PANEL_DEFAULT_TEMPLATE, NULL);
            g_key_file_set_string(kf, GROUP, "template", template);
            g_free(template);
        }
    }
    for (size_t i = 0; ok && i < panel_option_count(); i++) ok = check_links(folders, kf, i, error);
    char *text = ok ? g_key_file_to_data(kf, NULL, NULL) : NULL;
    g_key_file_unref(kf);
    return text;
}
