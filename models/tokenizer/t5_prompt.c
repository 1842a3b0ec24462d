/* t5_prompt.c - a prompt's T5 ids with a placeholder's slots; see t5_prompt.h. */
#include "t5_prompt.h"

#include <stdlib.h>
#include <string.h>

bool sdt_t5_prompt_encode(const sdt_spm *tok, const sdt_t5_slot_rules *rules, const char *prompt, int length,
                          int32_t *ids, int *slot_pos, int *slot_row, sdt_t5_prompt_report *rep, sdt_error *error)
{
    memset(rep, 0, sizeof(*rep));
    if (length < 1)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "t5 prompt: sequence length %d leaves no room for the end token; T5 uses 256 or 512", length);
    if (rules->placeholder_id >= 0 && rules->n_vectors < 1)
        return sdt_fail(error, SDT_ERR_INVALID_ARGUMENT,
                        "t5 prompt: the placeholder has %d vectors; an embedding has at least one", rules->n_vectors);
    int32_t *raw = NULL;
    size_t n_raw = 0;
    if (!sdt_spm_tokenize(tok, prompt, &raw, &n_raw, error)) return false;
    int body = length - 1, n = 0; /* room for the text; the end token takes the last place */
    for (size_t i = 0; i < n_raw; i++) {
        bool is_slot = rules->placeholder_id >= 0 && raw[i] == rules->placeholder_id;
        int width = is_slot ? rules->n_vectors : 1;
        rep->n_prompt_tokens += width;
        if (n + width > body) { /* past the end: cut, an occurrence whole */
            rep->n_cut_tokens += width;
            if (is_slot) rep->n_cut_slots += width;
            body = n; /* truncation keeps a prefix: nothing after a cut token or occurrence */
            continue;
        }
        if (!is_slot) {
            ids[n++] = raw[i];
            continue;
        }
        for (int k = 0; k < width; k++) {
            slot_pos[rep->n_slots] = n, slot_row[rep->n_slots] = k;
            rep->n_slots++;
            ids[n++] = rules->slot_token;
        }
    }
    free(raw);
    rep->end_index = n;
    ids[n] = sdt_spm_eos(tok);
    for (int i = n + 1; i < length; i++) ids[i] = sdt_spm_pad(tok);
    return true;
}
