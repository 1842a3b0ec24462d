/* ti_prompt.h - a training prompt as the text encoder sees it.
 *
 * The embedding's name is an added token (BPE never splits it). Each occurrence in
 * the prompt takes n_vectors consecutive slots, as in A1111, and the slots carry the
 * embedding's rows instead of token-embedding rows. Then the sequence is framed as CLIP
 * wants it: start token, up to 75 tokens, end token, padding to 77. Slots pushed past
 * the window are counted: a prompt that loses them gives the embedding less (or no)
 * gradient, which pre-flight turns into a clear error.
 */
#ifndef SDT_TRAIN_TI_PROMPT_H
#define SDT_TRAIN_TI_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#define TI_TOKENS 77

typedef struct ti_encoded {
    int32_t ids[TI_TOKENS];      /* slots hold slot_token (a valid row; the override replaces it) */
    int slot_pos[TI_TOKENS];     /* positions of the embedding's slots */
    int slot_row[TI_TOKENS];     /* which embedding row each slot takes */
    int n_slots;
    int n_cut_slots;             /* slots that did not fit in the window */
    int n_cut_tokens;            /* prompt tokens (slots included) that did not fit */
} ti_encoded;

typedef struct ti_prompt_rules {
    int32_t placeholder_id;      /* the added token of the embedding's name */
    int n_vectors;               /* slots per occurrence */
    int32_t slot_token;          /* id written at slot positions (0, as A1111 does) */
    int32_t pad_id;              /* end token for SD 1.x, 0 for SD 2.x */
} ti_prompt_rules;

void ti_prompt_encode(sdt_tokenizer *tok, const ti_prompt_rules *rules, const char *prompt, ti_encoded *out);

#endif
