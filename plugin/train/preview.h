/* preview.h - a preview image of what the embedding has learned so far: DDIM with
 * classifier-free guidance on the training UNet, text encoded with the embedding's
 * rows spliced in, decoded by the VAE to 8-bit RGB. */
#ifndef SDT_TRAIN_PREVIEW_H
#define SDT_TRAIN_PREVIEW_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/sd_runtime.h"
#include "ti/ti_prompt.h"
#include "train/work_arena.h"

typedef struct ti_preview_request {
    const char *prompt;     /* with the embedding's name in it */
    const char *negative;   /* "" for none */
    int width, height;      /* pixels, multiples of the VAE factor times 2^(levels-1) */
    int steps;              /* DDIM steps */
    float cfg_scale;        /* 1 = no guidance */
    uint64_t seed;
    int clip_skip;
} ti_preview_request;

/* *rgb receives malloc'd width*height*3 bytes. rows: the embedding [n_vectors, width] on the device. */
bool ti_preview_render(sd_runtime *rt, work_arena *wa, sdt_tokenizer *tok, const ti_prompt_rules *rules,
                       const sdt_tensor *rows, const ti_preview_request *req, uint8_t **rgb, sdt_error *error);

#endif
