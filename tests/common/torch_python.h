/* torch_python.h - running the tests' torch scripts (tests/models_io/torch_files.py,
 * tests/ti/a1111_card_loader.py) under Debian's /usr/bin/python3 with python3-torch (header only). Tests that need real torch files call tp_torch_available() first and skip without it. */
#ifndef SDT_TORCH_PYTHON_H
#define SDT_TORCH_PYTHON_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>

#define TP_PYTHON "/usr/bin/python3"

static inline bool tp_torch_available(void)
{
    char *argv[] = {TP_PYTHON, "-c", "import torch", NULL};
    int status = -1;
    return g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, NULL,
                        NULL, &status, NULL) &&
           status == 0;
}

/* Runs the script source_dir/relative_script (a tests/ path) with the NULL-terminated args; returns its
 * stdout (g_free), *status 0 on success (its stderr printed otherwise). */
static inline char *tp_run_script(const char *source_dir, const char *relative_script, char **args, int *status)
{
    char *script = g_build_filename(source_dir, relative_script, NULL);
    GPtrArray *argv = g_ptr_array_new();
    g_ptr_array_add(argv, TP_PYTHON);
    g_ptr_array_add(argv, script);
    for (char **a = args; *a; a++) g_ptr_array_add(argv, *a);
    g_ptr_array_add(argv, NULL);
    char *out = NULL, *errout = NULL;
    GError *e = NULL;
    *status = -1;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, 0, NULL, NULL, &out, &errout, status, &e)) {
        fprintf(stderr, "cannot run %s: %s\n", TP_PYTHON, e->message);
        g_error_free(e);
    } else if (*status != 0) {
        fprintf(stderr, "%s %s failed:\n%s\n", script, args[0] ? args[0] : "", errout);
    }
    g_ptr_array_free(argv, TRUE);
    g_free(errout);
    g_free(script);
    return out;
}

/* Runs torch_files.py (in source_dir/tests/models_io) with mode and the NULL-terminated args. */
static inline char *tp_run(const char *source_dir, const char *mode, char **args, int *status)
{
    GPtrArray *all = g_ptr_array_new();
    g_ptr_array_add(all, (char *)mode);
    for (char **a = args; *a; a++) g_ptr_array_add(all, *a);
    g_ptr_array_add(all, NULL);
    char *out = tp_run_script(source_dir, "tests/models_io/torch_files.py", (char **)all->pdata, status);
    g_ptr_array_free(all, TRUE);
    return out;
}

#endif
