/* fuzz_safetensors.c - libFuzzer target for the safetensors header parser and
 * validator (models/formats/safetensors.c). Any input must give either a consistent
 * file (every tensor inside the buffer, sizes matching) or an error sentence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_error error = {0};
    error.message[0] = 0;
    sdt_safetensors *st = sdt_st_open_memory(data, size, "fuzz", &error);
    if (!st) {
        if (!error.message[0]) abort(); /* a rejection must explain itself */
        return 0;
    }
    for (size_t i = 0; i < sdt_st_count(st); i++) {
        const sdt_st_entry *e = sdt_st_at(st, i);
        uint64_t numel = 1;
        for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
        if (numel * sdt_st_dtype_size(e->dtype) != e->nbytes) abort();
        if (e->nbytes) {
            /* Touch the first and last byte: out-of-bounds views are caught by ASan. */
            volatile uint8_t first = ((const uint8_t *)e->data)[0], last = ((const uint8_t *)e->data)[e->nbytes - 1];
            (void)first;
            (void)last;
        }
        if (sdt_st_find(st, e->name) != e) abort();
        sdt_tensor t;
        (void)sdt_st_entry_tensor(st, e, &t, &error);
    }
    for (size_t i = 0; i < sdt_st_metadata_count(st); i++)
        if (!sdt_st_metadata_get(st, sdt_st_metadata_key(st, i))) abort();
    sdt_st_close(st);
    return 0;
}
