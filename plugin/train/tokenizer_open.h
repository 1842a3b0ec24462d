/* tokenizer_open.h - where a training or create call finds CLIP's tokenizer, and T5's (SD3.5, Flux.1). */
#ifndef SDT_TRAIN_TOKENIZER_OPEN_H
#define SDT_TRAIN_TOKENIZER_OPEN_H

#include "sdt_error.h"

#include <stddef.h>

#include "host/host_log.h"
#include "sentencepiece.h"
#include "tokenizer.h"

/* The tokenizer, first found of: the folder given (non-empty); the model folder's tokenizer/
 * when the model is a diffusers folder; tokenizer/ beside a single-file model; the CLIP
 * tokenizer built into the plugin (models/tokenizer/clip_tokenizer_builtin.h), said in the log when
 * host is not NULL. Its vocabulary must fit the text encoder's model_vocab token rows (the
 * built-in one is used only when it does). NULL with one sentence in *error. */
sdt_tokenizer *sdt_open_tokenizer(const char *given, const char *model_path, int model_vocab,
                                  const sdt_host_callbacks *host, sdt_error *error);

/* T5's SentencePiece tokenizer (no T5 vocabulary is built in or downloaded), first found of the places
 * create-embedding looks in: the model when it is a folder (a diffusers folder's tokenizer_3/ or tokenizer_2/);
 * beside a single-file model, t5_tokenizer/ (ComfyUI's folder's name) or the folder itself; the T5 file's folder
 * (t5_path, may be NULL) or its t5_tokenizer/. A folder counts when it holds spiece.model or tokenizer.json
 * (directly or under tokenizer_3/ or tokenizer_2/, sentencepiece.h); a damaged one is its own sentence. Its pieces must fit T5's
 * t5_vocab token rows. Said in the log when host is not NULL. NULL with one sentence naming the folders looked in
 * and the files to put there. */
sdt_spm *sdt_open_t5_tokenizer(const char *t5_path, const char *model_path, int t5_vocab,
                               const sdt_host_callbacks *host, sdt_error *error);

#endif
