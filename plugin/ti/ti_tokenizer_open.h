/* ti_tokenizer_open.h - where a training or create call finds CLIP's tokenizer. */
#ifndef SDT_PLUGIN_TI_TOKENIZER_OPEN_H
#define SDT_PLUGIN_TI_TOKENIZER_OPEN_H

#include "sdt_error.h"

#include <stddef.h>

#include "tokenizer.h"

/* The tokenizer folder: given (non-empty), else the model folder's tokenizer/ when the model
 * is a diffusers folder, else tokenizer/ beside the model file. NULL with one sentence in *error. */
sdt_tokenizer *ti_open_tokenizer(const char *given, const char *model_path, sdt_error *error);

#endif
