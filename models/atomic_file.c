/* atomic_file.c - temp file + fsync + rename; see atomic_file.h. */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool sdt_atomic_begin(sdt_atomic_file *f, const char *path, sdt_error *error)
{
    memset(f, 0, sizeof(*f));
    if (strlen(path) + 16 >= sizeof(f->path)) {
        sdt_fail(error, SDT_ERR_IO, "%s: the path is too long to save to; choose a shorter output path", path);
        return false;
    }
    snprintf(f->path, sizeof(f->path), "%s", path);
    snprintf(f->tmp_path, sizeof(f->tmp_path), "%s.tmp-XXXXXX", path);
    int fd = mkstemp(f->tmp_path);
    if (fd < 0) {
        sdt_fail(error, SDT_ERR_IO, "%s: cannot create a file in its folder (%s); check that the folder exists and is writable",
                 path, strerror(errno));
        f->tmp_path[0] = 0;
        return false;
    }
    /* mkstemp makes 0600; saved outputs should be readable like any other file. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        sdt_fail(error, sdt_error_code_from_errno(errno), "%s: cannot open the temp file for writing (%s)", path, strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        f->tmp_path[0] = 0;
        return false;
    }
    return true;
}

static void fsync_parent_folder(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    int dfd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

bool sdt_atomic_commit(sdt_atomic_file *f, sdt_error *error)
{
    if (!f->fp) {
        sdt_fail(error, SDT_ERR_IO, "%s: nothing to save (the file was not opened)", f->path);
        return false;
    }
    bool ok = !ferror(f->fp) && fflush(f->fp) == 0 && fsync(fileno(f->fp)) == 0;
    int saved_errno = errno;
    if (fclose(f->fp) != 0 && ok) {
        ok = false;
        saved_errno = errno;
    }
    f->fp = NULL;
    if (!ok) {
        sdt_fail(error, SDT_ERR_IO, "%s: writing failed (%s); the previous file, if any, is unchanged. Free disk space or choose another folder",
                 f->path, strerror(saved_errno ? saved_errno : EIO));
        unlink(f->tmp_path);
        f->tmp_path[0] = 0;
        return false;
    }
    if (rename(f->tmp_path, f->path) != 0) {
        sdt_fail(error, SDT_ERR_IO, "%s: cannot replace the file (%s); the previous file, if any, is unchanged",
                 f->path, strerror(errno));
        unlink(f->tmp_path);
        f->tmp_path[0] = 0;
        return false;
    }
    f->tmp_path[0] = 0;
    fsync_parent_folder(f->path);
    return true;
}

void sdt_atomic_abort(sdt_atomic_file *f)
{
    if (f->fp) {
        fclose(f->fp);
        f->fp = NULL;
    }
    if (f->tmp_path[0]) {
        unlink(f->tmp_path);
        f->tmp_path[0] = 0;
    }
}

bool sdt_atomic_write(const char *path, const void *data, size_t size, sdt_error *error)
{
    sdt_atomic_file f;
    if (!sdt_atomic_begin(&f, path, error)) return false;
    if (size && fwrite(data, 1, size, f.fp) != size) {
        sdt_fail(error, SDT_ERR_IO, "%s: writing failed (%s); the previous file, if any, is unchanged. Free disk space or choose another folder",
                 path, strerror(errno));
        sdt_atomic_abort(&f);
        return false;
    }
    return sdt_atomic_commit(&f, error);
}
