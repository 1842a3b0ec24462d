/* fuzz_torch_file.c - libFuzzer target for the PyTorch file reader (models/formats/torch_file.c, zip_read.c,
 * pickle_read.c). Every input runs twice: as a whole file (zip or legacy layout) and as a bare pickle, since
 * the zip's CRCs keep most mutations from reaching the unpickler. Any input must give either a tree whose
 * every tensor lies inside its storage or an error sentence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_read.h"
#include "torch_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touches every tensor's first and last element (ASan catches views outside the buffer). */
static void walk(sdt_torch_file *f, const sdt_pv *v, int depth)
{
    if (!v || depth > SDT_PV_MAX_DEPTH) abort(); /* the reader promised this bound */
    if (v->kind == SDT_PV_TENSOR) {
        sdt_error error = {0};
        const void *bytes;
        int64_t n = sdt_pv_tensor_numel(v);
        if (sdt_torch_tensor_bytes(f, v, "fuzz", &bytes, &error) && n > 0) {
            size_t el = sdt_st_dtype_size(v->u.t.storage->dtype);
            volatile uint8_t first = ((const uint8_t *)bytes)[0];
            volatile uint8_t last = ((const uint8_t *)bytes)[(size_t)n * el - 1];
            (void)first;
            (void)last;
        }
        sdt_tensor t;
        (void)sdt_torch_tensor(f, v, "fuzz", &t, &error);
        return;
    }
    if (v->kind == SDT_PV_DICT) {
        for (size_t i = 0; i < sdt_pv_len(v); i++) {
            walk(f, sdt_pv_dict_key(v, i), depth + 1);
            walk(f, sdt_pv_dict_value(v, i), depth + 1);
        }
    } else {
        for (size_t i = 0; i < sdt_pv_len(v); i++) walk(f, sdt_pv_item(v, i), depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sdt_error error = {0};
    sdt_error_clear(&error);
    sdt_torch_file *f = sdt_torch_open_memory(data, size, "fuzz", &error);
    if (!f && !error.message[0]) abort(); /* a rejection must explain itself */
    if (f) walk(f, sdt_torch_root(f), 0);
    sdt_torch_close(f);

    sdt_pv_arena *a = sdt_pv_arena_new();
    sdt_pv *root = NULL;
    size_t used = 0;
    sdt_error_clear(&error);
    if (sdt_pickle_load(data, size, a, "fuzz", &root, &used, &error)) {
        if (!root || used > size) abort();
    } else if (!error.message[0]) {
        abort();
    }
    sdt_pv_arena_free(a);
    return 0;
}
