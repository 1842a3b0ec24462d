/* demo_test_util.h - runs a generator as the build runs it, for the demo tests. */
#ifndef SDT_DEMO_TEST_UTIL_H
#define SDT_DEMO_TEST_UTIL_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* Runs argv (NULL-terminated); returns the exit status (-1 when it could not
 * start) and, when err_out is given, its stderr (g_free it). */
static inline int demo_run(char **argv, char **err_out)
{
    int wait_status = 0;
    char *out = NULL, *err = NULL;
    GError *e = NULL;
    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &wait_status, &e)) {
        fprintf(stderr, "cannot run %s: %s\n", argv[0], e->message);
        g_error_free(e);
        return -1;
    }
    g_free(out);
    if (err_out)
        *err_out = err;
    else
        g_free(err);
    return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

/* Whether two files exist and hold the same bytes. */
static inline bool demo_same_file(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    gsize nx = 0, ny = 0;
    bool same = g_file_get_contents(a, &x, &nx, NULL) && g_file_get_contents(b, &y, &ny, NULL) && nx == ny &&
                memcmp(x, y, nx) == 0;
    g_free(x);
    g_free(y);
    return same;
}

#endif
