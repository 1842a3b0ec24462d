/* run_lock.c - flock on a lock file holding the owner's pid (see run_lock.h). */
#include "data/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The owner's pid as its lock file says, or 0 when it cannot be read. */
static long lock_owner(int fd)
{
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

static bool busy(int fd, const char *target, sdt_error *error)
{
    long pid = lock_owner(fd);
    if (pid == (long)getpid())
        return sdt_fail(error, SDT_ERR_BAD_STATE,
                        "%s is being written by another trainer in this process (pid %ld); wait for its run to "
                        "end (or destroy it), or train into another file or log folder",
                        target, pid);
    if (pid > 0)
        return sdt_fail(error, SDT_ERR_BAD_STATE,
                        "%s is being written by another training run (process %ld); wait for it to finish or "
                        "stop it, or train into another file or log folder",
                        target, pid);
    return sdt_fail(error, SDT_ERR_BAD_STATE,
                    "%s is being written by another training run; wait for it to finish or stop it, or "
                    "train into another file or log folder",
                    target);
}

bool sdt_run_lock_take(sdt_run_lock *lock, const char *lock_path, const char *target, sdt_error *error)
{
    memset(lock, 0, sizeof *lock);
    if (snprintf(lock->path, sizeof lock->path, "%s", lock_path) >= (int)sizeof lock->path) {
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: the path is too long to lock; choose a shorter one",
                        target);
    }
    /* The owner unlinks the file as it lets go: a file locked after that is not the one at the
     * path any more, so check and try again. */
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            return sdt_fail(error, sdt_error_code_from_errno(errno),
                            "%s: cannot create the lock file %s (%s); check that "
                            "the folder is writable",
                            target, lock_path, strerror(errno));
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int why = errno;
            if (why == EWOULDBLOCK)
                busy(fd, target, error);
            else
                sdt_fail(error, SDT_ERR_IO, "%s: cannot lock %s (%s)", target, lock_path, strerror(why));
            close(fd);
            return false;
        }
        struct stat held, now;
        if (fstat(fd, &held) == 0 && stat(lock_path, &now) == 0 && held.st_ino == now.st_ino &&
            held.st_dev == now.st_dev) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            bool wrote = ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) == n;
            (void)wrote; /* the lock holds either way; only the pid in another run's sentence would be missing */
            lock->fd_plus_one = fd + 1;
            return true;
        }
        close(fd);
    }
    return sdt_fail(error, SDT_ERR_BAD_STATE,
                    "%s: the lock file %s keeps changing; another run is starting or stopping, "
                    "try again",
                    target, lock_path);
}

bool sdt_run_lock_file(sdt_run_lock *lock, const char *file, sdt_error *error)
{
    /* O_NONBLOCK: a FIFO put in the file's place must not hang the run; it is refused later by
     * the reader. O_RDONLY is enough for flock. */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? true
                               : sdt_fail(error, sdt_error_code_from_errno(errno),
                                          "%s: cannot open it to lock "
                                          "it (%s); check its permissions",
                                          file, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return true; /* not a regular file: its reader refuses it with a sentence */
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int why = errno;
        close(fd);
        if (why == EWOULDBLOCK)
            return sdt_fail(error, SDT_ERR_BAD_STATE,
                            "%s is being written by another training run that reached the same file "
                            "by another name (a hard link); wait for it to finish or stop it, or train a copy",
                            file);
        return sdt_fail(error, SDT_ERR_IO, "%s: cannot lock it (%s)", file, strerror(why));
    }
    lock->file_fd_plus_one = fd + 1;
    return true;
}

void sdt_run_lock_release(sdt_run_lock *lock)
{
    if (lock->file_fd_plus_one) close(lock->file_fd_plus_one - 1);
    lock->file_fd_plus_one = 0;
    if (!lock->fd_plus_one) return;
    unlink(lock->path);
    close(lock->fd_plus_one - 1);
    lock->fd_plus_one = 0;
}
