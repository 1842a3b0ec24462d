/* tokenizer_open.h - where a training or create call finds CLIP's tokenizer. */
#ifndef SDT_TRAIN_TOKENIZER_OPEN_H
#define SDT_TRAIN_TOKENIZER_OPEN_H

#include "sdt_error.h"

#include <stddef.h>

#include "host/host_log.h"
#include "tokenizer.h"

/* The tokenizer, first found of: the folder given (non-empty); the model folder's tokenizer/
 * when the model is a diffusers folder; tokenizer/ beside a single-file model; the CLIP
 * tokenizer built into the plugin (models/tokenizer/clip_tokenizer_builtin.h), said in the log when
 * host is not NULL. Its vocabulary must fit the text encoder's model_vocab token rows (the
 * built-in one is used only when it does). NULL with one sentence in *error. */
sdt_tokenizer *sdt_open_tokenizer(const char *given, const char *model_path, int model_vocab,
                                  const sdt_host_callbacks *host, sdt_error *error);

#endif
