/* plugin_loader.c - locating, opening and negotiating with libsdtrain.so (see plugin_loader.h). */
#include <string.h>

#include "plugin_loader.h"

#define PLUGIN_FILE "libsdtrain.so"

static char *exe_dir(void)
{
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    if (!exe) return g_strdup(".");
    char *dir = g_path_get_dirname(exe);
    g_free(exe);
    return dir;
}

/* The places a host looks when the user named none, in order. */
static GPtrArray *candidate_paths(void)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    char *dir = exe_dir();
    g_ptr_array_add(paths, g_build_filename(dir, PLUGIN_FILE, NULL));
    g_ptr_array_add(paths, g_build_filename(dir, "..", "lib", PLUGIN_FILE, NULL));
#ifdef SDT_HOST_LIBDIR_FROM_BINDIR /* the installed tree's libdir, e.g. ../lib/x86_64-linux-gnu */
    if (strcmp(SDT_HOST_LIBDIR_FROM_BINDIR, "../lib") != 0)
        g_ptr_array_add(paths, g_build_filename(dir, SDT_HOST_LIBDIR_FROM_BINDIR, PLUGIN_FILE, NULL));
#endif
    g_ptr_array_add(paths, g_build_filename(dir, "..", "plugin", PLUGIN_FILE, NULL));
    g_free(dir);
    return paths;
}

static char *choose_path(const char *explicit_path, char **error)
{
    if (explicit_path && explicit_path[0]) return g_strdup(explicit_path);
    const char *env = g_getenv("SDTRAIN_PLUGIN");
    if (env && env[0]) return g_strdup(env);
    GPtrArray *paths = candidate_paths();
    char *found = NULL;
    for (guint i = 0; i < paths->len && !found; i++)
        if (g_file_test(paths->pdata[i], G_FILE_TEST_EXISTS)) found = g_strdup(paths->pdata[i]);
    if (!found) {
        g_ptr_array_add(paths, NULL);
        char *list = g_strjoinv(", ", (char **)paths->pdata);
        *error =
            g_strdup_printf("Could not find the plugin %s (looked in %s); pass --plugin PATH or set SDTRAIN_PLUGIN.",
                            PLUGIN_FILE, list);
        g_free(list);
    }
    g_ptr_array_unref(paths);
    return found;
}

static gboolean negotiate(host_plugin *p, char **error)
{
    sdt_version ours = SDT_ABI_VERSION_INIT;
    const sdt_version theirs = p->entry->abi_version;
    if (theirs.major != ours.major) {
        *error = g_strdup_printf("%s speaks ABI %u.%u.%u but sdt-host speaks ABI %u.%u.%u; use a plugin and host "
                                 "of the same major version.",
                                 p->path, theirs.major, theirs.minor, theirs.patch, ours.major, ours.minor, ours.patch);
        return FALSE;
    }
    char sentence[512] = "";
    sdt_status st = p->entry->init(ours, sentence, sizeof sentence);
    if (st != SDT_STATUS_OK) {
        *error = g_strdup_printf("%s refused to start (%s): %s", p->path, p->entry->status_name(st), sentence);
        return FALSE;
    }
    return TRUE;
}

gboolean host_plugin_open(host_plugin *p, const char *explicit_path, char **error)
{
    memset(p, 0, sizeof *p);
    p->path = choose_path(explicit_path, error);
    if (!p->path) return FALSE;
    if (!g_file_test(p->path, G_FILE_TEST_EXISTS)) {
        *error = g_strdup_printf("The plugin file %s does not exist; check --plugin or SDTRAIN_PLUGIN.", p->path);
        return FALSE;
    }
    GError *gerr = NULL;
    p->module = g_module_open_full(p->path, G_MODULE_BIND_LOCAL, &gerr);
    if (!p->module) {
        *error = g_strdup_printf("Could not load the plugin %s: %s", p->path, gerr ? gerr->message : "unknown error");
        g_clear_error(&gerr);
        return FALSE;
    }
    gpointer symbol = NULL;
    if (!g_module_symbol(p->module, SDTRAIN_ENTRY_SYMBOL, &symbol) || !symbol) {
        *error = g_strdup_printf("%s is not an sdtrain plugin: it has no '%s' symbol.", p->path, SDTRAIN_ENTRY_SYMBOL);
        return FALSE;
    }
    p->entry = symbol;
    if (!negotiate(p, error)) {
        p->entry = NULL;
        return FALSE;
    }
    return TRUE;
}

const void *host_plugin_factory(const host_plugin *p, const char *id, char **error)
{
    const void *factory = p->entry->get_factory(id);
    if (!factory && error)
        *error = g_strdup_printf("The plugin %s (version %s) does not provide '%s'; use a newer plugin.", p->path,
                                 p->entry->plugin_version, id);
    return factory;
}

void host_plugin_close(host_plugin *p)
{
    if (p->entry) p->entry->deinit();
    if (p->module) g_module_close(p->module);
    g_free(p->path);
    memset(p, 0, sizeof *p);
}
