/* template.h - prompt template files: one prompt per line with [name] and [filewords].
 *
 * Read as A1111 reads them (dataset.py): every line stripped of surrounding
 * whitespace, so a blank line in the middle is an empty prompt; a final newline
 * adds no line. Filling replaces [filewords] first, then [name], so a [name]
 * inside a caption is also replaced (A1111 commit 9a1aff64).
 */
#ifndef SDT_TEMPLATE_H
#define SDT_TEMPLATE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "data/data_rng.h"

typedef struct sdt_template {
    char **lines;
    int n_lines;
    bool has_name;      /* some line contains [name] */
    bool has_filewords; /* some line contains [filewords] */
} sdt_template;

/* Parses template text (UTF-8; a BOM is dropped). origin names it in errors. */
bool sdt_template_parse(const char *text, size_t len, const char *origin, sdt_template *out, sdt_error *error);
/* Reads and parses a template file. */
bool sdt_template_load(const char *path, sdt_template *out, sdt_error *error);
void sdt_template_free(sdt_template *t);

/* Pre-flight check for textual inversion: false + a sentence when the template
 * has no line, or no line with [name] (the embedding would never be in a prompt
 * and would get no gradient). */
bool sdt_template_check_for_embedding(const sdt_template *t, const char *origin, sdt_error *error);

/* Index of a line chosen uniformly with rng (one draw). */
int sdt_template_pick(const sdt_template *t, sdt_data_rng *rng);

/* line with [filewords] -> filewords, then [name] -> name. Newly allocated (free()). */
char *sdt_template_fill(const char *line, const char *name, const char *filewords);

/* Replaces every occurrence of needle in text. Newly allocated (free()). */
char *sdt_string_replace_all(const char *text, const char *needle, const char *replacement);

#endif
