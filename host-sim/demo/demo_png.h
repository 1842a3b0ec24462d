/* demo_png.h - saves an 8-bit RGB image as PNG, atomically. stb's encoder has its
 * own deflate, so the bytes are the same on every machine for the same pixels. */
#ifndef SDT_DEMO_PNG_H
#define SDT_DEMO_PNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool demo_png_save(const char *path, const uint8_t *rgb, int width, int height, char *err, size_t err_size);

#endif
