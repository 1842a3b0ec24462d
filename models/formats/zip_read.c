/* zip_read.c - see zip_read.h. Layout per PKWARE's APPNOTE 6.3 (sections 4.3, 4.5.3). */
#include "zip_read.h"

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_EOCD64_LOCATOR 0x07064b50u
#define EOCD_SIZE 22
#define EOCD64_LOCATOR_SIZE 20
#define EOCD64_SIZE 56
#define CENTRAL_SIZE 46
#define LOCAL_SIZE 30

struct sdt_zip {
    const uint8_t *buf;
    size_t size;
    char *origin;
    GArray *entries;     /* sdt_zip_entry */
    GHashTable *by_name; /* name -> index + 1 */
};

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* True when [off, off + len) lies inside the buffer. */
static bool in_range(const sdt_zip *z, uint64_t off, uint64_t len)
{
    return off <= z->size && len <= z->size - off;
}

bool sdt_zip_sniff(const void *buf, size_t size)
{
    return size >= 4 && rd32(buf) == SIG_LOCAL;
}

#define FIX_DAMAGED "the file is truncated or damaged: copy or download it again"
#define FIX_UNSUPPORTED "re-save the file with torch.save, or convert it to .safetensors"

static bool fail_fix(const sdt_zip *z, sdt_error *error, const char *what, const char *fix)
{
    return sdt_fail(error, strcmp(fix, FIX_UNSUPPORTED) == 0 ? SDT_ERR_UNSUPPORTED : SDT_ERR_BAD_FORMAT, "%s: %s; %s",
                    z->origin, what, fix);
}

static bool fail(const sdt_zip *z, sdt_error *error, const char *what)
{
    return fail_fix(z, error, what, FIX_DAMAGED);
}

/* Finds the end-of-central-directory record, scanning back over a comment of at most 64 KiB. */
static bool find_eocd(const sdt_zip *z, uint64_t *pos)
{
    if (z->size < EOCD_SIZE) return false;
    uint64_t last = z->size - EOCD_SIZE, stop = last > 0xFFFF ? last - 0xFFFF : 0;
    for (uint64_t p = last + 1; p-- > stop;) {
        if (rd32(z->buf + p) == SIG_EOCD && p + EOCD_SIZE + rd16(z->buf + p + 20) == z->size) {
            *pos = p;
            return true;
        }
    }
    return false;
}

/* Reads the central directory's position and entry count, through the zip64 records where used. */
static bool central_directory(const sdt_zip *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count, sdt_error *error)
{
    uint64_t eocd;
    if (!find_eocd(z, &eocd)) return fail(z, error, "the zip archive has no end-of-central-directory record");
    const uint8_t *e = z->buf + eocd;
    if (rd16(e + 4) != 0 || rd16(e + 6) != 0)
        return fail_fix(z, error, "the zip archive spans several disks, which is not supported", FIX_UNSUPPORTED);
    *count = rd16(e + 10);
    *cd_size = rd32(e + 12);
    *cd_off = rd32(e + 16);
    if (*count == 0xFFFF || *cd_size == 0xFFFFFFFFu || *cd_off == 0xFFFFFFFFu) {
        if (eocd < EOCD64_LOCATOR_SIZE || rd32(z->buf + eocd - EOCD64_LOCATOR_SIZE) != SIG_EOCD64_LOCATOR)
            return fail(z, error, "the zip archive needs zip64 records but has no zip64 locator");
        uint64_t e64 = rd64(z->buf + eocd - EOCD64_LOCATOR_SIZE + 8);
        if (!in_range(z, e64, EOCD64_SIZE) || rd32(z->buf + e64) != SIG_EOCD64)
            return fail(z, error, "the zip64 end-of-central-directory record is missing or out of range");
        *count = rd64(z->buf + e64 + 32);
        *cd_size = rd64(z->buf + e64 + 40);
        *cd_off = rd64(z->buf + e64 + 48);
    }
    if (!in_range(z, *cd_off, *cd_size)) return fail(z, error, "the zip central directory lies outside the file");
    if (*count > SDT_ZIP_MAX_ENTRIES || *count > *cd_size / CENTRAL_SIZE)
        return fail(z, error, "the zip archive's entry count does not fit its central directory");
    return true;
}

