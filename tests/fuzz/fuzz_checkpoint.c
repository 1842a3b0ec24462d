/* fuzz_checkpoint.c - libFuzzer target for checkpoint loading and key mapping: any bytes as a
 * single-file checkpoint (LDM, or SAI's SD3 / BFL's Flux layouts, which the weights layer maps through
 * transformer_keys.h), or as one part of a diffusers folder (the first byte chooses: 0 single file, 1 unet/,
 * 2 text_encoder/, 3 vae/, 4 an SD3 folder's transformer/), through sdt_weights_open (layout and key
 * mapping), each part's config detection, the transformer families' detection and missing-part sentence,
 * and sd_model_load on the CPU backend. Every key the detected config needs must then be present with its
 * shape; a refusal explains itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "sd_config_detect.h"
#include "sd_model.h"
#include "transformer_detect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const layouts[] = {
    "ckpt.safetensors",
    "folder/unet/diffusion_pytorch_model.safetensors",
    "folder/text_encoder/model.safetensors",
    "folder/vae/diffusion_pytorch_model.fp16.safetensors",
    "folder/transformer/diffusion_pytorch_model.safetensors",
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
    int layout = data[0] % 5;
    char *folder = fuzz_path("folder");
    fuzz_remove_tree(folder); /* a folder holds only this input's part */
    char *file = fuzz_write(layouts[layout], data + 1, size - 1);
    static const char sd3_config[] = "{\"_class_name\": \"SD3Transformer2DModel\"}";
    if (layout == 4)
        g_free(fuzz_write("folder/transformer/config.json", (const uint8_t *)sd3_config, sizeof sd3_config - 1));
    sdt_error error = {0};
    sdt_weights *w = sdt_weights_open(layout ? folder : file, &error);
    if (!w) {
        if (!error.message[0]) abort();
        goto done;
    }
    for (size_t i = 0; i < sdt_weights_count(w); i++)
        if (!sdt_weights_get(w, sdt_weights_key(w, i)) || !sdt_weights_source(w, sdt_weights_key(w, i)))
            abort(); /* every listed key resolves, and says where it came from */
    sdt_tf_info tf;
    if (sdt_tf_detect(w, &tf)) {
        char *missing = sdt_tf_missing_sentence(&tf, "f");
        bool lacks = false;
        for (int p = SDT_TF_CLIP_L; p < SDT_TF_PART_COUNT; p++)
            lacks |= sdt_tf_family_needs(tf.family, (sdt_tf_part)p) && !tf.has[p];
        if (lacks != (missing != NULL) || !tf.layout || !tf.variant[0]) abort();
        g_free(missing);
    }
    (void)sdt_tf_lone_part(w);
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
