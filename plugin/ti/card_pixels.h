/* card_pixels.h - A1111's copy of the embedding hidden in the card's pixels (image_embedding.py).
 *
 * The zlib-compressed JSON is split into low and high nibbles, each laid out as
 * an h x W x 3 block (cyclically repeated to fill it), XORed with an LCG
 * keystream in the low nibble, decorated in the high nibble, and placed left
 * and right of the picture with one black column between:
 *   [low block][black][picture][black][high block]
 * It survives when metadata is stripped. Readers crop black borders, find the
 * columns whose low nibbles are all zero, and undo the steps.
 */
#ifndef SDT_CARD_PIXELS_H
#define SDT_CARD_PIXELS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The first n values of A1111's keystream (LCG a=1664525, c=1013904223, seed 0, value % 255). */
void sdt_card_keystream(uint8_t *out, size_t n);

/* Builds the card picture around rgb (w x h RGB). *out (free()) is out_w x h RGB. */
bool sdt_card_pixels_compose(const char *json, const float *style, int n_style, const uint8_t *rgb, int w, int h,
                             uint8_t **out, int *out_w, sdt_error *error);

/* Recovers the JSON from a card picture (w x h RGB); NULL + error when it holds none. */
char *sdt_card_pixels_extract(const uint8_t *rgb, int w, int h, size_t *len, sdt_error *error);

/* Inflates one zlib stream (trailing bytes ignored), at most max_out bytes.
 * Newly allocated and NUL-terminated; NULL when damaged or too large. */
char *sdt_inflate_limited(const uint8_t *data, size_t size, size_t max_out, size_t *out_len);

#endif
