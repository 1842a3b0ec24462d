/* t5_test_vocab.h - the tiny T5 vocabulary the T5 tests read (header only): transformers' tokenizer.json of a
 * Unigram model, <pad> 0, </s> 1, <unk> 2, then "▁" 3, "▁a" 4, "▁the" 5, "▁cat" 6, "▁yellow" 7, "▁star" 8,
 * "▁dog" 9 ("a cat" is ids 4 and 6). The e2e tests write the same file (tests/e2e/flow_train_lib.sh). */
#ifndef SDT_TESTS_T5_TEST_VOCAB_H
#define SDT_TESTS_T5_TEST_VOCAB_H

#define SDT_TEST_T5_SP "\xE2\x96\x81" /* SentencePiece's word mark U+2581 */

#define SDT_TEST_T5_TOKENIZER_JSON                                                                                     \
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<pad>\",\"special\":true},"                                            \
    "{\"id\":1,\"content\":\"</s>\",\"special\":true},{\"id\":2,\"content\":\"<unk>\",\"special\":true}],"             \
    "\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"vocab\":[[\"<pad>\",0],[\"</s>\",0],[\"<unk>\",0],"                \
    "[\"" SDT_TEST_T5_SP "\",-2],[\"" SDT_TEST_T5_SP "a\",-1.5],[\"" SDT_TEST_T5_SP "the\",-1],[\"" SDT_TEST_T5_SP     \
    "cat\",-3],[\"" SDT_TEST_T5_SP "yellow\",-4],[\"" SDT_TEST_T5_SP "star\",-4],[\"" SDT_TEST_T5_SP                   \
    "dog\",-3]],\"byte_fallback\":false}}"

#endif
