/* t5_prompt.h - a prompt as T5 reads it, with a textual-inversion placeholder's slots.
 *
 * The T5 side of an SD3/SD3.5 or Flux.1 embedding: the placeholder is an added token of the
 * SentencePiece tokenizer (sdt_spm_add_token, matched whole, never segmented) and each occurrence
 * takes n_vectors consecutive positions, as the CLIP side does (train/prompt.h), whose token
 * embeddings the embedding's t5xxl rows replace (t5_override). The sequence is what the pipelines
 * feed T5 (diffusers' StableDiffusion3Pipeline / FluxPipeline._get_t5_prompt_embeds: tokenizer_3 /
 * tokenizer_2 with padding="max_length", max_length=max_sequence_length, truncation=True,
 * add_special_tokens=True): the text's ids truncated to length - 1, then </s>, then <pad> to length
 * (256 for SD3 and Flux schnell, 512 for Flux dev). No start token, one sequence (no chunks).
 * An occurrence whose slots would cross the truncation is dropped whole (never split, as on the
 * CLIP side) and counted, so pre-flight can turn it into a sentence.
 */
#ifndef SDT_MODELS_T5_PROMPT_H
#define SDT_MODELS_T5_PROMPT_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "sentencepiece.h"

typedef struct sdt_t5_slot_rules {
    int32_t placeholder_id; /* the added token of the embedding's name; < 0: none */
    int n_vectors;          /* slots per occurrence (the embedding's rows) */
    int32_t slot_token;     /* id written at slot positions (its embedding is replaced; the pad id is fine) */
} sdt_t5_slot_rules;

typedef struct sdt_t5_prompt_report {
    int n_slots;         /* slots placed: slot_pos / slot_row entries */
    int n_cut_slots;     /* slots of occurrences that did not fit */
    int n_cut_tokens;    /* prompt tokens (slots included) that did not fit */
    int n_prompt_tokens; /* prompt tokens, slots included */
    int end_index;       /* position of </s> */
} sdt_t5_prompt_report;

/* ids[0..length), slot_pos[] / slot_row[] (room for length - 1 entries each): the slots' positions
 * and which embedding row each takes (0 .. n_vectors - 1 per occurrence). false + a sentence when
 * length < 1 or n_vectors < 1 with a placeholder. */
bool sdt_t5_prompt_encode(const sdt_spm *tok, const sdt_t5_slot_rules *rules, const char *prompt, int length,
                          int32_t *ids, int *slot_pos, int *slot_row, sdt_t5_prompt_report *rep, sdt_error *error);

#endif
