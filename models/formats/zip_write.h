/* zip_write.h - writing zip archives the way torch.save does.
 *
 * Stored (uncompressed) entries only, each entry's data starting on a
 * 64-byte boundary (padding in an extra field "FB", as torch's writer does,
 * so a reader can map storages in place), CRC-32 and sizes in the local
 * headers (no data descriptors), zip64 records where an offset or size
 * reaches 4 GiB. Entries are streamed to the caller's FILE (an atomic temp
 * file, models/formats/atomic_file.h); data is written straight from memory.
 */
#ifndef SDT_MODELS_ZIP_WRITE_H
#define SDT_MODELS_ZIP_WRITE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sdt_error.h"

#define SDT_ZIP_ALIGN 64

typedef struct sdt_zip_writer sdt_zip_writer;

/* Starts an archive at fp's current position (which must be 0). what names the file in sentences. */
sdt_zip_writer *sdt_zip_writer_new(FILE *fp, const char *what);
/* Lowers the size/offset from which zip64 records are written (default: 4 GiB - 1, where
 * the classic fields overflow). Tests use 0 to exercise every zip64 record on a small archive. */
void sdt_zip_writer_set_zip64_threshold(sdt_zip_writer *z, uint64_t bytes);
/* Adds one stored entry of size bytes. */
bool sdt_zip_writer_add(sdt_zip_writer *z, const char *name, const void *data, uint64_t size, sdt_error *error);
/* Writes the central directory and frees z (whatever the result). */
bool sdt_zip_writer_finish(sdt_zip_writer *z, sdt_error *error);
/* Frees z without finishing (the caller discards the file). */
void sdt_zip_writer_free(sdt_zip_writer *z);

#endif
