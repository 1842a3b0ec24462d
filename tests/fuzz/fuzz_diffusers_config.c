/* fuzz_diffusers_config.c - libFuzzer target: any bytes as a diffusers folder's JSON files
 * (models/checkpoints/diffusers_config.h). The input is split at NUL bytes into up to five parts:
 * model_index.json, unet/config.json, text_encoder/config.json, vae/config.json and
 * scheduler/scheduler_config.json, in that order (a part not present: the file is absent).
 * They are applied to the tiny model's detected configuration as sd_config_detect applies
 * them. Each is either taken, leaving a configuration the models accept (heads that divide
 * their widths, a known activation, a positive scaling factor), or refused with a sentence
 * that names a file of the folder. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "diffusers_config.h"
#include "fuzz_file.h"
#include "sd_config_detect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const files[5] = {"model_index.json", "unet/config.json", "text_encoder/config.json",
                                     "vae/config.json", "scheduler/scheduler_config.json"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    for (int i = 0; i < 5; i++) {
        const uint8_t *cut = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        if (p >= end) {
            char *path = fuzz_path(files[i]);
            g_remove(path);
            g_free(path);
            continue;
        }
        const uint8_t *stop = cut ? cut : end;
        g_free(fuzz_write(files[i], p, (size_t)(stop - p)));
        p = cut ? cut + 1 : end;
    }
    sd_config c = sd_config_preset(SD_FAMILY_TINY);
    sdt_error error = {0};
    bool ok = sdt_diffusers_index_check(fuzz_dir(), &error) && sdt_diffusers_config_apply(fuzz_dir(), &c, &error);
    if (!ok) {
        if (error.code == SDT_ERR_OK || !error.message[0] || !strstr(error.message, fuzz_dir())) abort();
        return 0;
    }
    if (error.code != SDT_ERR_OK) abort();
    sdt_error check = {0};
    if (!clip_config_check(&c.clip, &check) || !sdt_unet_config_validate(&c.unet, &check)) abort();
    if (c.clip.act != SDT_ACT_GELU && c.clip.act != SDT_ACT_QUICK_GELU) abort();
    if (!(c.vae.scaling > 0) || !isfinite(c.vae.scaling) || !(c.clip.ln_eps > 0)) abort();
    for (int l = 0; l < c.unet.num_levels; l++) {
        int ch = c.unet.model_channels * c.unet.channel_mult[l], heads = sdt_unet_config_heads(&c.unet, ch);
        if (heads <= 0 || ch % heads) abort();
    }
    return 0;
}
