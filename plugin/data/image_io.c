/* image_io.c - stb_image / stb_image_resize compiled in, privately; see image_io.h. */
#include "data/image_io.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/exif_orientation.h"
#include "data/webp_io.h"
#include "file_read.h"

/* stb is third-party code: keep our warning flags for our code only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wshift-negative-value"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#define STBI_NO_LINEAR_WARNINGS
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include <stb_image.h>
#define STB_IMAGE_RESIZE_STATIC
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb_image_resize.h>
#pragma GCC diagnostic pop
/* stb declares thread-local setters that it never defines when STB_IMAGE_STATIC;
 * GCC reports that at the end of the file, so this one stays off here. */
#pragma GCC diagnostic ignored "-Wunused-function"

/* The format a file's first bytes claim (NULL: none that stb reads; TGA has no signature). */
static const char *format_from_magic(const uint8_t *b, size_t n)
{
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return "PNG";
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return "JPEG";
    if (n >= 4 && memcmp(b, "GIF8", 4) == 0) return "GIF";
    if (n >= 2 && memcmp(b, "BM", 2) == 0) return "BMP";
    if (n >= 4 && memcmp(b, "8BPS", 4) == 0) return "PSD";
    if (n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return "PNM";
    return NULL;
}

/* Why stb failed, as the decoder of the file's own format says it, or NULL. stb tries its
 * decoders in turn and one that rejects the signature leaves its reason behind ("Not a PNG" for a
 * truncated JPEG), so a reason that does not name the format is not that file's. */
static const char *decoder_reason(const char *format)
{
    const char *why = stbi_failure_reason();
    if (!why || !format) return why;
    bool general = strstr(why, "memory") || strstr(why, "large");
    bool own = strstr(why, format) || (strcmp(format, "PNM") == 0 && strstr(why, "PPM"));
    return general || own ? why : NULL;
}

/* "<path>: the JPEG could not be read (<decoder's reason>); the file is truncated or corrupt: ..." */
static bool fail_unreadable(sdt_error *error, const char *path, const uint8_t *head, size_t n_head, const char *doing)
{
    const char *format = format_from_magic(head, n_head), *why = decoder_reason(format);
    if (!format)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: not an image that can be %s (%s); the file is corrupt or of an "
                        "unsupported type",
                        path, doing, why ? why : "unknown format");
    if (!why)
        return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                        "%s: the %s is truncated or corrupt (it cannot be %s); replace or "
                        "remove the file",
                        path, format, doing);
    return sdt_fail(error, SDT_ERR_BAD_FORMAT,
                    "%s: the %s cannot be %s (%s); the file is truncated or corrupt: replace "
                    "or remove it",
                    path, format, doing, why);
}

/* A regular, non-empty file opened for reading (never a FIFO or a device: file_read.h). */
static bool check_nonempty_file(const char *path, FILE **fp, sdt_error *error)
{
    uint64_t size = 0;
    int fd = sdt_file_open_regular(path, "image", &size, error);
    if (fd < 0) return false;
    if (size == 0) {
        close(fd);
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the file is empty (0 bytes); replace or remove it", path);
        return false;
    }
    *fp = fdopen(fd, "rb");
    if (!*fp) {
        int e = errno;
        close(fd);
        sdt_fail(error, sdt_error_code_from_errno(e), "%s: cannot open the file (%s)", path, strerror(e));
        return false;
    }
    return true;
}

/* stb_image refuses PNG headers above 2^30 bytes of pixels as "unknown type";
 * reading the IHDR ourselves lets such files be refused for their size, by name. */
static bool png_header_size(FILE *fp, sdt_image_header *h)
{
    unsigned char b[26];
    rewind(fp);
    if (fread(b, 1, sizeof(b), fp) != sizeof(b) || memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4))
        return false;
    uint32_t w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    uint32_t hh = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    if (w == 0 || hh == 0 || w > INT32_MAX || hh > INT32_MAX) return false;
    h->width = (int)w;
    h->height = (int)hh;
    h->channels = b[25] == 6 || b[25] == 4 ? (b[25] == 6 ? 4 : 2) : 3;
    return true;
}

/* The whole file in memory: stb decodes it and the EXIF parser reads it, from
 * one read. stb takes the length as an int. */
static uint8_t *read_whole_file(const char *path, size_t *size, sdt_error *error)
{
    char *bytes = NULL;
    if (!sdt_file_read_all(path, "image", INT_MAX, &bytes, size, error)) return NULL;
    if (*size == 0) {
        free(bytes);
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the file is empty (0 bytes); replace or remove it", path);
        return NULL;
    }
    return (uint8_t *)bytes;
}

/* stb grows its IDAT buffer to whatever a chunk's length field says (up to 1 GiB) before it
 * looks for the bytes, so a 100-byte file could ask for 2 GiB. Every chunk must lie inside the
 * file; a PNG whose chunks do not is truncated or corrupt, and is named so before stb runs.
 * Returns NULL when the chunks fit, else the reason. */
static const char *png_chunks_outside_file(const uint8_t *bytes, size_t n_bytes)
{
    if (n_bytes < 8 || memcmp(bytes, "\x89PNG\r\n\x1a\n", 8) != 0) return NULL; /* not a PNG */
    size_t at = 8;
    while (at < n_bytes) {
        if (n_bytes - at < 12) return "a chunk is cut off at the end of the file";
        uint32_t len =
            (uint32_t)bytes[at] << 24 | (uint32_t)bytes[at + 1] << 16 | (uint32_t)bytes[at + 2] << 8 | bytes[at + 3];
        if ((uint64_t)len + 12 > n_bytes - at) return "a chunk's length field runs past the end of the file";
        if (memcmp(bytes + at + 4, "IEND", 4) == 0) return NULL;
        at += (size_t)len + 12;
    }
    return NULL; /* no IEND: stb decides */
}

