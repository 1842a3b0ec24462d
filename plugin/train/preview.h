/* preview.h - a preview image of what a run has learned so far: a sampler (sampler.h) with classifier-free
 * guidance on the training UNet (with any hypernetwork hook), text encoded with an embedding's
 * rows spliced in (if any), decoded by the VAE to 8-bit RGB. */
#ifndef SDT_TRAIN_PREVIEW_H
#define SDT_TRAIN_PREVIEW_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/sampler.h"
#include "train/sd_runtime.h"
#include "train/prompt.h"
#include "train/work_arena.h"

typedef struct sdt_preview_request {
    const char *prompt;   /* with the embedding's name in it */
    const char *negative; /* "" for none */
    int width, height;    /* pixels, multiples of the VAE factor times 2^(levels-1) */
    int steps;            /* sampler steps */
    float cfg_scale;      /* 1 = no guidance */
    uint64_t seed;
    int clip_skip;
    const sdt_unet_kv_hook *hook; /* hypernetworks on the UNet's K/V inputs, in eval mode (NULL: none) */
    sdt_sampler_kind sampler;     /* [DDIM] (sampler.h) */
} sdt_preview_request;

/* *rgb receives malloc'd width*height*3 bytes. rows: the embedding [n_vectors, width] on the device. */
bool sdt_preview_render(sd_runtime *rt, work_arena *wa, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                        const sdt_tensor *rows, const sdt_preview_request *req, uint8_t **rgb, sdt_error *error);

#endif
