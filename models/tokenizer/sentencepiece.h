/* sentencepiece.h - T5's SentencePiece unigram tokenizer (SD3's and Flux's T5-XXL prompts).
 *
 * The vocabulary comes from the checkpoint folder: SentencePiece's own `spiece.model` (a protobuf
 * ModelProto, read here without a protobuf library: pieces with text, score and type, the trainer's
 * unk/eos/pad ids and byte_fallback, the normalizer's add_dummy_prefix and remove_extra_whitespaces)
 * or transformers' `tokenizer.json` (model type "Unigram": [piece, score] pairs, unk_id, byte_fallback;
 * added tokens marked special become control pieces). Both give the same ids for the same vocabulary.
 *
 * Encoding follows SentencePiece's unigram model as T5 uses it:
 *  - normalisation: the model's precompiled character map when it has one (T5's nmt_nfkc: NFKC and NMT's
 *    rules as a Darts-clone double array of source strings and their replacements, longest match first,
 *    as SentencePiece's normalizer and transformers' Precompiled normalizer apply it); then, and alone
 *    for a model without a map, ASCII controls dropped, tab/newline/CR and the Unicode spaces (U+00A0,
 *    U+2000-U+200A, U+202F, U+205F, U+3000) read as a space, fullwidth ASCII (U+FF01-U+FF5E) folded to
 *    ASCII, invalid UTF-8 read as U+FFFD; whitespace runs collapsed and trimmed; then a U+2581 (▁) before
 *    the text and in place of each space;
 *  - segmentation: per word (SentencePiece trains T5's pieces never to cross a ▁), the Viterbi path of
 *    highest total score over the normal and user-defined pieces; a character no piece covers is the
 *    unknown piece (score: the lowest piece score - 10, as SentencePiece), consecutive unknowns fused
 *    into one id, or, with byte_fallback, its UTF-8 bytes as <0xHH> pieces; control pieces (<pad>, </s>)
 *    never come from text;
 *  - the sequence: the text's ids, truncated to length - 1, then the end id (</s>, 1 for T5), then the
 *    pad id (<pad>, 0) to length. No start token. T5's <extra_id_N> sentinels (transformers adds them as
 *    ids 32000-32099) and the control pieces' texts ("</s>") are not matched in text;
 *  - added tokens (textual-inversion placeholders, sdt_spm_add_token) are split out of the raw text first,
 *    as transformers splits its added tokens, and the text between them is tokenized apart (each stretch
 *    with its own ▁ prefix).
 *
 * Thread safety: encoding from several threads is safe; adding tokens is not concurrent with encoding.
 */
#ifndef SDT_MODELS_SENTENCEPIECE_H
#define SDT_MODELS_SENTENCEPIECE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sdt_spm sdt_spm;

/* SentencePiece's piece types (sentencepiece_model.proto). */
typedef enum sdt_spm_piece_type {
    SDT_SPM_NORMAL = 1,
    SDT_SPM_UNKNOWN = 2,
    SDT_SPM_CONTROL = 3,
    SDT_SPM_USER_DEFINED = 4,
    SDT_SPM_UNUSED = 5,
    SDT_SPM_BYTE = 6,
} sdt_spm_piece_type;

/* spiece.model / tokenizer.json (told by content), or a folder holding either (spiece.model first), or a checkpoint folder
 * whose tokenizer_3/ (SD3) or tokenizer_2/ (Flux) holds one. NULL + a sentence naming the file and what
 * is wrong with it (truncated, not a protobuf or JSON, not a unigram model, a piece without text, ids
 * out of range, no end token). */
sdt_spm *sdt_spm_load(const char *path, sdt_error *error);
/* From file contents in memory; name is used in the sentences. */
sdt_spm *sdt_spm_load_model_memory(const void *data, size_t size, const char *name, sdt_error *error);
sdt_spm *sdt_spm_load_json_memory(const char *text, size_t size, const char *name, sdt_error *error);
void sdt_spm_free(sdt_spm *t);

int32_t sdt_spm_size(const sdt_spm *t);
/* The pieces and the added tokens. */
int32_t sdt_spm_size_with_added(const sdt_spm *t);
int32_t sdt_spm_eos(const sdt_spm *t);
int32_t sdt_spm_pad(const sdt_spm *t);
int32_t sdt_spm_unk(const sdt_spm *t);
/* The id of a piece spelled as in the model ("▁cat") or of an added token, -1 when absent; its text (an added
 * token's too), score and type (pieces only). */
int32_t sdt_spm_piece_id(const sdt_spm *t, const char *piece);
const char *sdt_spm_piece_text(const sdt_spm *t, int32_t id);
float sdt_spm_piece_score(const sdt_spm *t, int32_t id);
sdt_spm_piece_type sdt_spm_piece_kind(const sdt_spm *t, int32_t id);

/* Adds a placeholder matched whole in the raw text, never segmented: ids sdt_spm_size(t), +1, ... in the
 * order added (adding the same text again gives its id). T5's embedding has rows past the pieces (32128 for
 * 32100 ids), and a textual-inversion row replaces the placeholder's embedding anyway. */
bool sdt_spm_add_token(sdt_spm *t, const char *text, int32_t *id_out, sdt_error *error);

/* The normalised text (▁ for spaces, dummy prefix included), malloc'd. */
char *sdt_spm_normalize(const sdt_spm *t, const char *text);
/* The ids of text, no end token, no truncation; *ids malloc'd (free it), *n its length. false only when
 * memory runs out. */
bool sdt_spm_tokenize(const sdt_spm *t, const char *text, int32_t **ids, size_t *n, sdt_error *error);

typedef struct sdt_spm_report {
    int n_text_tokens; /* tokens of the text before truncation */
    int n_cut;         /* how many did not fit */
    int end_index;     /* position of the end token */
} sdt_spm_report;

/* ids[0..length): the text's ids (at most length - 1 of them), the end id, pads. T5's lengths are 256
 * (SD3, Flux schnell) and 512 (Flux dev); any length >= 1 is taken. rep may be NULL. */
bool sdt_spm_encode(const sdt_spm *t, const char *text, int length, int32_t *ids, sdt_spm_report *rep,
                    sdt_error *error);

#endif
