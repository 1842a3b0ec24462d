/* tokenizer.h - CLIP's byte-level BPE tokenizer (vocab.json + merges.txt).
 *
 * Follows OpenAI CLIP's simple_tokenizer (which transformers' CLIPTokenizer
 * reproduces): HTML entities unescaped (common named ones and numeric
 * references, twice), whitespace runs collapsed to one space and trimmed,
 * lowercase, CLIP's pre-tokenizer pattern, each piece's UTF-8 bytes mapped to
 * printable characters (bytes_to_unicode), "</w>" on the last symbol of a
 * word, then merges applied by rank. Not done: ftfy's mojibake repair.
 *
 * Added tokens (textual-inversion placeholders) are never split by BPE: they
 * are matched case-insensitively as whole words (not inside a longer word)
 * before the pre-tokenizer runs.
 *
 * Thread safety: encoding from several threads is safe (the BPE cache is
 * locked); adding tokens is not concurrent with encoding.
 */
#ifndef SDT_MODELS_TOKENIZER_H
#define SDT_MODELS_TOKENIZER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SDT_CLIP_CONTEXT 77

typedef struct sdt_tokenizer sdt_tokenizer;

/* Loads vocab.json and merges.txt. NULL + error naming the file (and key or line). */
sdt_tokenizer *sdt_tokenizer_load(const char *vocab_path, const char *merges_path, sdt_error *error);
/* path is a model folder (uses path/tokenizer/vocab.json + merges.txt), a
 * tokenizer folder (path/vocab.json + path/merges.txt) or a vocab.json file
 * (merges.txt beside it). */
sdt_tokenizer *sdt_tokenizer_load_dir(const char *dir, sdt_error *error);
/* From file contents in memory; the names are used in error sentences. */
sdt_tokenizer *sdt_tokenizer_load_memory(const char *vocab, size_t vocab_len, const char *merges, size_t merges_len,
                                         const char *vocab_name, const char *merges_name, sdt_error *error);
void sdt_tokenizer_free(sdt_tokenizer *t);

/* Ids of the vocabulary file: max id + 1. */
int32_t sdt_tokenizer_vocab_size(const sdt_tokenizer *t);
/* Including added tokens. */
int32_t sdt_tokenizer_size(const sdt_tokenizer *t);
int32_t sdt_tokenizer_bos(const sdt_tokenizer *t); /* <|startoftext|> */
int32_t sdt_tokenizer_eos(const sdt_tokenizer *t); /* <|endoftext|>, also SD 1.x padding and the unknown token */
/* Id of a vocabulary entry spelled as in vocab.json ("cat</w>") or of an added token; -1 when absent. */
int32_t sdt_tokenizer_token_id(const sdt_tokenizer *t, const char *token);
/* vocab.json spelling (or the added token's text) of an id; NULL when no token has it. */
const char *sdt_tokenizer_token_text(const sdt_tokenizer *t, int32_t id);

/* Adds a placeholder that BPE never splits. id < 0 assigns the next free id
 * (sdt_tokenizer_size); the id used is stored in *id_out (may be NULL).
 * Adding the same text again returns its existing id. */
bool sdt_tokenizer_add_token(sdt_tokenizer *t, const char *text, int32_t id, int32_t *id_out, sdt_error *error);

/* The token ids of text without start/end tokens and without truncation.
 * *ids is allocated with malloc (free it); *n its length. Invalid UTF-8 bytes
 * are read as U+FFFD. */
void sdt_tokenizer_tokenize(sdt_tokenizer *t, const char *text, int32_t **ids, size_t *n);

typedef struct sdt_encode_options {
    int length;       /* total positions, start and end included (77) */
    int32_t pad_id;   /* < 0: the end token, as SD 1.x pads; SD 2.x pads with 0 */
    int32_t watch_id; /* report whether this id was cut off; < 0: none */
} sdt_encode_options;

typedef struct sdt_encode_report {
    int n_text_tokens; /* tokens of the text (no start/end) before truncation */
    int n_cut;         /* how many of them did not fit */
    bool watch_cut;    /* watch_id occurs among the cut tokens */
    bool watch_kept;   /* watch_id occurs among the kept tokens */
    int end_index;     /* position of the end token */
} sdt_encode_report;

/* {77, end token, none}. */
sdt_encode_options sdt_encode_defaults(void);

/* ids[0..opt->length): start token, as many text tokens as fit, end token,
 * padding. rep (may be NULL) says what was cut. false + error when length < 2. */
bool sdt_tokenizer_encode(sdt_tokenizer *t, const char *text, const sdt_encode_options *opt, int32_t *ids,
                          sdt_encode_report *rep, sdt_error *error);

/* An encoder's padding of a chunk encoded for another: every id after the first end_id of ids[0..length)
 * becomes pad_id (nothing changes without an end token or when the end is the last position). SDXL's two
 * encoders read the same chunk, CLIP-L padded with the end token and OpenCLIP bigG with 0 (A1111's
 * FrozenOpenCLIPEmbedder2WithCustomWords id_pad = 0; diffusers' tokenizer_2 pads with "!", id 0); pass
 * clip_pad_id(bigG's config, end_id). */
void sdt_tokens_pad_after_end(int32_t *ids, int length, int32_t end_id, int32_t pad_id);

/* Text of ids (byte-level decoded, "</w>" as a space, start/end/pad skipped); free with free(). */
char *sdt_tokenizer_decode(const sdt_tokenizer *t, const int32_t *ids, size_t n);

#endif
