/* fuzz_tokenizer.c - libFuzzer target for the tokenizer files and prompts
 * (models/tokenizer/tokenizer.c).
 *
 * Input: first byte chooses the mode.
 *   even: the rest is "vocab.json bytes \0 merges.txt bytes [\0 prompt]": parse
 *         both files, and when they load, tokenize the prompt.
 *   odd:  the rest is a prompt for a small built-in vocabulary with two
 *         placeholders added. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char builtin_vocab[] =
    "{\"a\": 0, \"b\": 1, \"c\": 2, \"a</w>\": 3, \"b</w>\": 4, \"c</w>\": 5, \"ab\": 6, \"abc</w>\": 7,"
    " \"<|startoftext|>\": 8, \"<|endoftext|>\": 9}";
static const char builtin_merges[] = "#version: 0.2\na b\nab c</w>\n";

static void exercise(sdt_tokenizer *t, const char *prompt)
{
    int32_t ids[SDT_CLIP_CONTEXT];
    sdt_encode_report rep;
    sdt_error error = {0};
    sdt_encode_options o = sdt_encode_defaults();
    o.watch_id = sdt_tokenizer_size(t) - 1;
    if (!sdt_tokenizer_encode(t, prompt, &o, ids, &rep, &error)) abort();
    if (rep.n_cut < 0 || rep.end_index < 1 || rep.end_index >= SDT_CLIP_CONTEXT ||
        ids[rep.end_index] != sdt_tokenizer_eos(t))
        abort();
    for (int i = 0; i < SDT_CLIP_CONTEXT; i++)
        if (ids[i] < 0 || ids[i] >= sdt_tokenizer_size(t)) abort();
    char *text = sdt_tokenizer_decode(t, ids, SDT_CLIP_CONTEXT);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    sdt_error error = {0};
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] % 2 == 0) {
        const char *sep = memchr(rest, 0, n);
        if (!sep) return 0;
        size_t vlen = (size_t)(sep - rest);
        const char *merges = sep + 1;
        size_t mlen = n - vlen - 1;
        const char *sep2 = memchr(merges, 0, mlen);
        char *prompt = NULL;
        if (sep2) {
            prompt = strndup(sep2 + 1, mlen - (size_t)(sep2 - merges) - 1);
            mlen = (size_t)(sep2 - merges);
        }
        error.message[0] = 0;
        sdt_tokenizer *t = sdt_tokenizer_load_memory(rest, vlen, merges, mlen, "vocab.json", "merges.txt", &error);
        if (!t && !error.message[0]) abort(); /* a rejection must explain itself */
        if (t) exercise(t, prompt ? prompt : "a b c abc");
        sdt_tokenizer_free(t);
        free(prompt);
        return 0;
    }
    static sdt_tokenizer *fixed;
    if (!fixed) {
        fixed = sdt_tokenizer_load_memory(builtin_vocab, strlen(builtin_vocab), builtin_merges, strlen(builtin_merges),
                                          "builtin", "builtin", &error);
        if (!fixed || !sdt_tokenizer_add_token(fixed, "<ph>", -1, NULL, &error) ||
            !sdt_tokenizer_add_token(fixed, "ab c", -1, NULL, &error))
            abort();
    }
    char *prompt = strndup(rest, n);
    exercise(fixed, prompt);
    free(prompt);
    return 0;
}
