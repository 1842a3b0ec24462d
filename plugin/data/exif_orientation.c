/* exif_orientation.c - find the EXIF Orientation tag and apply it; see exif_orientation.h. */
#include "data/exif_orientation.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EXIF_TAG_ORIENTATION 0x0112
#define TIFF_TYPE_SHORT 3
#define TIFF_TYPE_LONG 4
#define TIFF_ENTRY_BYTES 12

/* A byte range with the TIFF byte order; every read checks the range. */
typedef struct tiff_view {
    const uint8_t *p;
    size_t n;
    bool big_endian;
} tiff_view;

static bool tiff_u16(const tiff_view *t, size_t off, uint32_t *v)
{
    if (off > t->n || t->n - off < 2) return false;
    const uint8_t *b = t->p + off;
    *v = t->big_endian ? (uint32_t)b[0] << 8 | b[1] : (uint32_t)b[1] << 8 | b[0];
    return true;
}

static bool tiff_u32(const tiff_view *t, size_t off, uint32_t *v)
{
    uint32_t hi, lo;
    if (!tiff_u16(t, off, t->big_endian ? &hi : &lo) || !tiff_u16(t, off + 2, t->big_endian ? &lo : &hi)) return false;
    *v = hi << 16 | lo;
    return true;
}

/* The value of one IFD entry known to be Orientation; 0 when not a single
 * integer in 1..8 (PIL then leaves the image as it is too). */
static int orientation_entry_value(const tiff_view *t, size_t entry)
{
    uint32_t type, count, value;
    if (!tiff_u16(t, entry + 2, &type) || !tiff_u32(t, entry + 4, &count) || count != 1) return 0;
    bool ok = type == TIFF_TYPE_SHORT  ? tiff_u16(t, entry + 8, &value)
              : type == TIFF_TYPE_LONG ? tiff_u32(t, entry + 8, &value)
                                       : false;
    return ok && value >= SDT_EXIF_NORMAL && value <= SDT_EXIF_ROTATE_270_CW ? (int)value : 0;
}

int sdt_exif_orientation_from_tiff(const uint8_t *tiff, size_t size)
{
    if (!tiff || size < 8) return SDT_EXIF_NORMAL;
    tiff_view t = {tiff, size, false};
    if (!memcmp(tiff, "MM", 2))
        t.big_endian = true;
    else if (memcmp(tiff, "II", 2))
        return SDT_EXIF_NORMAL;
    uint32_t magic, ifd0, n_entries;
    if (!tiff_u16(&t, 2, &magic) || magic != 42 || !tiff_u32(&t, 4, &ifd0) || !tiff_u16(&t, ifd0, &n_entries))
        return SDT_EXIF_NORMAL;
    /* Only IFD0 holds Orientation, so no IFD chain is followed (no loops to guard). */
    size_t first = (size_t)ifd0 + 2;
    if ((size - first) / TIFF_ENTRY_BYTES < n_entries) return SDT_EXIF_NORMAL; /* entries run past the end */
    int found = SDT_EXIF_NORMAL;
    for (uint32_t i = 0; i < n_entries; i++) {
        size_t entry = first + (size_t)i * TIFF_ENTRY_BYTES;
        uint32_t tag;
        if (!tiff_u16(&t, entry, &tag) || tag != EXIF_TAG_ORIENTATION) continue;
        int v = orientation_entry_value(&t, entry);
        found = v ? v : SDT_EXIF_NORMAL; /* PIL keeps the last of repeated tags */
    }
    return found;
}

/* JPEG: markers from SOI up to the scan; the first APP1 that starts "Exif\0"
 * is the one PIL keeps, and its TIFF data follows "Exif\0\0". */
static int orientation_in_jpeg(const uint8_t *d, size_t n)
{
    size_t pos = 2;
    while (n - pos >= 4) {
        if (d[pos] != 0xFF) return SDT_EXIF_NORMAL; /* lost sync: malformed */
        uint8_t marker = d[pos + 1];
        if (marker == 0xFF) { /* fill byte before a marker */
            pos++;
            continue;
        }
        if (marker == 0xDA || marker == 0xD9) return SDT_EXIF_NORMAL; /* scan data or end: no more headers */
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {   /* markers without a length */
            pos += 2;
            continue;
        }
        size_t len = (size_t)d[pos + 2] << 8 | d[pos + 3]; /* counts its own 2 bytes */
        if (len < 2 || len > n - pos - 2) return SDT_EXIF_NORMAL;
        const uint8_t *seg = d + pos + 4;
        size_t seg_n = len - 2;
        if (marker == 0xE1 && seg_n >= 6 && !memcmp(seg, "Exif\0", 5))
            return sdt_exif_orientation_from_tiff(seg + 6, seg_n - 6);
        pos += 2 + len;
    }
    return SDT_EXIF_NORMAL;
}

static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* PNG: chunks (length, type, data, CRC) up to IEND; eXIf holds the TIFF data
 * directly. CRCs are not checked, as stb_image does not check them either. */
static int orientation_in_png(const uint8_t *d, size_t n)
{
    size_t pos = 8;
    while (n - pos >= 12) {
        size_t len = be32(d + pos);
        const uint8_t *type = d + pos + 4;
        if (len > n - pos - 12) return SDT_EXIF_NORMAL;
        if (!memcmp(type, "eXIf", 4)) return sdt_exif_orientation_from_tiff(d + pos + 8, len);
        if (!memcmp(type, "IEND", 4)) return SDT_EXIF_NORMAL;
        pos += 12 + len;
    }
    return SDT_EXIF_NORMAL;
}

int sdt_exif_orientation_from_file(const uint8_t *data, size_t size)
{
    if (!data) return SDT_EXIF_NORMAL;
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) return orientation_in_jpeg(data, size);
    if (size >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return orientation_in_png(data, size);
    return SDT_EXIF_NORMAL;
}

/* How output pixel (x, y) finds its source: optionally swap the axes (5..8),
 * then mirror the source x and/or y. Index = orientation - 1. */
static const struct {
    bool swap, mirror_x, mirror_y;
} orientation_maps[8] = {
    {false, false, false}, /* 1 */
    {false, true, false},  /* 2 */
    {false, true, true},   /* 3 */
    {false, false, true},  /* 4 */
    {true, false, false},  /* 5 */
    {true, false, true},   /* 6 */
    {true, true, true},    /* 7 */
    {true, true, false},   /* 8 */
};

uint8_t *sdt_exif_orient_pixels(const uint8_t *in, int w, int h, int channels, int orientation, int *out_w, int *out_h)
{
    if (orientation < SDT_EXIF_NORMAL || orientation > SDT_EXIF_ROTATE_270_CW) orientation = SDT_EXIF_NORMAL;
    size_t px = (size_t)channels;
    uint8_t *out = malloc((size_t)w * (size_t)h * px);
    if (!out) return NULL;
    bool swap = orientation_maps[orientation - 1].swap;
    bool mirror_x = orientation_maps[orientation - 1].mirror_x, mirror_y = orientation_maps[orientation - 1].mirror_y;
    int ow = swap ? h : w, oh = swap ? w : h;
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx = swap ? y : x, sy = swap ? x : y;
            if (mirror_x) sx = w - 1 - sx;
            if (mirror_y) sy = h - 1 - sy;
            memcpy(out + ((size_t)y * (size_t)ow + (size_t)x) * px, in + ((size_t)sy * (size_t)w + (size_t)sx) * px,
                   px);
        }
    *out_w = ow;
    *out_h = oh;
    return out;
}
