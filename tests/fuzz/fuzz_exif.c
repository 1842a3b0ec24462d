/* fuzz_exif.c - libFuzzer target: any bytes as an image file's EXIF (JPEG APP1,
 * PNG eXIf) and as a bare TIFF block; the orientation found must turn pixels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/exif_orientation.h"

/* A 3x2 image, each pixel (2 channels) naming its own position, turned by o. */
static void check_turn(int o)
{
    uint8_t px[3 * 2 * 2];
    for (int i = 0; i < 6; i++) px[2 * i] = px[2 * i + 1] = (uint8_t)i;
    int w = 0, h = 0;
    uint8_t *out = sdt_exif_orient_pixels(px, 3, 2, 2, o, &w, &h);
    if (!out) return;
    if (w * h != 6 || (o >= 5 && w != 2)) abort();
    unsigned seen = 0; /* a turn is a permutation: every pixel lands once */
    for (int i = 0; i < 6; i++) seen |= 1u << out[2 * i];
    if (seen != 0x3f) abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int in_file = sdt_exif_orientation_from_file(data, size);
    int in_tiff = sdt_exif_orientation_from_tiff(data, size);
    if (in_file < 1 || in_file > 8 || in_tiff < 1 || in_tiff > 8) abort();
    check_turn(in_file);
    check_turn(in_tiff);
    return 0;
}
