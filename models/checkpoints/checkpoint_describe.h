/* checkpoint_describe.h - what a model checkpoint is, for inspect: its family, the widths that
 * decide which embeddings fit it, the config file beside it (A1111's <stem>.yaml, or a diffusers
 * folder's scheduler config) and what that says the model predicts. Nothing is computed: where
 * only the UNet probe can tell (an SD 2.x model without a config), it says so. */
#ifndef SDT_MODELS_CHECKPOINT_DESCRIBE_H
#define SDT_MODELS_CHECKPOINT_DESCRIBE_H

#include "sdt_error.h"

#include <stdbool.h>

/* A JSON object describing the checkpoint at path (free()). NULL with *is_checkpoint false when
 * path is not a model (an embedding, a LoRA, any other file): the caller keeps its own sentence.
 * NULL with *is_checkpoint true and error set when it is one whose config beside it cannot be
 * read or contradicts it. */
char *sd_checkpoint_describe_json(const char *path, bool *is_checkpoint, sdt_error *error);

#endif
