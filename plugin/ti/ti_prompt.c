/* ti_prompt.c - see ti_prompt.h. */
#include "ti/ti_prompt.h"

#include <stdlib.h>
#include <string.h>

void ti_prompt_encode(sdt_tokenizer *tok, const ti_prompt_rules *rules, const char *prompt, ti_encoded *out)
{
    memset(out, 0, sizeof(*out));
    int32_t *raw = NULL;
    size_t n_raw = 0;
    sdt_tokenizer_tokenize(tok, prompt, &raw, &n_raw);
    const int body = TI_TOKENS - 2; /* start and end tokens frame the text */
    int pos = 1;
    out->ids[0] = sdt_tokenizer_bos(tok);
    for (size_t i = 0; i < n_raw; i++) {
        bool is_slot = raw[i] == rules->placeholder_id;
        int width = is_slot ? rules->n_vectors : 1;
        for (int k = 0; k < width; k++) {
            if (pos - 1 >= body) {
                out->n_cut_tokens++;
                out->n_cut_slots += is_slot;
                continue;
            }
            if (is_slot) {
                out->slot_pos[out->n_slots] = pos;
                out->slot_row[out->n_slots] = k;
                out->n_slots++;
                out->ids[pos++] = rules->slot_token;
            } else {
                out->ids[pos++] = raw[i];
            }
        }
    }
    free(raw);
    out->ids[pos++] = sdt_tokenizer_eos(tok);
    while (pos < TI_TOKENS) out->ids[pos++] = rules->pad_id;
}
