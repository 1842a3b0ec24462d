/* data_dirs.h - where sdt-host finds what ships with it (the demo assets, the prompt
 * templates): <sdt-host's folder>/NAME in a build tree, <sdt-host's folder>/../share/sdtrain/NAME
 * when installed. */
#ifndef SDT_HOST_DATA_DIRS_H
#define SDT_HOST_DATA_DIRS_H

#include <glib.h>

/* The candidate folders for NAME, in search order (NULL-terminated; g_strfreev). */
char **host_data_dirs(const char *name);

/* The first candidate folder for NAME that exists, else the installed location (g_free). */
char *host_data_dir(const char *name);

/* A prompt template as the Train tab's dropdown names it: GIVEN itself when that file exists
 * (or GIVEN is a path), else a bare file name looked up in the templates folders. NULL with a
 * one-sentence *error (g_free) naming the folders searched when a bare name is found nowhere. */
char *host_find_template(const char *given, char **error);

#endif
