/* run_lock.h - an advisory lock on what a training run writes, so two runs never write the
 * same embedding or log folder (the last writer would win, silently).
 *
 * The lock is flock(2) on a small lock file holding the owner's process id: the kernel drops
 * it when the owner dies (kill -9 included), so a lock file left behind never blocks a later
 * run. flock belongs to the open file, so two trainers in one process exclude each other too.
 * The owner removes the lock file when it lets go.
 */
#ifndef SDT_RUN_LOCK_H
#define SDT_RUN_LOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "sdt_error.h"

typedef struct sdt_run_lock {
    int fd_plus_one;      /* 0 = not held (so a zeroed struct is a free lock) */
    int file_fd_plus_one; /* the target file itself, flocked by sdt_run_lock_file (0: none) */
    char path[4096];
} sdt_run_lock;

/* Locks target (a file or folder the run writes) through the lock file lock_path. false + a
 * sentence naming target and the other process (BAD_STATE) when another run holds it. */
bool sdt_run_lock_take(sdt_run_lock *lock, const char *lock_path, const char *target, sdt_error *error);
/* Also flocks the file itself (its inode, as it is now), so a run that reaches the same file by
 * another name (a hard link) is refused too; held until release. A file that does not exist
 * yet needs nothing. Call after sdt_run_lock_take. */
bool sdt_run_lock_file(sdt_run_lock *lock, const char *file, sdt_error *error);
/* Removes the lock file and lets go; harmless when not held. */
void sdt_run_lock_release(sdt_run_lock *lock);

#endif
