/* generate.h - one txt2img image through the plugin's own sampler (train/preview.h: DDIM with
 * classifier-free guidance, the VAE's decode; SD3/SD3.5: train/flow_preview.h's flow-matching Euler) on a checkpoint, with a chain of hypernetworks on
 * the UNet's K/V hook in eval mode and optionally an embedding in the prompts. It combines the
 * methods (an embedding, hypernetworks), so it lives with the composition, not in either method's
 * folder. Behind the applier's generate (ABI 1.4) and sdt-host's generate command. */
#ifndef SDT_COMPOSE_GENERATE_H
#define SDT_COMPOSE_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "sdt_error.h"
#include "train/sampler.h"

typedef struct sdt_compose_generate_settings {
    const char *model_path;
    const char *tokenizer_path; /* NULL: found as for training (train/tokenizer_open.h) */
    const char *prompt;
    const char *negative;       /* "" for none */
    const char *embedding_path; /* NULL or "": none; else its name in the prompts stands for its vectors */
    int width, height, steps, clip_skip;
    float cfg_scale;
    uint64_t seed;
    uint32_t device; /* sdt_device_choice */
    int cpu_threads; /* <= 0: OpenMP's default */
    int chain_count; /* hypernetworks, in order, each loaded on the chosen backend */
    const char *const *chain_paths;
    const float *chain_strengths;
    sdt_sampler_kind sampler; /* train/sampler.h */
    /* SD3/SD3.5: the parts a checkpoint lacks (NULL or "": its own), as sdt_train_options' */
    const char *clip_l_path, *clip_g_path, *t5xxl_path, *vae_path;
    int t5_len; /* SD3/SD3.5 and Flux.1: T5's sequence; 0 = the family's (the pipelines' defaults). Not 0 on a UNet
                 * model is refused naming request.t5_max_length */
} sdt_compose_generate_settings;

/* rgb: width * height * 3 bytes. false + one sentence (the file, the field, the fix). */
bool sdt_compose_generate(const sdt_compose_generate_settings *s, uint8_t *rgb, sdt_error *error);

#endif
