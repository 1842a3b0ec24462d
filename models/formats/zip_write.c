/* zip_write.c - see zip_write.h. Record layouts per PKWARE's APPNOTE 6.3 (4.3.7, 4.3.12, 4.3.14-16, 4.5.3). */
#include "zip_write.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "zip_read.h"

#define ZIP64_LIMIT 0xFFFFFFFFull

typedef struct written_entry {
    char *name;
    uint32_t crc;
    uint64_t size, offset;
} written_entry;

struct sdt_zip_writer {
    FILE *fp;
    char *what;
    uint64_t pos;
    GArray *entries; /* written_entry */
    bool failed;
    uint64_t zip64_at; /* sizes and offsets from here on use zip64 records (4 GiB - 1 unless lowered) */
};

static void put16(GByteArray *b, uint16_t v)
{
    uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    g_byte_array_append(b, p, 2);
}

static void put32(GByteArray *b, uint32_t v)
{
    put16(b, (uint16_t)v);
    put16(b, (uint16_t)(v >> 16));
}

static void put64(GByteArray *b, uint64_t v)
{
    put32(b, (uint32_t)v);
    put32(b, (uint32_t)(v >> 32));
}

static uint32_t sat32(const sdt_zip_writer *z, uint64_t v)
{
    return v >= z->zip64_at ? 0xFFFFFFFFu : (uint32_t)v;
}

