/* webp_io.h - WebP training images through libwebp (Debian's libwebp-dev).
 *
 * Still images (lossy, lossless, with alpha) decode directly; an animated WebP gives its
 * first frame, as a GIF does. The EXIF orientation of a WebP's EXIF chunk is applied like
 * a JPEG's (PIL's exif_transpose reads it too). image_io.c calls these for files that
 * start with "RIFF....WEBP"; every other format stays with stb_image.
 */
#ifndef SDT_WEBP_IO_H
#define SDT_WEBP_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first bytes of a file (at least 12) say WebP. */
bool sdt_webp_is(const uint8_t *head, size_t n);

/* Size and channels (3, or 4 with alpha) from the first bytes of a WebP file (64 are
 * plenty). false + a reason (no path) when the header is damaged. */
bool sdt_webp_header(const uint8_t *head, size_t n, int *width, int *height, int *channels, char *why, size_t why_size);

/* Decodes the whole file's image (the first frame of an animation) to want_channels
 * (3 or 4) interleaved 8-bit pixels, malloc'd; *orientation gets the EXIF orientation
 * (1..8, 1 when absent). NULL + a reason (no path) when the data is corrupt. */
uint8_t *sdt_webp_decode(const uint8_t *data, size_t n, int want_channels, int *width, int *height, int *orientation,
                         char *why, size_t why_size);

#endif
