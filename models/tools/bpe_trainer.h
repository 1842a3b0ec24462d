/* bpe_trainer.h - learns a CLIP-style byte-level BPE vocabulary from text.
 *
 * Words are found exactly as models/tokenizer/tokenizer.c finds them (lowercased, CLIP's
 * pre-tokenizer pattern, bytes mapped by bytes_to_unicode, "</w>" on a word's
 * last symbol). Merges are learned greedily: each round merges the most frequent
 * adjacent pair everywhere (ties: the smaller pair by byte order of its two
 * symbols, so the result never depends on hash order). A pair whose merged text
 * already is a token is never merged, so every vocabulary entry is distinct.
 * Because merges are applied in the order learned, the tokenizer reproduces the
 * training segmentation of every training word.
 *
 * The output is ordered as CLIP's vocabulary: the 256 byte symbols (ascending
 * code point), the same with "</w>", the merges in order, then <|startoftext|>
 * and <|endoftext|>; vocabulary size = 512 + merges + 2.
 *
 * Meant for small corpora (each round rescans every distinct word).
 */
#ifndef SDT_BPE_TRAINER_H
#define SDT_BPE_TRAINER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BPE_BASE_SYMBOLS 512 /* 256 byte symbols, with and without "</w>" */
#define BPE_SPECIAL_TOKENS 2 /* <|startoftext|>, <|endoftext|> */
#define BPE_MIN_VOCAB (BPE_BASE_SYMBOLS + BPE_SPECIAL_TOKENS)

typedef struct bpe_trainer bpe_trainer;

bpe_trainer *bpe_trainer_new(void);
void bpe_trainer_free(bpe_trainer *t);

/* Counts the words of text (UTF-8; invalid bytes are read as U+FFFD). */
void bpe_trainer_add_text(bpe_trainer *t, const char *text);
/* Distinct words seen so far. */
size_t bpe_trainer_distinct_words(const bpe_trainer *t);

/* Learns merges until the vocabulary has vocab_size entries. false + err when
 * vocab_size is below BPE_MIN_VOCAB or the corpus runs out of pairs first. */
bool bpe_trainer_learn(bpe_trainer *t, int32_t vocab_size, sdt_error *error);

/* Writes dir/vocab.json and dir/merges.txt (each atomically; dir is created). */
bool bpe_trainer_save(const bpe_trainer *t, const char *dir, sdt_error *error);

#endif
