/* file_read.c - regular files only, read with a limit; see file_read.h. */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_numeric.h"

void sdt_file_size_text(uint64_t bytes, char *out, size_t size)
{
    if (bytes < 1024)
        sdt_c_snprintf(out, size, "%llu bytes", (unsigned long long)bytes);
    else if (bytes < ((uint64_t)1 << 20))
        sdt_c_snprintf(out, size, "%.1f KiB", (double)bytes / 1024.0);
    else if (bytes < ((uint64_t)1 << 30))
        sdt_c_snprintf(out, size, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    else
        sdt_c_snprintf(out, size, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

int sdt_file_open_regular(const char *path, const char *what, uint64_t *size, sdt_error *error)
{
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        sdt_fail(error, sdt_error_code_from_errno(e), "%s: cannot open the %s (%s)", path, what, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        sdt_fail(error, SDT_ERR_IO, "%s: cannot read the %s (%s)", path, what, strerror(e));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the %s is %s, not a regular file; sdtrain reads only regular files, so "
                 "replace it with the file itself or remove it",
                 path, what, kind_of(st.st_mode));
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if (size) *size = (uint64_t)st.st_size;
    return fd;
}

static bool over_limit(const char *path, const char *what, uint64_t bytes, size_t limit, bool at_least,
                       sdt_error *error)
{
    char have[32], most[32];
    sdt_file_size_text(bytes, have, sizeof have);
    sdt_file_size_text(limit, most, sizeof most);
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: the %s is %s%s, over the limit of %s for it; check that this is the "
                    "right file, or make it smaller",
                    path, what, at_least ? "at least " : "", have, most);
}

bool sdt_file_read_all(const char *path, const char *what, size_t limit, char **data, size_t *size, sdt_error *error)
{
    *data = NULL;
    *size = 0;
    uint64_t st_size = 0;
    int fd = sdt_file_open_regular(path, what, &st_size, error);
    if (fd < 0) return false;
    if (st_size > limit) {
        close(fd);
        return over_limit(path, what, st_size, limit, false, error);
    }
    /* Read to EOF, not to the size fstat gave: the file may change while it is read, and one
     * byte past the limit is enough to refuse it. */
    size_t cap = (size_t)st_size + 1, n = 0;
    char *buf = malloc(cap + 1);
    bool ok = buf != NULL;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory reading the %s", path, what);
    while (ok) {
        if (n == cap) {
            size_t grown = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            char *bigger = grown > cap ? realloc(buf, grown + 1) : NULL;
            if (!bigger) {
                ok = grown > cap
                         ? sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory reading the %s", path, what)
                         : over_limit(path, what, n, limit, true, error);
                break;
            }
            buf = bigger;
            cap = grown;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            ok = sdt_fail(error, sdt_error_code_from_errno(e), "%s: cannot read the %s (%s)", path, what, strerror(e));
        } else if (got == 0) {
            break;
        } else {
            n += (size_t)got;
            if (n > limit) ok = over_limit(path, what, n, limit, true, error);
        }
    }
    close(fd);
    if (!ok) {
        free(buf);
        return false;
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return true;
}
