/* png_out.c - see png_out.h. */
#include "png_out.h"

#include <string.h>

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

static void put_u32(GByteArray *out, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    g_byte_array_append(out, b, 4);
}

static void put_chunk(GByteArray *out, const char *type, const uint8_t *data, size_t n)
{
    put_u32(out, (uint32_t)n);
    size_t at = out->len;
    g_byte_array_append(out, (const uint8_t *)type, 4);
    if (n) g_byte_array_append(out, data, (guint)n);
    put_u32(out, crc_update(0xffffffffu, out->data + at, n + 4) ^ 0xffffffffu);
}

/* The zlib stream of raw (filter byte 0 + row) scanlines in stored blocks. */
static GByteArray *zlib_stored(const uint8_t *rgb, uint32_t width, uint32_t height)
{
    size_t row = (size_t)width * 3 + 1, total = row * height;
    uint8_t *raw = g_malloc(total);
    for (uint32_t y = 0; y < height; y++) {
        raw[y * row] = 0;
        memcpy(raw + y * row + 1, rgb + (size_t)y * width * 3, row - 1);
    }
    GByteArray *z = g_byte_array_new();
    const uint8_t header[2] = {0x78, 0x01};
    g_byte_array_append(z, header, 2);
    uint32_t a = 1, b = 0;
    for (size_t at = 0; at < total || total == 0;) {
        size_t n = total - at > 65535 ? 65535 : total - at;
        uint8_t block[5] = {(uint8_t)(at + n == total), (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)~n, (uint8_t)(~n >> 8)};
        g_byte_array_append(z, block, 5);
        g_byte_array_append(z, raw + at, (guint)n);
        for (size_t i = 0; i < n; i++) a = (a + raw[at + i]) % 65521u, b = (b + a) % 65521u;
        at += n;
        if (total == 0) break;
    }
    put_u32(z, (b << 16) | a);
    g_free(raw);
    return z;
}

gboolean png_out_write_rgb(const char *path, const uint8_t *rgb, uint32_t width, uint32_t height, GError **error)
{
    crc_init();
    GByteArray *out = g_byte_array_new();
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    g_byte_array_append(out, signature, 8);
    uint8_t ihdr[13] = {0};
    for (int i = 0; i < 4; i++)
        ihdr[i] = (uint8_t)(width >> (24 - 8 * i)), ihdr[4 + i] = (uint8_t)(height >> (24 - 8 * i));
    ihdr[8] = 8; /* bit depth */
    ihdr[9] = 2; /* RGB */
    put_chunk(out, "IHDR", ihdr, sizeof ihdr);
    GByteArray *z = zlib_stored(rgb, width, height);
    put_chunk(out, "IDAT", z->data, z->len);
    g_byte_array_free(z, TRUE);
    put_chunk(out, "IEND", NULL, 0);
    gboolean ok = g_file_set_contents_full(path, (const char *)out->data, out->len,
                                           G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0644, error);
    g_byte_array_free(out, TRUE);
    return ok;
}
