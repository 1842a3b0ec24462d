/* zip_read.h - reading the zip archives PyTorch writes (torch.save since 1.6).
 *
 * The archive is a buffer already in memory (usually a read-only mmap); the
 * reader never copies stored entries: their data is a pointer into it. Only
 * what torch and common zip tools write is accepted: stored and deflate
 * entries, zip64 sizes and offsets (torch writes them for files over 4 GiB),
 * no encryption, no multi-disk archives. Every offset and size is checked
 * against the buffer before use; the central directory is the truth for
 * sizes (torch's local headers leave them zero and use data descriptors).
 *
 * Errors (kernels/sdt_error.h): false or NULL with the status and one sentence
 * naming the file, the entry and the fix.
 */
#ifndef SDT_MODELS_ZIP_READ_H
#define SDT_MODELS_ZIP_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdt_error.h"

/* More entries than this is refused (an SD checkpoint has about 1,200). */
#define SDT_ZIP_MAX_ENTRIES 1000000
/* A deflated entry inflates to at most this (torch stores its data uncompressed). */
#define SDT_ZIP_MAX_INFLATED ((uint64_t)1 << 31)

typedef struct sdt_zip_entry {
    const char *name; /* NUL-terminated copy */
    bool deflated;    /* false: stored */
    uint32_t crc32;
    uint64_t comp_size;
    uint64_t size;        /* uncompressed */
    uint64_t data_offset; /* of the (compressed) bytes in the buffer, validated */
} sdt_zip_entry;

typedef struct sdt_zip sdt_zip;

/* True when buf starts like a zip archive (a local file header). */
bool sdt_zip_sniff(const void *buf, size_t size);

/* Indexes an archive in memory (not copied: buf must outlive the result).
 * origin names the file in error sentences. */
sdt_zip *sdt_zip_open_memory(const void *buf, size_t size, const char *origin, sdt_error *error);
void sdt_zip_close(sdt_zip *z);

size_t sdt_zip_count(const sdt_zip *z);
const sdt_zip_entry *sdt_zip_at(const sdt_zip *z, size_t i);
/* NULL when no entry has that exact name. */
const sdt_zip_entry *sdt_zip_find(const sdt_zip *z, const char *name);

/* An entry's bytes, CRC checked. A stored entry is a pointer into the buffer and
 * *owned is set NULL; a deflated one is inflated into memory returned in *owned
 * (g_free it). */
bool sdt_zip_read(const sdt_zip *z, const sdt_zip_entry *e, const void **data, void **owned, sdt_error *error);

/* The zip CRC-32 of n bytes (shared with zip_write.c). */
uint32_t sdt_zip_crc32(const void *data, uint64_t n);

#endif
