/* path_util.h - file-name helpers shared by captions and embedding files. */
#ifndef SDT_PATH_UTIL_H
#define SDT_PATH_UTIL_H

/* File name without folder and last extension, as Python's
 * os.path.splitext(os.path.basename(p))[0] (leading dots are not an extension).
 * Newly allocated (free()); NULL when out of memory. */
char *sdt_path_stem(const char *path);

#endif
