/* file_read.h - the one way the plugin opens and reads the files a user names.
 *
 * A FIFO named as a caption would block open() and read() forever, and a symlink to /dev/zero
 * would be read until memory runs out. So a file is opened with O_NONBLOCK (a FIFO's open
 * returns at once) and fstat'ed on the open descriptor (no race with a rename): only a regular
 * file is read, and never more than the caller's limit. Text inputs (captions, templates,
 * configs, tokenizer files) and the readers of binary files (images, model files, states)
 * all open through here, so none of them can hang or balloon.
 */
#ifndef SDT_MODELS_FILE_READ_H
#define SDT_MODELS_FILE_READ_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDT_FILE_LIMIT_TEXT ((size_t)1 << 20)        /* a caption, a template, a config: 1 MiB */
#define SDT_FILE_LIMIT_LARGE_TEXT ((size_t)64 << 20) /* a tokenizer's vocabulary, a shard index */

/* A read-only descriptor (O_CLOEXEC) of path when it is a regular file, else -1 and a sentence
 * naming path as `what` ("caption file") and what it is instead (FIFO, device, folder).
 * *size (may be NULL) gets the file's size. The descriptor is blocking again on return. */
int sdt_file_open_regular(const char *path, const char *what, uint64_t *size, sdt_error *error);

/* The whole of a regular file of at most limit bytes, malloc'd with a NUL after the last byte
 * (so text can be used as a C string; *size excludes the NUL). Over the limit: false and a
 * sentence naming the file, its size and the limit. */
bool sdt_file_read_all(const char *path, const char *what, size_t limit, char **data, size_t *size, sdt_error *error);

/* "1.5 MiB", "200 bytes": a size for a sentence (locale-independent). */
void sdt_file_size_text(uint64_t bytes, char *out, size_t size);

#endif