/* Applies a central entry's zip64 extra field (0x0001) to the fields saturated at 0xFFFFFFFF. */
static bool apply_zip64_extra(const uint8_t *extra, size_t len, uint64_t *size, uint64_t *comp, uint64_t *local)
{
    size_t p = 0;
    while (p + 4 <= len) {
        uint16_t id = rd16(extra + p), n = rd16(extra + p + 2);
        if (p + 4 + n > len) return false;
        if (id == 0x0001) {
            const uint8_t *f = extra + p + 4;
            size_t q = 0;
            uint64_t *fields[3] = {size, comp, local};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xFFFFFFFFu) continue;
                if (q + 8 > n) return false;
                *fields[i] = rd64(f + q);
                q += 8;
            }
            return true;
        }
        p += 4 + (size_t)n;
    }
    return *size != 0xFFFFFFFFu && *comp != 0xFFFFFFFFu && *local != 0xFFFFFFFFu;
}

static bool read_entry(sdt_zip *z, uint64_t *pos, uint64_t cd_end, sdt_error *error)
{
    if (*pos + CENTRAL_SIZE > cd_end || rd32(z->buf + *pos) != SIG_CENTRAL)
        return fail(z, error, "a zip central directory entry is missing or malformed");
    const uint8_t *c = z->buf + *pos;
    uint16_t flags = rd16(c + 8), method = rd16(c + 10);
    uint16_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    uint64_t total = (uint64_t)CENTRAL_SIZE + name_len + extra_len + comment_len;
    if (*pos + total > cd_end) return fail(z, error, "a zip central directory entry runs past the directory");
    char *name = g_strndup((const char *)c + CENTRAL_SIZE, name_len);
    sdt_zip_entry e = {.name = name, .crc32 = rd32(c + 16), .comp_size = rd32(c + 20), .size = rd32(c + 24)};
    uint64_t local = rd32(c + 42);
    bool ok = false;
    const char *fix = FIX_DAMAGED;
    char why[320];
    if (strlen(name) != name_len || name_len == 0)
        snprintf(why, sizeof why, "a zip entry has an empty name or a NUL in it");
    else if (!apply_zip64_extra(c + CENTRAL_SIZE + name_len, extra_len, &e.size, &e.comp_size, &local))
        snprintf(why, sizeof why, "zip entry '%.120s' has a malformed zip64 extra field", name);
    else if (flags & 1) {
        snprintf(why, sizeof why, "zip entry '%.120s' is encrypted, which is not supported", name);
        fix = FIX_UNSUPPORTED;
    } else if (method != 0 && method != 8) {
        snprintf(why, sizeof why,
                 "zip entry '%.120s' uses compression method %u; only stored and deflate are supported", name, method);
        fix = FIX_UNSUPPORTED;
    } else if (method == 0 && e.comp_size != e.size)
        snprintf(why, sizeof why, "stored zip entry '%.120s' has different compressed and uncompressed sizes", name);
    else if (!in_range(z, local, LOCAL_SIZE) || rd32(z->buf + local) != SIG_LOCAL)
        snprintf(why, sizeof why, "zip entry '%.120s' points to a local header outside the file", name);
    else {
        const uint8_t *l = z->buf + local;
        uint64_t lname = rd16(l + 26), lextra = rd16(l + 28);
        e.data_offset = local + LOCAL_SIZE + lname + lextra;
        if (lname != name_len || !in_range(z, local + LOCAL_SIZE, lname) || memcmp(l + LOCAL_SIZE, name, lname) != 0)
            snprintf(why, sizeof why, "zip entry '%.120s' has a local header naming another file", name);
        else if (!in_range(z, e.data_offset, e.comp_size))
            snprintf(why, sizeof why, "zip entry '%.120s' (%llu bytes) runs past the end of the file", name,
                     (unsigned long long)e.comp_size);
        else if (g_hash_table_contains(z->by_name, name))
            snprintf(why, sizeof why, "zip entry '%.120s' appears twice", name);
        else
            ok = true;
    }
    if (!ok) {
        g_free(name);
        return fail_fix(z, error, why, fix);
    }
    e.deflated = method == 8;
    g_array_append_val(z->entries, e);
    g_hash_table_insert(z->by_name, name, GSIZE_TO_POINTER(z->entries->len));
    *pos += total;
    return true;
}

