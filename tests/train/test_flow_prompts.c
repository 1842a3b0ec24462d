/* test_flow_prompts.c - a batch of prompts as SD3.5's encoders read them (train/flow_prompts.h), with the built-in
 * CLIP tokenizer and a hand-built T5 vocabulary:
 *  - CLIP: one 77-token sequence per prompt (start, the text with the placeholder's n slots, end, CLIP-L's
 *    padding), the slots addressed (prompt, position, row);
 *  - T5: the text's ids with the slots, </s>, <pad> to t5_len, the slots addressed the same way;
 *  - a placeholder past CLIP's 75 tokens or T5's length is cut whole and counted on each side;
 *  - t5_len 0 is a sentence. */
#include <stdlib.h>
#include <string.h>

#include "clip_tokenizer_builtin.h"
#include "sdt_test.h"
#include "t5_test_vocab.h"
#include "train/flow_prompts.h"

#define L5 8

static const char *const JSON = SDT_TEST_T5_TOKENIZER_JSON;

typedef struct arrays {
    int32_t tokens[3 * SDT_PROMPT_TOKENS], t5[3 * L5];
    clip_override ov[3 * SDT_PROMPT_TOKENS];
    t5_override ov5[3 * L5];
} arrays;

int main(void)
{
    sdt_error err = {0};
    sdt_tokenizer *tok = sdt_tokenizer_load_builtin_clip(&err);
    sdt_spm *spm = sdt_spm_load_json_memory(JSON, strlen(JSON), "tiny.json", &err);
    CHECK(tok && spm, "tokenizers: %s", err.message);
    if (!tok || !spm) return sdt_test_finish("test_flow_prompts");
    int32_t id = -1, id5 = -1;
    CHECK(sdt_tokenizer_add_token(tok, "sks", -1, &id, &err) && sdt_spm_add_token(spm, "sks", &id5, &err),
          "the placeholder: %s", err.message);
    int32_t bos = sdt_tokenizer_bos(tok), eos = sdt_tokenizer_eos(tok);
    sdt_slot_rules rules = {.placeholder_id = id, .n_vectors = 2, .slot_token = 0, .pad_id = eos};
    sdt_t5_slot_rules r5 = {.placeholder_id = id5, .n_vectors = 2, .slot_token = 0};
    arrays *a = calloc(1, sizeof *a);
    sdt_flow_prompt_batch b = {.tokens = a->tokens, .overrides = a->ov, .t5_tokens = a->t5, .t5_overrides = a->ov5};

    /* a long prompt: 80 words, then the placeholder (past CLIP's 75 tokens and T5's 8) */
    char long_prompt[1024] = "";
    for (int i = 0; i < 80; i++) strcat(long_prompt, "a ");
    strcat(long_prompt, "sks");
    const char *prompts[3] = {"a sks cat", "the dog", long_prompt};
    CHECK(sdt_flow_prompts(tok, &rules, spm, &r5, prompts, 3, L5, &b, &err), "the batch: %s", err.message);
    const int32_t *t0 = a->tokens;
    CHECK(t0[0] == bos && t0[2] == 0 && t0[3] == 0 && t0[5] == eos && t0[6] == eos && t0[76] == eos,
          "CLIP: start, a, 2 slots, cat, end, padding (%d %d %d %d %d %d)", t0[0], t0[1], t0[2], t0[3], t0[4], t0[5]);
    CHECK(b.n_overrides == 2 && a->ov[0].batch == 0 && a->ov[0].position == 2 && a->ov[0].row == 0 &&
              a->ov[1].position == 3 && a->ov[1].row == 1,
          "CLIP's slots: %d", b.n_overrides);
    const int32_t want5[L5] = {4, 0, 0, 6, 1, 0, 0, 0}, want5b[L5] = {5, 9, 1, 0, 0, 0, 0, 0};
    CHECK(memcmp(a->t5, want5, sizeof want5) == 0 && memcmp(a->t5 + L5, want5b, sizeof want5b) == 0,
          "T5's ids: a, 2 slots, cat, </s>, <pad> (got %d %d %d %d %d)", a->t5[0], a->t5[1], a->t5[2], a->t5[3],
          a->t5[4]);
    CHECK(b.n_t5_overrides == 2 && a->ov5[0].batch == 0 && a->ov5[0].position == 1 && a->ov5[0].row == 0 &&
              a->ov5[1].position == 2 && a->ov5[1].row == 1,
          "T5's slots: %d", b.n_t5_overrides);
    CHECK(b.n_cut_slots == 2 && b.n_cut_t5_slots == 2, "the long prompt's placeholder cut on both sides (%d, %d)",
          b.n_cut_slots, b.n_cut_t5_slots);
    const int32_t *t2 = a->tokens + 2 * SDT_PROMPT_TOKENS;
    CHECK(t2[0] == bos && t2[76] == eos, "the long prompt truncated to one sequence (end %d)", t2[76]);
    CHECK(!sdt_flow_prompts(tok, &rules, spm, &r5, prompts, 1, 0, &b, &err) && err.message[0], "t5_len 0: \"%s\"",
          err.message);
    free(a);
    sdt_spm_free(spm);
    sdt_tokenizer_free(tok);
    return sdt_test_finish("test_flow_prompts");
}
