/* fuzz_checkpoint.c - libFuzzer target for checkpoint loading and key mapping: any bytes as a
 * single-file LDM checkpoint, or as one part of a diffusers folder (the first byte chooses:
 * 0 single file, 1 unet/, 2 text_encoder/, 3 vae/), through sdt_weights_open (layout and key
 * mapping), each part's config detection, and sd_model_load on the CPU backend. Every key the
 * detected config needs must then be present with its shape; a refusal explains itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "sd_config_detect.h"
#include "sd_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const layouts[] = {
    "ckpt.safetensors",
    "folder/unet/diffusion_pytorch_model.safetensors",
    "folder/text_encoder/model.safetensors",
    "folder/vae/diffusion_pytorch_model.fp16.safetensors",
};

static sdt_backend *cpu;

static bool require_param(void *user, const sdt_param_info *p)
{
    sdt_error error = {0};
    if (!sdt_weights_require(user, p->key, p->ndim, p->shape, &error)) abort();
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int layout = data[0] % 4;
    char *folder = fuzz_path("folder");
    fuzz_remove_tree(folder); /* a folder holds only this input's part */
    char *file = fuzz_write(layouts[layout], data + 1, size - 1);
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(layout ? folder : file, &error);
    if (!w) {
        if (!error.message[0]) abort();
        goto done;
    }
    for (size_t i = 0; i < sdt_weights_count(w); i++)
        if (!sdt_weights_get(w, sdt_weights_key(w, i))) abort(); /* every listed key resolves */
    clip_config clip;
    vae_config vae;
    sdt_unet_config unet;
    sdt_error_clear(&error);
    if (!clip_config_detect(w, &clip, &error) && !error.message[0]) abort();
    sdt_error_clear(&error);
    if (!vae_config_detect(w, &vae, &error) && !error.message[0]) abort();
    sdt_error_clear(&error);
    if (!sdt_unet_config_detect(w, &unet, &error) && !error.message[0]) abort();
    sd_config cfg;
    sdt_error_clear(&error);
    if (sd_config_detect(w, &cfg, &error)) {
        if (!sd_params(&cfg, require_param, w, &error)) abort();
        if (!cpu) cpu = sdt_backend_cpu_create(1);
        sd_model m;
        sdt_error_clear(&error);
        if (sd_model_load(&m, w, cpu, &error))
            sd_model_free(&m);
        else if (!error.message[0])
            abort();
    } else if (!error.message[0]) {
        abort();
    }
    sdt_weights_close(w);
done:
    g_free(file);
    g_free(folder);
    return 0;
}
