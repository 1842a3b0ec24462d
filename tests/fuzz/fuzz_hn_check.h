/* fuzz_hn_check.h - what both hypernetwork-file fuzz targets (fuzz_hn_pt, fuzz_hn_safetensors)
 * check: any bytes, read by one of the loaders, give either a hypernetwork or a sentence. What
 * loads must be a valid config (sdt_hn_config_validate) and must come back from a save in the
 * same format and a load unchanged: the config, the step and checkpoint, every value bit for bit. */
#ifndef SDT_FUZZ_HN_CHECK_H
#define SDT_FUZZ_HN_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "hn/hn_file.h"

typedef sdt_hn *(*fuzz_hn_loader)(const char *path, sdt_backend *be, sdt_error *error);
typedef bool (*fuzz_hn_saver)(const sdt_hn *hn, const char *path, sdt_error *error);

/* One CPU backend for the process (a thread: fuzzing runs several targets at once). */
static sdt_backend *fuzz_hn_backend(void)
{
    static sdt_backend *be;
    if (!be && !(be = sdt_backend_cpu_create(1))) abort();
    return be;
}

static float *fuzz_hn_values(const sdt_hn *hn)
{
    sdt_error error = {0};
    int64_t n = sdt_hn_param_numel(hn);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v || !sdt_hn_download(hn, v, &error)) abort();
    return v;
}

static void fuzz_hn_round_trip(const sdt_hn *hn, const char *copy_name, fuzz_hn_loader load, fuzz_hn_saver save)
{
    sdt_error error = {0};
    char *copy = fuzz_path(copy_name);
    if (!save(hn, copy, &error)) {
        if (!error.message[0]) abort(); /* a refused save explains itself */
        g_free(copy);
        return;
    }
    sdt_hn *back = load(copy, fuzz_hn_backend(), &error);
    if (!back) abort(); /* what sdtrain writes, sdtrain reads */
    if (memcmp(sdt_hn_get_config(back), sdt_hn_get_config(hn), sizeof(sdt_hn_config)) != 0) abort();
    const sdt_hn_info *a = sdt_hn_get_info_const(hn), *b = sdt_hn_get_info_const(back);
    if (a->step != b->step || strcmp(a->sd_checkpoint, b->sd_checkpoint) ||
        strcmp(a->sd_checkpoint_name, b->sd_checkpoint_name))
        abort();
    int64_t n = sdt_hn_param_numel(hn);
    if (sdt_hn_param_numel(back) != n) abort();
    float *x = fuzz_hn_values(hn), *y = fuzz_hn_values(back);
    if (memcmp(x, y, (size_t)n * sizeof *x) != 0) abort();
    free(x), free(y);
    sdt_hn_free(back);
    g_free(copy);
}

static int fuzz_hn_check(const uint8_t *data, size_t size, const char *ext, fuzz_hn_loader load, fuzz_hn_saver save)
{
    char *input = g_strconcat("input", ext, NULL), *copy = g_strconcat("copy", ext, NULL);
    char *path = fuzz_write(input, data, size);
    sdt_error error = {0};
    sdt_hn *hn = load(path, fuzz_hn_backend(), &error);
    if (!hn) {
        if (!error.message[0]) abort(); /* a rejection must explain itself */
    } else {
        if (!sdt_hn_config_validate(sdt_hn_get_config(hn), false, &error)) abort();
        fuzz_hn_round_trip(hn, copy, load, save);
        sdt_hn_free(hn);
    }
    g_free(path), g_free(input), g_free(copy);
    return 0;
}

#endif
