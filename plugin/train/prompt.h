/* prompt.h - a training prompt as the text encoder sees it, with optional placeholder rows.
 *
 * The embedding's name is an added token (BPE never splits it). Each occurrence in
 * the prompt takes n_vectors consecutive slots, as in A1111, and the slots carry the
 * embedding's rows instead of token-embedding rows. Then the sequence is cut into
 * chunks as A1111 cuts it (sd_hijack_clip.py tokenize_line): 75 tokens a chunk, each
 * framed by start and end tokens and padded to 77; a chunk that fills up with a comma
 * among its last 20 tokens is closed after the comma; an embedding that would not fit
 * in the current chunk starts the next one, so its vectors are never split. The text
 * encoder runs on each chunk as its own sequence and the outputs are concatenated
 * along the sequence, so the UNet's cross-attention sees the whole caption. Slots that
 * cannot be placed (past SDT_PROMPT_MAX_CHUNKS chunks, or an embedding wider than a chunk) are
 * counted: pre-flight turns them into a clear error.
 */
#ifndef SDT_TRAIN_PROMPT_H
#define SDT_TRAIN_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clip_text.h"
#include "tokenizer.h"

#define SDT_PROMPT_TOKENS 77 /* one chunk: start, 75 tokens, end */
#define SDT_PROMPT_CHUNK_BODY (SDT_PROMPT_TOKENS - 2)
#define SDT_PROMPT_MAX_CHUNKS 8       /* 600 prompt tokens */
#define SDT_PROMPT_COMMA_BACKTRACK 20 /* A1111's comma_padding_backtrack default */

typedef struct sdt_prompt_encoded {
    int32_t ids[SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS];  /* chunk after chunk; slots hold slot_token */
    int n_chunks;                                            /* >= 1 */
    int slot_pos[SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS]; /* positions of the embedding's slots in ids */
    int slot_row[SDT_PROMPT_MAX_CHUNKS * SDT_PROMPT_TOKENS]; /* which embedding row each slot takes */
    int n_slots;
    int n_cut_slots;     /* slots that could not be placed */
    int n_cut_tokens;    /* prompt tokens (slots included) past the last chunk */
    int n_prompt_tokens; /* prompt tokens, slots included */
} sdt_prompt_encoded;

typedef struct sdt_slot_rules {
    int32_t placeholder_id; /* the added token of the embedding's name */
    int n_vectors;          /* slots per occurrence */
    int32_t slot_token;     /* id written at slot positions (0, as A1111 does) */
    int32_t pad_id;         /* end token for SD 1.x, 0 for SD 2.x */
} sdt_slot_rules;

void sdt_prompt_encode(sdt_tokenizer *tok, const sdt_slot_rules *rules, const char *prompt, sdt_prompt_encoded *out);

/* A batch of encoded prompts as the text encoder's input: every prompt gets the batch's
 * largest chunk count (missing chunks are empty: start, end, padding, as A1111 does).
 * tokens gets [batch * chunks, 77] ids; overrides (room for batch * chunks * 77) the
 * slots, addressed as (sequence b * chunks + chunk, position). Returns the chunk count. */
int sdt_prompt_batch(sdt_tokenizer *tok, const sdt_slot_rules *rules, const sdt_prompt_encoded *enc, int batch,
                     int32_t *tokens, clip_override *overrides, int *n_overrides);

/* The text encoder's output for a batch of chunked prompts, [batch * chunks, 77, width], seen
 * as the UNet's context [batch, chunks * 77, width] (the same memory). */
sdt_tensor sdt_prompt_context(const sdt_tensor *clip_out, int batch);

#endif