bool sdt_image_probe(const char *path, sdt_image_header *h, sdt_error *error)
{
    FILE *fp;
    memset(h, 0, sizeof(*h));
    if (!check_nonempty_file(path, &fp, error)) return false;
    uint8_t head[64];
    size_t n_head = fread(head, 1, sizeof head, fp);
    rewind(fp);
    char webp_why[160] = "";
    int ok = sdt_webp_is(head, n_head)
                 ? sdt_webp_header(head, n_head, &h->width, &h->height, &h->channels, webp_why, sizeof webp_why)
                 : stbi_info_from_file(fp, &h->width, &h->height, &h->channels);
    if (!ok && !webp_why[0]) ok = png_header_size(fp, h);
    fclose(fp);
    if (!ok || h->width <= 0 || h->height <= 0) {
        if (webp_why[0])
            sdt_fail(error, SDT_ERR_BAD_FORMAT,
                     "%s: not an image that can be read (%s); the file is corrupt or of an "
                     "unsupported type",
                     path, webp_why);
        else
            fail_unreadable(error, path, head, n_head, "read");
        return false;
    }
    return true;
}

uint8_t *sdt_image_decode(const char *path, int want_channels, int64_t max_pixels, int *width, int *height,
                          sdt_error *error)
{
    sdt_image_header h;
    if (!sdt_image_probe(path, &h, error)) return NULL;
    if ((int64_t)h.width * h.height > max_pixels) {
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the image is %dx%d pixels, over the limit of %lld pixels; scale it down before training", path,
                 h.width, h.height, (long long)max_pixels);
        return NULL;
    }
    size_t n_bytes;
    uint8_t *bytes = read_whole_file(path, &n_bytes, error);
    if (!bytes) return NULL;
    /* Debian's stb converts a 16-bit PNM's channels with its 8-bit routine and then reads past
     * the result: refuse those files before decoding (16-bit PNG and PSD are converted right). */
    if (n_bytes >= 2 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6') &&
        stbi_is_16_bit_from_memory(bytes, (int)n_bytes)) {
        free(bytes);
        sdt_fail(error, SDT_ERR_UNSUPPORTED,
                 "%s: 16-bit PGM/PPM images are not supported; save it as PNG (8 or 16 bits)", path);
        return NULL;
    }
    const char *png_why = png_chunks_outside_file(bytes, n_bytes);
    if (png_why) {
        free(bytes);
        sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: the PNG could not be decoded (%s); the file is corrupt or truncated",
                 path, png_why);
        return NULL;
    }
    int w = 0, hh = 0, comp = 0, orientation = SDT_EXIF_NORMAL;
    uint8_t *pixels;
    if (sdt_webp_is(bytes, n_bytes)) {
        char why[160];
        pixels = sdt_webp_decode(bytes, n_bytes, want_channels, &w, &hh, &orientation, why, sizeof why);
        if (!pixels) sdt_fail(error, SDT_ERR_BAD_FORMAT, "%s: %s", path, why);
    } else {
        pixels = stbi_load_from_memory(bytes, (int)n_bytes, &w, &hh, &comp, want_channels);
        if (pixels) orientation = sdt_exif_orientation_from_file(bytes, n_bytes);
        if (!pixels) fail_unreadable(error, path, bytes, n_bytes, "decoded");
    }
    free(bytes);
    if (!pixels) return NULL;
    if (w != h.width || hh != h.height) { /* header and data disagree: treat as corrupt */
        free(pixels);                     /* stb allocates with malloc, as webp_io does */
        sdt_fail(error, SDT_ERR_BAD_FORMAT,
                 "%s: the image header and its data disagree on the size; the file is corrupt", path);
        return NULL;
    }
    if (orientation != SDT_EXIF_NORMAL) { /* as A1111's ImageOps.exif_transpose, before any resize */
        uint8_t *turned = sdt_exif_orient_pixels(pixels, w, hh, want_channels, orientation, &w, &hh);
        free(pixels); /* stb allocates with malloc, as webp_io does */
        if (!turned) {
            sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "%s: out of memory while turning the image by its EXIF orientation",
                     path);
            return NULL;
        }
        pixels = turned;
    }
    *width = w;
    *height = hh;
    return pixels;
}

bool sdt_image_resize_f32(const float *in, int in_w, int in_h, int channels, float *out, int out_w, int out_h)
{
    if (in_w == out_w && in_h == out_h) {
        memcpy(out, in, (size_t)in_w * (size_t)in_h * (size_t)channels * sizeof(float));
        return true;
    }
    return stbir_resize_float_generic(in, in_w, in_h, 0, out, out_w, out_h, 0, channels, STBIR_ALPHA_CHANNEL_NONE, 0,
                                      STBIR_EDGE_CLAMP, STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_LINEAR, NULL) != 0;
}

bool sdt_image_resize_u8(const uint8_t *in, int in_w, int in_h, int channels, uint8_t *out, int out_w, int out_h)
{
    if (in_w == out_w && in_h == out_h) {
        memcpy(out, in, (size_t)in_w * (size_t)in_h * (size_t)channels);
        return true;
    }
    return stbir_resize_uint8_generic(in, in_w, in_h, 0, out, out_w, out_h, 0, channels, STBIR_ALPHA_CHANNEL_NONE, 0,
                                      STBIR_EDGE_CLAMP, STBIR_FILTER_CATMULLROM, STBIR_COLORSPACE_LINEAR, NULL) != 0;
}
