/* sdxl_test_prompts.h - random chunks as SDXL's two encoders read them, for the SDXL text tests
 * (header only): a start token (end - 1), random text, the end token (the vocabulary's last id),
 * then CLIP-L's padding (the end token) in tokens_l and bigG's (pad_g after the first end token,
 * sdt_tokens_pad_after_end) in tokens_g. */
#ifndef SDT_TESTS_SDXL_TEST_PROMPTS_H
#define SDT_TESTS_SDXL_TEST_PROMPTS_H

#include <stdint.h>
#include <string.h>

#include "sdt_test.h"
#include "tokenizer.h"

static inline void sdxl_test_chunks(sdt_test_rng *rng, int32_t vocab, int32_t pad_g, int chunks, int length,
                                    int32_t *tokens_l, int32_t *tokens_g)
{
    int32_t end = vocab - 1;
    for (int s = 0; s < chunks; s++) {
        int len = 6 + (int)(sdt_test_next(rng) % 40);
        int32_t *ids = tokens_l + s * length;
        ids[0] = end - 1;
        for (int t = 1; t < length; t++)
            ids[t] = t < len ? 1 + (int32_t)(sdt_test_next(rng) % (uint64_t)(end - 2)) : end;
        memcpy(tokens_g + s * length, ids, (size_t)length * sizeof(int32_t));
        sdt_tokens_pad_after_end(tokens_g + s * length, length, end, pad_g);
    }
}

#endif
