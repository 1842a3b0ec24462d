/* clip_bpe_rules.h - the fixed rules of CLIP's byte-level BPE, shared by the
 * tokenizer (models/tokenizer/tokenizer.c) and the vocabulary trainer (models/tools/), so
 * a trained vocabulary splits text exactly as the tokenizer will. */
#ifndef SDT_MODELS_CLIP_BPE_RULES_H
#define SDT_MODELS_CLIP_BPE_RULES_H

#define CLIP_START_TOKEN "<|startoftext|>"
#define CLIP_END_TOKEN "<|endoftext|>"
#define CLIP_WORD_END "</w>" /* suffix of a word's last symbol */

/* CLIP's pre-tokenizer (simple_tokenizer.py); compile it case-insensitively. */
extern const char clip_pretoken_pattern[];

/* GPT-2/CLIP bytes_to_unicode: sym[b] is the NUL-terminated UTF-8 of the
 * printable character standing for byte b. Printable Latin-1 bytes stand for
 * themselves; the rest are shifted to U+0100.., in byte order. CLIP's vocabulary
 * lists the 256 stand-ins in ascending code point order. */
void clip_byte_symbols(char sym[256][4]);

/* The code point of byte b's stand-in (below U+0200). */
unsigned clip_byte_code_point(unsigned char b);

#endif
