/* data_dirs.c - the folders sdt-host ships data in (see data_dirs.h). */
#include <string.h>

#include "data_dirs.h"

char **host_data_dirs(const char *name)
{
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    char *dir = exe ? g_path_get_dirname(exe) : g_strdup(".");
    char **dirs = g_new0(char *, 3);
    dirs[0] = g_build_filename(dir, name, NULL);
    dirs[1] = g_build_filename(dir, "..", "share", "sdtrain", name, NULL);
    g_free(dir);
    g_free(exe);
    return dirs;
}

char *host_data_dir(const char *name)
{
    char **dirs = host_data_dirs(name);
    char *chosen = g_strdup(g_file_test(dirs[0], G_FILE_TEST_IS_DIR) ? dirs[0] : dirs[1]);
    g_strfreev(dirs);
    return chosen;
}

char *host_find_template(const char *given, char **error)
{
    /* A file here, or anything with a folder in it, is the user's path: the plugin reports it if it is missing. */
    if (g_file_test(given, G_FILE_TEST_EXISTS) || strchr(given, G_DIR_SEPARATOR)) return g_strdup(given);
    char **dirs = host_data_dirs("templates");
    char *found = NULL;
    for (int i = 0; dirs[i] && !found; i++) {
        char *candidate = g_build_filename(dirs[i], given, NULL);
        if (g_file_test(candidate, G_FILE_TEST_IS_REGULAR))
            found = candidate;
        else
            g_free(candidate);
    }
    if (!found)
        *error = g_strdup_printf("The prompt template %s is neither a file here nor one of the templates in %s or %s; "
                                 "give a path to a template file or the name of one of those templates.",
                                 given, dirs[0], dirs[1]);
    g_strfreev(dirs);
    return found;
}
