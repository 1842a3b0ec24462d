/* fuzz_template.c - libFuzzer target: any bytes as a template file, then filled and checked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_template t;
    sdt_error error = {0};
    if (!sdt_template_parse((const char *)data, size, "fuzz.txt", &t, &error)) {
        if (!error.message[0]) abort();
        return 0;
    }
    (void)sdt_template_check_for_embedding(&t, "fuzz.txt", &error);
    sdt_data_rng rng = sdt_data_rng_seeded(size);
    for (int i = 0; i < 4 && t.n_lines; i++) {
        int line = sdt_template_pick(&t, &rng);
        if (line < 0 || line >= t.n_lines) abort();
        char *filled = sdt_template_fill(t.lines[line], "tok", "a, [name], b");
        if (!filled || strstr(filled, "[name]") || strstr(filled, "[filewords]")) abort();
        free(filled);
    }
    sdt_template_free(&t);
    return 0;
}
