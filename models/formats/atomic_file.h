/* atomic_file.h - saves that never destroy the previous file.
 *
 * Write to "<path>.tmp-XXXXXX" in the same folder, fsync it, rename it over the
 * target, fsync the folder. A crash, a full disk or a failed write at any point
 * leaves the old file untouched and no temp file behind.
 */
#ifndef SDT_MODELS_ATOMIC_FILE_H
#define SDT_MODELS_ATOMIC_FILE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct sdt_atomic_file {
    FILE *fp;        /* write through this */
    char path[4096]; /* final destination */
    char tmp_path[4096];
} sdt_atomic_file;

/* Opens a temp file next to path. false + error sentence when the folder is not writable. */
bool sdt_atomic_begin(sdt_atomic_file *f, const char *path, sdt_error *error);
/* Flushes, fsyncs and renames over the target. On failure removes the temp file,
 * leaves the target as it was and explains (e.g. disk full). */
bool sdt_atomic_commit(sdt_atomic_file *f, sdt_error *error);
/* Gives up: removes the temp file, the target is untouched. Safe to call twice. */
void sdt_atomic_abort(sdt_atomic_file *f);
/* Temp files of saves to path that a killed process left behind ("<path>.tmp-XXXXXX"): removed.
 * Call it only while nothing else can be saving to path (the caller holds its lock). Returns
 * how many were removed. */
int sdt_atomic_remove_stale(const char *path);
/* The same for every "*.tmp-XXXXXX" directly in folder (a folder the caller has locked). */
int sdt_atomic_remove_stale_in(const char *folder);
/* true when name ends in ".tmp-" and the six characters mkstemp puts there. */
bool sdt_atomic_is_temp_name(const char *name);
/* Writes a whole buffer atomically. */
bool sdt_atomic_write(const char *path, const void *data, size_t size, sdt_error *error);

#endif
