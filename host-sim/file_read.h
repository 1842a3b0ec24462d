/* file_read.h - the one way sdt-host reads a file a user names (a panel file, an output to
 * inspect). Opened with O_NONBLOCK and checked with fstat on the open descriptor, so a FIFO never
 * blocks and a device (/dev/zero) is never read; only a regular file is read, and never more
 * than the caller's limit. (The plugin has its own, models/formats/file_read.h: sdt-host sees only abi/.) */
#ifndef SDT_HOST_FILE_READ_H
#define SDT_HOST_FILE_READ_H

#include <glib.h>

#define HOST_TEXT_FILE_LIMIT ((gsize)1 << 20) /* a panel file: 1 MiB */

/* The whole of a regular file of at most limit bytes, g_malloc'd and NUL-terminated (*size
 * excludes the NUL). On failure FALSE and *reason (g_malloc'd) says why, without the path:
 * "No such file or directory", "it is a named pipe (FIFO), not a regular file",
 * "it is 3.0 MiB, over the limit of 1.0 MiB". */
gboolean host_read_file(const char *path, gsize limit, gchar **data, gsize *size, char **reason);

#endif
