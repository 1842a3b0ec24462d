/* path_util.c - see path_util.h. */
#include "data/path_util.h"

#include <glib.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

char *sdt_path_stem(const char *path)
{
    char *base = g_path_get_basename(path);
    char *dot = strrchr(base, '.');
    if (dot) {
        bool only_dots_before = true;
        for (char *q = base; q < dot; q++)
            if (*q != '.') only_dots_before = false;
        if (!only_dots_before) *dot = 0;
    }
    char *stem = strdup(base);
    g_free(base);
    return stem;
}
