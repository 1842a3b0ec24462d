/* embedding_model_check.h - whether an embedding's rows fit a model's text encoders: the one check training
 * (ti_part), generating (compose/generate) and the demo's grids (host-sim/demo/demo_eval) make. */
#ifndef SDT_TI_EMBEDDING_MODEL_CHECK_H
#define SDT_TI_EMBEDDING_MODEL_CHECK_H

#include <stdbool.h>

#include "sdt_error.h"
#include "ti/embedding.h"
#include "train/sd_runtime.h"

/* Whether the embedding's rows fit the model's text encoders (SDXL: clip_l and clip_g; SD3: a table per encoder,
 * encoder_dims, each its encoder's width); false + a sentence naming path and both shapes. Training and
 * generating check the same way. */
bool ti_embedding_check_model(const sdt_embedding *e, const sd_runtime *rt, const char *path, sdt_error *error);

#endif
