/* flow_preview.h - a preview image of SD3/SD3.5 or Flux.1 (next to preview.h's UNet previews): the prompt and the
 * negative prompt through the family's encoders (train/flow_prompts.h, train/sd_cond.h; the embedding's tables in
 * their slots), the flow-matching Euler walk (train/flow_sampler.h: SD3's spacing and shift, or FluxPipeline's
 * sigmas with the resolution shift and dev's distilled guidance; classifier-free guidance with cfg_scale) over the
 * transformer's velocity, and the 16-channel VAE's decode (latents / scaling + shift). Noise from the seed on the
 * preview stream: the same request gives the same bytes. */
#ifndef SDT_TRAIN_FLOW_PREVIEW_H
#define SDT_TRAIN_FLOW_PREVIEW_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "train/flow_match.h"
#include "train/flow_prompts.h"
#include "train/sd_runtime.h"
#include "train/work_arena.h"

typedef struct sdt_flow_preview_request {
    const char *prompt;   /* with the embedding's name in it */
    const char *negative; /* "" for none */
    int width, height;    /* pixels: multiples of the VAE factor times the patch (2) */
    int steps;            /* 1..1000 */
    float cfg_scale;      /* 1 = no guidance */
    uint64_t seed;
    int t5_len;               /* T5's sequence (256 for SD3.5, Flux dev 512, schnell 256) */
    sdt_flow_timesteps shift; /* the family's shift (sdt_flow_timesteps_sd3(), _flux()) */
    float guidance;           /* Flux dev's distilled guidance (3.5 in FluxPipeline); 0 for the others */
} sdt_flow_preview_request;

/* *rgb receives malloc'd width*height*3 bytes. rows: the embedding's table-major rows on the device, or NULL. */
bool sdt_flow_preview_render(sd_runtime *rt, work_arena *wa, sdt_tokenizer *tok, const sdt_slot_rules *rules,
                             const sdt_spm *spm, const sdt_t5_slot_rules *t5_rules, const sdt_tensor *rows,
                             const sdt_flow_preview_request *req, uint8_t **rgb, sdt_error *error);

#endif
