/* flow_tokenizers.h - sdt-demo-eval's tokenizers of a transformer model (SD3.5, Flux.1): CLIP's and T5's, found as
 * training and generate find them (plugin/train/tokenizer_open.h). A file of its own because tokenizer_open.h
 * reaches the ABI header, whose Train-tab sdt_hn_config shares its name with the hypernetwork module's that
 * demo_eval.c draws with. */
#ifndef SDT_DEMO_FLOW_TOKENIZERS_H
#define SDT_DEMO_FLOW_TOKENIZERS_H

#include <stdbool.h>

#include "sdt_error.h"
#include "sentencepiece.h"
#include "tokenizer.h"

/* *tok and *t5 (both NULL on failure, with one sentence naming the folders looked in); t5_path: the T5 file given,
 * or NULL. The vocabularies must fit the encoders' token rows. */
bool demo_open_flow_tokenizers(const char *model_path, const char *t5_path, int clip_vocab, int t5_vocab,
                               sdt_tokenizer **tok, sdt_spm **t5, sdt_error *error);

#endif
