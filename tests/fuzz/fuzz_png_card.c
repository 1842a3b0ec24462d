/* fuzz_png_card.c - libFuzzer target: any bytes as an A1111 PNG embedding card. */
#include <stdint.h>
#include <stdlib.h>

#include "ti/embedding_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_embedding e;
    sdt_error error = {0};
    if (sdt_embedding_png_card_decode(data, size, "fuzz.png", &e, &error)) {
        if (e.n_vectors < 1 || e.dim < 1 || !e.vectors) abort();
        sdt_embedding_free(&e);
    } else if (!error.message[0]) {
        abort();
    }
    return 0;
}
