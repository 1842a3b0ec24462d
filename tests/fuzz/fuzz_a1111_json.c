/* fuzz_a1111_json.c - libFuzzer target: any bytes as the JSON of an A1111 card (the text
 * inside the sd-ti-embedding chunk, after base64). What parses must write back as JSON
 * (with, for SDXL, sdtrain's info chunk) that parses to the same embedding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ti/embedding_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_error error = {0};
    sdt_embedding e;
    if (!sdt_embedding_from_a1111_json((const char *)data, size, "fuzz.png", "fallback", &e, &error)) {
        if (!error.message[0]) abort();
        return 0;
    }
    if (!e.name || !e.vectors || e.n_vectors < 1 || e.dim < 1) abort();
    char *json = sdt_embedding_a1111_json(&e);
    if (json) { /* NULL only for non-finite vectors */
        sdt_embedding back;
        if (!sdt_embedding_from_a1111_json(json, strlen(json), "again", "fallback", &back, &error)) abort();
        char *info = sdt_embedding_card_info_json(&e); /* an SDXL card keeps its name and step beside the data */
        if (info && !sdt_embedding_apply_card_info(info, strlen(info), &back)) abort();
        free(info);
        if (back.n_vectors != e.n_vectors || back.dim != e.dim || strcmp(back.name, e.name) != 0 || back.step != e.step)
            abort();
        if (memcmp(back.vectors, e.vectors, sizeof(float) * (size_t)e.n_vectors * (size_t)e.dim) != 0) abort();
        sdt_embedding_free(&back);
        free(json);
    } else if (sdt_embedding_is_finite(&e)) {
        abort();
    }
    sdt_embedding_free(&e);
    return 0;
}