static bool write_bytes(sdt_zip_writer *z, const void *p, uint64_t n, sdt_error *error)
{
    const uint8_t *b = p;
    while (n) {
        size_t chunk = n > ((uint64_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
        if (fwrite(b, 1, chunk, z->fp) != chunk) {
            sdt_fail(error, sdt_error_code_from_errno(errno), "%s: writing failed (%s); check free disk space", z->what,
                     strerror(errno));
            z->failed = true;
            return false;
        }
        b += chunk;
        n -= chunk;
        z->pos += chunk;
    }
    return true;
}

sdt_zip_writer *sdt_zip_writer_new(FILE *fp, const char *what)
{
    sdt_zip_writer *z = g_new0(sdt_zip_writer, 1);
    z->fp = fp;
    z->what = g_strdup(what);
    z->entries = g_array_new(FALSE, FALSE, sizeof(written_entry));
    z->zip64_at = ZIP64_LIMIT;
    return z;
}

void sdt_zip_writer_set_zip64_threshold(sdt_zip_writer *z, uint64_t bytes)
{
    z->zip64_at = bytes < ZIP64_LIMIT ? bytes : ZIP64_LIMIT;
}

void sdt_zip_writer_free(sdt_zip_writer *z)
{
    if (!z) return;
    for (guint i = 0; i < z->entries->len; i++) g_free(g_array_index(z->entries, written_entry, i).name);
    g_array_free(z->entries, TRUE);
    g_free(z->what);
    g_free(z);
}

bool sdt_zip_writer_add(sdt_zip_writer *z, const char *name, const void *data, uint64_t size, sdt_error *error)
{
    size_t name_len = strlen(name);
    if (z->failed || name_len == 0 || name_len > 0xFFFF) {
        sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, "%s: zip entry name '%.80s' is empty or too long", z->what, name);
        return false;
    }
    written_entry e = {g_strdup(name), sdt_zip_crc32(data, size), size, z->pos};
    bool zip64 = size >= z->zip64_at;
    GByteArray *h = g_byte_array_new();
    put32(h, 0x04034b50u);
    put16(h, zip64 ? 45 : 20);
    put16(h, 0x0800); /* names are UTF-8 */
    put16(h, 0);      /* stored */
    put16(h, 0);      /* time */
    put16(h, 0x21);   /* date: 1980-01-01 */
    put32(h, e.crc);
    put32(h, zip64 ? 0xFFFFFFFFu : (uint32_t)size);
    put32(h, zip64 ? 0xFFFFFFFFu : (uint32_t)size);
    put16(h, (uint16_t)name_len);
    /* Extra: zip64 sizes when needed, then "FB" padding up to the next 64-byte boundary. */
    uint64_t fixed = z->pos + 30 + name_len + (zip64 ? 20 : 0);
    uint64_t pad = (SDT_ZIP_ALIGN - (fixed + 4) % SDT_ZIP_ALIGN) % SDT_ZIP_ALIGN;
    put16(h, (uint16_t)((zip64 ? 20 : 0) + 4 + pad));
    g_byte_array_append(h, (const guint8 *)name, (guint)name_len);
    if (zip64) {
        put16(h, 0x0001);
        put16(h, 16);
        put64(h, size);
        put64(h, size);
    }
    put16(h, 0x4246); /* "FB" */
    put16(h, (uint16_t)pad);
    for (uint64_t i = 0; i < pad; i++) g_byte_array_append(h, (const guint8 *)"Z", 1);
    bool ok = write_bytes(z, h->data, h->len, error) && write_bytes(z, data, size, error);
    g_byte_array_free(h, TRUE);
    if (!ok) {
        g_free(e.name);
        return false;
    }
    g_array_append_val(z->entries, e);
    return true;
}

bool sdt_zip_writer_finish(sdt_zip_writer *z, sdt_error *error)
{
    if (z->failed) {
        sdt_fail(error, SDT_ERR_IO, "%s: an earlier write failed; nothing was saved", z->what);
        sdt_zip_writer_free(z);
        return false;
    }
    GByteArray *cd = g_byte_array_new();
    for (guint i = 0; i < z->entries->len; i++) {
        const written_entry *e = &g_array_index(z->entries, written_entry, i);
        bool big_size = e->size >= z->zip64_at, big_off = e->offset >= z->zip64_at;
        uint16_t extra = (uint16_t)((big_size || big_off) ? 4 + (big_size ? 16 : 0) + (big_off ? 8 : 0) : 0);
        put32(cd, 0x02014b50u);
        put16(cd, extra ? 45 : 20); /* made by */
        put16(cd, extra ? 45 : 20); /* needed */
        put16(cd, 0x0800);
        put16(cd, 0);
        put16(cd, 0);
        put16(cd, 0x21);
        put32(cd, e->crc);
        put32(cd, sat32(z, e->size));
        put32(cd, sat32(z, e->size));
        put16(cd, (uint16_t)strlen(e->name));
        put16(cd, extra);
        put16(cd, 0); /* comment */
        put16(cd, 0); /* disk */
        put16(cd, 0); /* internal attributes */
        put32(cd, 0); /* external attributes */
        put32(cd, sat32(z, e->offset));
        g_byte_array_append(cd, (const guint8 *)e->name, (guint)strlen(e->name));
        if (extra) {
            put16(cd, 0x0001);
            put16(cd, (uint16_t)(extra - 4));
            if (big_size) {
                put64(cd, e->size);
                put64(cd, e->size);
            }
            if (big_off) put64(cd, e->offset);
        }
    }
    uint64_t cd_off = z->pos, cd_size = cd->len, count = z->entries->len;
    bool zip64 = cd_off >= z->zip64_at || cd_size >= z->zip64_at || count >= 0xFFFF;
    if (zip64) {
        uint64_t eocd64 = cd_off + cd_size;
        put32(cd, 0x06064b50u);
        put64(cd, 44); /* size of the rest of this record */
        put16(cd, 45);
        put16(cd, 45);
        put32(cd, 0);
        put32(cd, 0);
        put64(cd, count);
        put64(cd, count);
        put64(cd, cd_size);
        put64(cd, cd_off);
        put32(cd, 0x07064b50u); /* locator */
        put32(cd, 0);
        put64(cd, eocd64);
        put32(cd, 1);
    }
    put32(cd, 0x06054b50u);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, zip64 ? 0xFFFF : (uint16_t)count);
    put16(cd, zip64 ? 0xFFFF : (uint16_t)count);
    put32(cd, sat32(z, cd_size));
    put32(cd, sat32(z, cd_off));
    put16(cd, 0);
    bool ok = write_bytes(z, cd->data, cd->len, error);
    g_byte_array_free(cd, TRUE);
    sdt_zip_writer_free(z);
    return ok;
}
