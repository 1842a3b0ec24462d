/* demo_corpus.h - the built-in English text sdt-make-tokenizer learns from when
 * no corpus file is given: caption and prompt-template phrasing plus a few
 * hundred common words, enough for the tiny model's vocabulary. */
#ifndef SDT_DEMO_CORPUS_H
#define SDT_DEMO_CORPUS_H

extern const char sdt_demo_corpus[];

#endif
