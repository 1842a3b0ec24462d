/* png_write.h - atomic 8-bit RGB PNG files with libpng (previews, embedding cards).
 * Text chunks (keyword + text) ride along, e.g. A1111's sd-ti-embedding. */
#ifndef SDT_DATA_PNG_WRITE_H
#define SDT_DATA_PNG_WRITE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* rgb: w x h interleaved RGB. text_key NULL: no text chunk. Atomic: a failed write
 * leaves the previous file as it was; the error names the file and the cause. */
bool sdt_png_write_rgb(const char *path, const uint8_t *rgb, int w, int h, const char *text_key, const char *text,
                       sdt_error *error);

typedef struct sdt_png_text {
    const char *key, *text;
} sdt_png_text;

/* As sdt_png_write_rgb with n_texts tEXt chunks, in that order, before the picture. */
bool sdt_png_write_rgb_texts(const char *path, const uint8_t *rgb, int w, int h, const sdt_png_text *texts, int n_texts,
                             sdt_error *error);

#endif
