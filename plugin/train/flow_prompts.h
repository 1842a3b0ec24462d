/* flow_prompts.h - a batch of prompts as SD3/SD3.5's three text encoders read them (train/sd_cond.h's SD3 branch),
 * with the placeholder's slots for an embedding's table per encoder.
 *
 * CLIP-L and bigG read one 77-token sequence per prompt: the pipelines tokenize with truncation, so the prompt's
 * first chunk as train/prompt.h makes it (start, up to 75 tokens, end, padding; the same ids as the pipeline's for
 * a prompt that fits, which every placeholder occurrence must: one past the first chunk is cut whole and counted)
 * with its slots; bigG's zero padding is made in sd_cond. T5 reads its own ids of t5_len (t5_prompt.h: the text,
 * </s>, <pad>; an occurrence crossing the truncation cut whole and counted). Both slot lists address (prompt,
 * position, row), rows 0..n_vectors-1 of the clip_l/clip_g tables and of the t5xxl table alike. */
#ifndef SDT_TRAIN_FLOW_PROMPTS_H
#define SDT_TRAIN_FLOW_PROMPTS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "t5_encoder.h"
#include "t5_prompt.h"
#include "train/prompt.h"

typedef struct sdt_flow_prompt_batch {
    int32_t *tokens;          /* [batch, 77]: CLIP's ids, padded as CLIP-L pads */
    clip_override *overrides; /* room for batch * 77 */
    int n_overrides;
    int32_t *t5_tokens;        /* [batch, t5_len] */
    t5_override *t5_overrides; /* room for batch * t5_len */
    int n_t5_overrides;
    int n_cut_slots, n_cut_t5_slots; /* slots of occurrences cut (CLIP past its 77 tokens, T5 past t5_len) */
} sdt_flow_prompt_batch;

/* Fills b (its arrays sized as above by the caller) for prompts[0..batch); spm and t5_rules T5's tokenizer and its
 * placeholder. false + a sentence only when t5_len < 1 (t5_prompt.h). */
bool sdt_flow_prompts(sdt_tokenizer *tok, const sdt_slot_rules *rules, const sdt_spm *spm,
                      const sdt_t5_slot_rules *t5_rules, const char *const *prompts, int batch, int t5_len,
                      sdt_flow_prompt_batch *b, sdt_error *error);

#endif
