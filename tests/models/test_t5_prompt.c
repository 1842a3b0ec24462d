/* test_t5_prompt.c - a placeholder's slots in T5's sequence (models/tokenizer/t5_prompt.h), on a
 * hand-built unigram vocabulary: each occurrence of the added token takes n_vectors positions holding
 * the slot token, with their rows 0..n-1; the text around it keeps its own ids; </s> after the text and
 * <pad> to the length, as the pipelines' tokenizer_3 / tokenizer_2 give them; an occurrence that would
 * cross the truncation is dropped whole (nothing after it kept) and counted; a bad length is refused. */
#include <stdio.h>
#include <string.h>

#include "sdt_test.h"
#include "t5_test_vocab.h"
#include "t5_prompt.h"

static const char *const JSON = SDT_TEST_T5_TOKENIZER_JSON;

static void expect(const sdt_spm *t, const sdt_t5_slot_rules *rules, const char *prompt, int length,
                   const int32_t *want_ids, const int *want_pos, const int *want_row, int want_slots,
                   int want_cut_slots, int want_cut_tokens, int want_end)
{
    int32_t ids[64];
    int pos[64], row[64];
    sdt_t5_prompt_report rep;
    sdt_error err = {0};
    if (!sdt_t5_prompt_encode(t, rules, prompt, length, ids, pos, row, &rep, &err)) {
        CHECK(false, "\"%s\": %s", prompt, err.message);
        return;
    }
    bool same = memcmp(ids, want_ids, sizeof(int32_t) * (size_t)length) == 0;
    CHECK(same, "\"%s\" (length %d): the ids differ", prompt, length);
    if (!same)
        for (int i = 0; i < length; i++) fprintf(stderr, "  %d: got %d want %d\n", i, ids[i], want_ids[i]);
    CHECK(rep.n_slots == want_slots && rep.n_cut_slots == want_cut_slots && rep.n_cut_tokens == want_cut_tokens &&
              rep.end_index == want_end,
          "\"%s\": slots %d cut slots %d cut tokens %d end %d, want %d %d %d %d", prompt, rep.n_slots, rep.n_cut_slots,
          rep.n_cut_tokens, rep.end_index, want_slots, want_cut_slots, want_cut_tokens, want_end);
    for (int s = 0; s < want_slots && s < rep.n_slots; s++)
        CHECK(pos[s] == want_pos[s] && row[s] == want_row[s], "\"%s\": slot %d at %d row %d, want %d row %d", prompt, s,
              pos[s], row[s], want_pos[s], want_row[s]);
}

int main(void)
{
    sdt_error err = {0};
    sdt_spm *t = sdt_spm_load_json_memory(JSON, strlen(JSON), "tiny.json", &err);
    CHECK(t != NULL, "the vocabulary: %s", err.message);
    if (!t) return sdt_test_finish("models_test_t5_prompt");
    int32_t ph = -1;
    CHECK(sdt_spm_add_token(t, "<sks>", &ph, &err) && ph == 10, "adding the placeholder: %s (id %d)", err.message, ph);
    sdt_t5_slot_rules rules = {.placeholder_id = ph, .n_vectors = 3, .slot_token = 0};
    { /* slots in the middle: "a", 3 slots, "the cat", </s>, pads */
        int32_t ids[12] = {4, 0, 0, 0, 5, 6, 1, 0, 0, 0, 0, 0};
        int pos[3] = {1, 2, 3}, row[3] = {0, 1, 2};
        expect(t, &rules, "a <sks> the cat", 12, ids, pos, row, 3, 0, 0, 6);
    }
    { /* the occurrence would cross the end: dropped whole, and what follows it too */
        int32_t ids[4] = {4, 1, 0, 0};
        expect(t, &rules, "a <sks> the", 4, ids, NULL, NULL, 0, 3, 4, 1);
    }
    { /* it just fits: length - 1 places for the text */
        int32_t ids[5] = {4, 0, 0, 0, 1};
        int pos[3] = {1, 2, 3}, row[3] = {0, 1, 2};
        expect(t, &rules, "a <sks> the", 5, ids, pos, row, 3, 0, 1, 4);
    }
    rules.n_vectors = 2;
    { /* two occurrences, rows 0..n-1 each */
        int32_t ids[10] = {0, 0, 9, 0, 0, 7, 8, 1, 0, 0};
        int pos[4] = {0, 1, 3, 4}, row[4] = {0, 1, 0, 1};
        expect(t, &rules, "<sks> dog <sks> yellow star", 10, ids, pos, row, 4, 0, 0, 7);
    }
    { /* no placeholder rule: the added token is one id like any */
        sdt_t5_slot_rules none = {.placeholder_id = -1};
        int32_t ids[6] = {4, 10, 6, 1, 0, 0};
        expect(t, &none, "a <sks> cat", 6, ids, NULL, NULL, 0, 0, 0, 3);
    }
    int32_t ids[4];
    int pos[4], row[4];
    sdt_t5_prompt_report rep;
    err.message[0] = 0;
    CHECK(!sdt_t5_prompt_encode(t, &rules, "a", 0, ids, pos, row, &rep, &err) && strstr(err.message, "256"),
          "length 0 was accepted (%s)", err.message);
    rules.n_vectors = 0;
    err.message[0] = 0;
    CHECK(!sdt_t5_prompt_encode(t, &rules, "a", 4, ids, pos, row, &rep, &err) && strstr(err.message, "vectors"),
          "a placeholder of 0 vectors was accepted (%s)", err.message);
    sdt_spm_free(t);
    return sdt_test_finish("models_test_t5_prompt");
}
