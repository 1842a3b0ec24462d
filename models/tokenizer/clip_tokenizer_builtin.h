/* clip_tokenizer_builtin.h - CLIP's tokenizer as compiled into the library.
 *
 * SD 1.x and SD 2.x share OpenAI CLIP's BPE vocabulary (49408 entries), so a
 * single-file checkpoint needs no tokenizer folder: the files in
 * models/tokenizer/clip/ (MIT, OpenAI) are embedded gzip-compressed and inflated
 * on demand. A tokenizer the user names, or a model's own tokenizer/ folder,
 * still wins (plugin's tokenizer lookup).
 */
#ifndef SDT_MODELS_CLIP_TOKENIZER_BUILTIN_H
#define SDT_MODELS_CLIP_TOKENIZER_BUILTIN_H

#include <stddef.h>

#include "tokenizer.h"

/* Entries of the built-in vocabulary: a text encoder with this many token rows can use it. */
#define SDT_CLIP_BUILTIN_VOCAB 49408

/* A fresh tokenizer from the embedded files (free with sdt_tokenizer_free);
 * NULL + *error when they cannot be inflated (out of memory). */
sdt_tokenizer *sdt_tokenizer_load_builtin_clip(sdt_error *error);

/* The MIT licence notice of the embedded files, NUL-terminated. */
const char *sdt_clip_tokenizer_license(void);

#endif
