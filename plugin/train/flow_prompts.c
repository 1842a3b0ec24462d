/* flow_prompts.c - see flow_prompts.h. */
#include "train/flow_prompts.h"

#include <stdlib.h>
#include <string.h>

bool sdt_flow_prompts(sdt_tokenizer *tok, const sdt_slot_rules *rules, const sdt_spm *spm,
                      const sdt_t5_slot_rules *t5_rules, const char *const *prompts, int batch, int t5_len,
                      sdt_flow_prompt_batch *b, sdt_error *error)
{
    b->n_overrides = b->n_t5_overrides = b->n_cut_slots = b->n_cut_t5_slots = 0;
    sdt_prompt_encoded *enc = malloc(sizeof *enc);
    int *pos = malloc((size_t)t5_len * sizeof(int)), *row = malloc((size_t)t5_len * sizeof(int));
    bool ok = enc && pos && row;
    if (!ok) sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory for the prompts");
    for (int p = 0; ok && p < batch; p++) {
        /* CLIP: the first chunk, as the pipelines' truncating tokenizers give it */
        sdt_prompt_encode(tok, rules, prompts[p], enc);
        memcpy(b->tokens + (size_t)p * SDT_PROMPT_TOKENS, enc->ids, SDT_PROMPT_TOKENS * sizeof(int32_t));
        b->n_cut_slots += enc->n_cut_slots;
        for (int s = 0; s < enc->n_slots; s++) {
            if (enc->slot_pos[s] >= SDT_PROMPT_TOKENS) {
                b->n_cut_slots++;
                continue;
            }
            b->overrides[b->n_overrides++] = (clip_override){p, enc->slot_pos[s], enc->slot_row[s]};
        }
        /* T5: its own sequence of t5_len */
        sdt_t5_prompt_report rep;
        ok = sdt_t5_prompt_encode(spm, t5_rules, prompts[p], t5_len, b->t5_tokens + (size_t)p * t5_len, pos, row, &rep,
                                  error);
        if (!ok) break;
        b->n_cut_t5_slots += rep.n_cut_slots;
        for (int s = 0; s < rep.n_slots; s++) b->t5_overrides[b->n_t5_overrides++] = (t5_override){p, pos[s], row[s]};
    }
    free(enc);
    free(pos);
    free(row);
    return ok;
}