sdt_zip *sdt_zip_open_memory(const void *buf, size_t size, const char *origin, sdt_error *error)
{
    sdt_zip *z = g_new0(sdt_zip, 1);
    z->buf = buf;
    z->size = size;
    z->origin = g_strdup(origin);
    z->entries = g_array_new(FALSE, FALSE, sizeof(sdt_zip_entry));
    z->by_name = g_hash_table_new(g_str_hash, g_str_equal);
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    bool ok = central_directory(z, &cd_off, &cd_size, &count, error);
    uint64_t pos = cd_off;
    for (uint64_t i = 0; ok && i < count; i++) ok = read_entry(z, &pos, cd_off + cd_size, error);
    if (!ok) {
        sdt_zip_close(z);
        return NULL;
    }
    return z;
}

void sdt_zip_close(sdt_zip *z)
{
    if (!z) return;
    for (guint i = 0; i < z->entries->len; i++) g_free((char *)g_array_index(z->entries, sdt_zip_entry, i).name);
    g_array_free(z->entries, TRUE);
    g_hash_table_destroy(z->by_name);
    g_free(z->origin);
    g_free(z);
}

size_t sdt_zip_count(const sdt_zip *z)
{
    return z->entries->len;
}

const sdt_zip_entry *sdt_zip_at(const sdt_zip *z, size_t i)
{
    return i < z->entries->len ? &g_array_index(z->entries, sdt_zip_entry, i) : NULL;
}

const sdt_zip_entry *sdt_zip_find(const sdt_zip *z, const char *name)
{
    size_t i = GPOINTER_TO_SIZE(g_hash_table_lookup(z->by_name, name));
    return i ? &g_array_index(z->entries, sdt_zip_entry, i - 1) : NULL;
}

uint32_t sdt_zip_crc32(const void *data, uint64_t n)
{
    const uint8_t *p = data; /* zlib's crc32 takes uInt lengths: big entries go in pieces */
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

static bool inflate_entry(const sdt_zip *z, const sdt_zip_entry *e, void **out, sdt_error *error)
{
    if (e->size > SDT_ZIP_MAX_INFLATED) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: zip entry '%s' inflates to %llu bytes, more than the %llu allowed for a compressed "
                 "entry; re-save the file with torch.save (which stores data uncompressed)",
                 z->origin, e->name, (unsigned long long)e->size, (unsigned long long)SDT_ZIP_MAX_INFLATED);
        return false;
    }
    uint8_t *dst = g_try_malloc(e->size ? e->size : 1);
    if (!dst) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory inflating zip entry '%s' (%llu bytes)", z->origin,
                 e->name, (unsigned long long)e->size);
        return false;
    }
    z_stream s;
    memset(&s, 0, sizeof s);
    int rc = inflateInit2(&s, -MAX_WBITS);
    s.next_in = (Bytef *)(z->buf + e->data_offset);
    s.avail_in = (uInt)e->comp_size;
    s.next_out = dst;
    s.avail_out = (uInt)e->size;
    if (rc == Z_OK) rc = e->comp_size > UINT32_MAX ? Z_DATA_ERROR : inflate(&s, Z_FINISH);
    bool ok = rc == Z_STREAM_END && s.total_out == e->size;
    inflateEnd(&s);
    if (!ok) {
        g_free(dst);
        return fail(z, error, "a deflated zip entry does not inflate to its recorded size");
    }
    *out = dst;
    return true;
}

bool sdt_zip_read(const sdt_zip *z, const sdt_zip_entry *e, const void **data, void **owned, sdt_error *error)
{
    *owned = NULL;
    *data = NULL;
    if (e->deflated) {
        if (!inflate_entry(z, e, owned, error)) return false;
        *data = *owned;
    } else {
        *data = z->buf + e->data_offset;
    }
    if (sdt_zip_crc32(*data, e->size) != e->crc32) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: zip entry '%s' fails its CRC check; the file is damaged: copy or download it again", z->origin,
                 e->name);
        g_free(*owned);
        *owned = NULL;
        *data = NULL;
        return false;
    }
    return true;
}
