/* data_test_util.h - temp folders and hand-built PNG chunks for the data tests (header only). */
#ifndef SDT_DATA_TEST_UTIL_H
#define SDT_DATA_TEST_UTIL_H

#include <glib.h>
#include <glib/gstdio.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* Removes a folder tree made by a test (files and sub-folders). */
static inline void test_rmtree(const char *path)
{
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        for (const char *n; (n = g_dir_read_name(d));) {
            char *p = g_build_filename(path, n, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
                test_rmtree(p);
            else
                g_unlink(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    g_rmdir(path);
}

static inline void put_be32(GByteArray *a, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    g_byte_array_append(a, b, 4);
}

/* Appends one PNG chunk with its CRC. */
static inline void png_chunk(GByteArray *a, const char *type, const void *data, size_t n)
{
    put_be32(a, (uint32_t)n);
    size_t start = a->len;
    g_byte_array_append(a, (const guint8 *)type, 4);
    if (n) g_byte_array_append(a, data, (guint)n);
    put_be32(a, (uint32_t)crc32(crc32(0L, Z_NULL, 0), a->data + start, (uInt)(n + 4)));
}

/* A PNG file image: signature + IHDR (w x h RGB) + the given IDAT payload + extra chunks + IEND. */
static inline GByteArray *png_with_header(uint32_t w, uint32_t h)
{
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
    uint8_t ihdr[13] = {0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (uint8_t)(w >> (24 - 8 * i));
        ihdr[4 + i] = (uint8_t)(h >> (24 - 8 * i));
    }
    ihdr[8] = 8; /* bit depth */
    ihdr[9] = 2; /* RGB */
    png_chunk(a, "IHDR", ihdr, 13);
    return a;
}

/* A complete, valid w x h RGB PNG of one colour, built by hand (no libpng). */
static inline GByteArray *png_solid(uint32_t w, uint32_t h, uint8_t r, uint8_t g, uint8_t b)
{
    GByteArray *a = png_with_header(w, h);
    size_t row = 1 + (size_t)w * 3, raw_len = row * h;
    uint8_t *raw = g_malloc0(raw_len);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            raw[y * row + 1 + x * 3] = r;
            raw[y * row + 2 + x * 3] = g;
            raw[y * row + 3 + x * 3] = b;
        }
    uLongf zlen = compressBound((uLong)raw_len);
    uint8_t *z = g_malloc(zlen);
    compress(z, &zlen, raw, (uLong)raw_len);
    png_chunk(a, "IDAT", z, zlen);
    g_free(raw);
    g_free(z);
    return a;
}

static inline void png_end(GByteArray *a)
{
    png_chunk(a, "IEND", NULL, 0);
}

#endif
