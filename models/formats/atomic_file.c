/* atomic_file.c - temp file + fsync + rename; see atomic_file.h. */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "write_fault.h"

/* The umask, read without setting it: umask(2) can only be read by changing it, which would
 * race with the host's other threads creating files. */
static mode_t process_umask(void)
{
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return mask;
    char line[256];
    unsigned int value;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &value) == 1) {
            mask = (mode_t)value;
            break;
        }
    fclose(f);
    return mask;
}

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
        sdt_fail(error, SDT_ERR_IO,
                 "%s: cannot create a file in its folder (%s); check that the folder exists and is writable", path,
                 strerror(errno));
        f->tmp_path[0] = 0;
        return false;
    }
    /* mkstemp makes 0600; saved outputs should be readable like any other file. */
    (void)fchmod(fd, 0666 & ~process_umask());
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        sdt_fail(error, sdt_error_code_from_errno(errno), "%s: cannot open the temp file for writing (%s)", path,
                 strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        f->tmp_path[0] = 0;
        return false;
    }
    FILE *full = sdt_write_fault_disk_full(path) ? fopen(SDT_WRITE_FAULT_DEVICE, "wb") : NULL;
    if (full) { /* the test build's full disk: the temp file stays empty, every write fails with ENOSPC */
        fclose(f->fp);
        f->fp = full;
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
        sdt_fail(
            error, SDT_ERR_IO,
            "%s: writing failed (%s); the previous file, if any, is unchanged; free disk space or choose another folder",
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
        sdt_fail(
            error, SDT_ERR_IO,
            "%s: writing failed (%s); the previous file, if any, is unchanged; free disk space or choose another folder",
            path, strerror(errno));
        sdt_atomic_abort(&f);
        return false;
    }
    return sdt_atomic_commit(&f, error);
}

bool sdt_atomic_is_temp_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 12 || memcmp(name + n - 11, ".tmp-", 5) != 0) return false;
    for (size_t i = n - 6; i < n; i++) /* mkstemp's alphabet */
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
              (name[i] >= '0' && name[i] <= '9')))
            return false;
    return true;
}

/* Removes the temp files in folder whose names start with prefix (every one when prefix is ""). */
static int remove_temps(const char *folder, const char *prefix)
{
    DIR *d = opendir(folder);
    if (!d) return 0;
    int removed = 0;
    size_t np = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (!sdt_atomic_is_temp_name(e->d_name) || strncmp(e->d_name, prefix, np) != 0) continue;
        if (np && n != np + 11) continue; /* exactly "<prefix>.tmp-XXXXXX" */
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", folder, e->d_name) < (int)sizeof path && unlink(path) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int sdt_atomic_remove_stale(const char *path)
{
    char buf[4096], base[4096];
    snprintf(buf, sizeof buf, "%s", path);
    snprintf(base, sizeof base, "%s", path);
    const char *slash = strrchr(path, '/');
    return remove_temps(slash ? dirname(buf) : ".", slash ? slash + 1 : base);
}

int sdt_atomic_remove_stale_in(const char *folder)
{
    return remove_temps(folder, "");
}
