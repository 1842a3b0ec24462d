/* fuzz_image.c - libFuzzer target: any bytes as a dataset image file (stb's decoders
 * behind sdt_image_probe and sdt_image_decode, EXIF orientation applied). A file is
 * either refused with a sentence or decodes to the probed size (turned for EXIF 5..8). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "data/image_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small enough that no input makes the decoder allocate much. */
#define FUZZ_MAX_PIXELS (1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = fuzz_write("image", data, size);
    sdt_error error = {0};
    sdt_image_header h;
    bool probed = sdt_image_probe(path, &h, &error);
    if (!probed) {
        if (!error.message[0]) abort();
    } else if (h.width < 1 || h.height < 1 || h.channels < 1 || h.channels > 4) {
        abort();
    }
    for (int want = 3; want <= 4; want++) {
        int w = 0, hgt = 0;
        sdt_error_clear(&error);
        uint8_t *px = sdt_image_decode(path, want, FUZZ_MAX_PIXELS, &w, &hgt, &error);
        if (!px) {
            if (!error.message[0]) abort();
            continue;
        }
        if (!probed) abort(); /* what decodes must probe */
        bool same = w == h.width && hgt == h.height, turned = w == h.height && hgt == h.width;
        if (!same && !turned) abort();
        if ((int64_t)w * hgt > FUZZ_MAX_PIXELS) abort();
        volatile uint8_t last = px[(size_t)w * hgt * want - 1]; /* ASan: the buffer is whole */
        (void)last;
        free(px);
    }
    g_free(path);
    return 0;
}
