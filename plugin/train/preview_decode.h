/* preview_decode.h - the last stage every preview shares (train/preview.h's UNet samplers and
 * train/flow_preview.h's flow walk): the sampled latents through the runtime's VAE to 8-bit RGB. */
#ifndef SDT_TRAIN_PREVIEW_DECODE_H
#define SDT_TRAIN_PREVIEW_DECODE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "train/sd_runtime.h"

/* x: the host latents [z_channels, height / f, width / f]; rgb receives width*height*3 bytes (HWC).
 * On a measuring arena it only sizes the decode (x and rgb unread/unwritten, may be NULL). */
bool sdt_preview_decode_rgb(sd_runtime *rt, sdt_arena *a, const float *x, int width, int height, uint8_t *rgb,
                            sdt_error *error);

#endif
