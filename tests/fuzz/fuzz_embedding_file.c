/* fuzz_embedding_file.c - libFuzzer target: any bytes as an embedding file, read by
 * sdt_embedding_load (safetensors: emb_params, single-tensor, SDXL clip_l/clip_g, with
 * F16/BF16/F64 converted; PNG cards). What loads must be consistent, and must survive a
 * save and a load unchanged (the vectors bit for bit, the SDXL split, the step). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ti/embedding_file.h"
#include "fuzz_file.h"

/* What the loader accepts (embedding_file.c: more than 75 vectors only for inspection). */
#define LOADED_VECTORS_MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const sdt_embedding *e)
{
    sdt_error error = {0};
    char *copy_path = fuzz_path("copy.safetensors");
    if (sdt_embedding_save_safetensors(e, copy_path, true, &error)) {
        sdt_embedding back;
        if (!sdt_embedding_load(copy_path, &back, NULL, &error)) abort();
        if (back.n_vectors != e->n_vectors || back.dim != e->dim || back.clip_l_dim != e->clip_l_dim ||
            back.step != e->step)
            abort();
        if (memcmp(back.vectors, e->vectors, sizeof(float) * (size_t)e->n_vectors * (size_t)e->dim) != 0) abort();
        sdt_embedding_free(&back);
    } else if (!error.message[0]) {
        abort();
    }
    g_free(copy_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = fuzz_write("input", data, size);
    sdt_error error = {0};
    sdt_embedding e;
    sdt_embedding_format format;
    if (!sdt_embedding_load(path, &e, &format, &error)) {
        if (!error.message[0]) abort();
        g_free(path);
        return 0;
    }
    if (format == SDT_EMBEDDING_FORMAT_UNKNOWN || !e.name || !e.vectors) abort();
    if (e.n_vectors < 1 || e.n_vectors > LOADED_VECTORS_MAX || e.dim < 1 || e.dim > SDT_EMBEDDING_MAX_DIM) abort();
    if (e.clip_l_dim < 0 || e.clip_l_dim >= e.dim) abort();
    volatile float last = e.vectors[(size_t)e.n_vectors * (size_t)e.dim - 1];
    (void)last;
    if (sdt_embedding_is_finite(&e)) check_round_trip(&e);
    sdt_embedding_free(&e);
    g_free(path);
    return 0;
}
