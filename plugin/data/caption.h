/* caption.h - the [filewords] of an image, and the prompt built from it.
 *
 * Source (A1111 dataset.py): "<stem>.txt" next to the image when it exists,
 * otherwise the file name: stem, leading "^[-\d]+\s*" removed, then (when a
 * word regex is set) every match joined with the join string (default " ").
 * A regex with one capture group yields that group, as Python's re.findall does.
 *
 * Prompt building (A1111 create_text): pick a template line, split the caption
 * on ',', drop each tag unless random() > dropout, shuffle the tags, re-join
 * with ',', fill [filewords] then [name]. Draw order (line, drop-out draws,
 * shuffle) matches A1111; the RNG is ours (data_rng.h), so runs are
 * reproducible from the seed.
 */
#ifndef SDT_CAPTION_H
#define SDT_CAPTION_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "data/data_rng.h"
#include "data/template.h"

typedef struct sdt_caption_rules {
    const char *word_regex;  /* NULL or "" = whole stem (after the number prefix) */
    const char *join_string; /* NULL = " " */
} sdt_caption_rules;

/* Checks that the word regex compiles and has at most one group (pre-flight). */
bool sdt_caption_rules_check(const sdt_caption_rules *rules, sdt_error *error);

/* Caption from the file name only. NULL + error on a bad regex. */
char *sdt_caption_from_filename(const char *image_path, const sdt_caption_rules *rules, sdt_error *error);

/* Caption for an image: its .txt (trailing whitespace trimmed) or its file name.
 * NULL + error when the .txt exists but cannot be read or is not UTF-8. */
char *sdt_caption_for_image(const char *image_path, const sdt_caption_rules *rules, sdt_error *error);

typedef struct sdt_prompt_rules {
    bool shuffle_tags;
    double tag_dropout; /* 0..1: probability of dropping each tag */
    int keep_tokens;    /* the first N (non-empty) tags stay first, in order, and are never dropped
                         * (kohya's keep_tokens); they take no drop-out draw */
} sdt_prompt_rules;

/* Applies drop-out and shuffle to a caption's ','-separated tags. Without either,
 * the caption is returned unchanged; with them, tags are trimmed, empty tags
 * dropped and the rest joined with ", ": the kept tags, then the others (each
 * dropped unless random() > dropout, then shuffled). Newly allocated. */
char *sdt_caption_tags_apply(const char *caption, const sdt_prompt_rules *rules, sdt_data_rng *rng);

/* The full training prompt: a template line from rng, tags applied, placeholders
 * filled. line_index, when not NULL, receives the chosen line. Newly allocated. */
char *sdt_caption_prompt(const sdt_template *t, const char *caption, const char *name, const sdt_prompt_rules *rules,
                         sdt_data_rng *rng, int *line_index);

#endif
