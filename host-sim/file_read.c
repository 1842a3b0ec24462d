/* file_read.c - regular files only, read with a limit; see file_read.h. */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_number.h"

static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISSOCK(mode)) return "a socket";
    return "something else";
}

static char *size_text(guint64 bytes)
{
    c_number_text n;
    if (bytes < 1024) return g_strdup_printf("%" G_GUINT64_FORMAT " bytes", bytes);
    if (bytes < ((guint64)1 << 20)) return g_strdup_printf("%s KiB", c_number(&n, "%.1f", (double)bytes / 1024.0));
    if (bytes < ((guint64)1 << 30)) return g_strdup_printf("%s MiB", c_number(&n, "%.1f", (double)bytes / 1048576.0));
    return g_strdup_printf("%s GiB", c_number(&n, "%.1f", (double)bytes / 1073741824.0));
}

static gboolean over_limit(guint64 bytes, gsize limit, gboolean at_least, char **reason)
{
    char *have = size_text(bytes), *most = size_text(limit);
    *reason = g_strdup_printf("it is %s%s, over the limit of %s", at_least ? "at least " : "", have, most);
    g_free(have);
    g_free(most);
    return FALSE;
}

gboolean host_read_file(const char *path, gsize limit, gchar **data, gsize *size, char **reason)
{
    *data = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        *reason = g_strdup(g_strerror(errno));
        return FALSE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *reason = g_strdup(g_strerror(errno));
        close(fd);
        return FALSE;
    }
    if (!S_ISREG(st.st_mode)) {
        *reason = g_strdup_printf("it is %s, not a regular file", kind_of(st.st_mode));
        close(fd);
        return FALSE;
    }
    if ((guint64)st.st_size > limit) {
        close(fd);
        return over_limit((guint64)st.st_size, limit, FALSE, reason);
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* Read to EOF, at most one byte past the limit: the file may grow while it is read. */
    GByteArray *buf = g_byte_array_sized_new((guint)st.st_size + 1);
    guint8 chunk[65536];
    gboolean ok = TRUE;
    for (;;) {
        gsize room = limit + 1 - buf->len;
        ssize_t got = read(fd, chunk, room < sizeof chunk ? room : sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            *reason = g_strdup(g_strerror(errno));
            ok = FALSE;
            break;
        }
        if (got == 0) break;
        g_byte_array_append(buf, chunk, (guint)got);
        if (buf->len > limit) {
            ok = over_limit(buf->len, limit, TRUE, reason);
            break;
        }
    }
    close(fd);
    if (!ok) {
        g_byte_array_unref(buf);
        return FALSE;
    }
    *size = buf->len;
    g_byte_array_append(buf, (const guint8 *)"", 1);
    *data = (gchar *)g_byte_array_free(buf, FALSE);
    return TRUE;
}
