/* image_io.h - reading and resizing images with stb (the only place stb's code lives).
 *
 * stb_image reads PNG, JPEG, BMP, TGA, GIF (first frame), PSD (composite),
 * HDR, PIC and PNM; libwebp reads WebP (webp_io.h, an animation's first frame).
 * stb's implementations are compiled static inside image_io.c, so no other
 * library in the process can clash with them.
 */
#ifndef SDT_IMAGE_IO_H
#define SDT_IMAGE_IO_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sdt_image_header {
    int width, height;
    int channels; /* as stored: 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA */
} sdt_image_header;

/* Reads only the header (no pixel allocation). false + error for an empty,
 * unreadable or unrecognised file. */
bool sdt_image_probe(const char *path, sdt_image_header *h, sdt_error *error);

/* Decodes to 8-bit pixels with want_channels (3 or 4) interleaved. Refuses
 * images over max_pixels from the header, before any pixel allocation.
 * A JPEG's, PNG's or WebP's EXIF orientation is applied (exif_orientation.h), so
 * *width x *height is the turned size: the probed header's, swapped for
 * orientations 5..8. Free the result with free(). */
uint8_t *sdt_image_decode(const char *path, int want_channels, int64_t max_pixels, int *width, int *height,
                          sdt_error *error);

/* Resizes one or more interleaved float channels with a Catmull-Rom (bicubic)
 * filter and clamped edges, close to PIL's BICUBIC. false on allocation failure. */
bool sdt_image_resize_f32(const float *in, int in_w, int in_h, int channels, float *out, int out_w, int out_h);

/* The same for interleaved 8-bit channels, rounding like PIL does on 8-bit images. */
bool sdt_image_resize_u8(const uint8_t *in, int in_w, int in_h, int channels, uint8_t *out, int out_w, int out_h);

#endif
