/* preview_prompts.h - what a preview grid shows: its prompts (rows), read from a text file
 * (preview_prompts_file: one prompt per line, blank lines and lines starting with # skipped,
 * UTF-8), and its seeds (columns, preview_seeds: "N" for N seeds or "S1, S2, ..." for those). */
#ifndef SDT_DATA_PREVIEW_PROMPTS_H
#define SDT_DATA_PREVIEW_PROMPTS_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "data/preview_grid.h"

typedef struct sdt_preview_prompts {
    int count;
    char **prompts; /* [count], each malloc'd */
} sdt_preview_prompts;

/* false + a VALIDATION sentence naming the file (and the line where there is one): unreadable,
 * not UTF-8, a NUL byte, no prompt in it, or more than SDT_PREVIEW_GRID_MAX_ROWS prompts. */
bool sdt_preview_prompts_load(const char *path, sdt_preview_prompts *out, sdt_error *error);
void sdt_preview_prompts_free(sdt_preview_prompts *p);

typedef struct sdt_preview_seeds {
    int count;   /* columns, 1..SDT_PREVIEW_GRID_MAX_COLS */
    bool listed; /* true: seeds[] holds them; false: count seeds from the run's preview seed on */
    uint64_t seeds[SDT_PREVIEW_GRID_MAX_COLS];
} sdt_preview_seeds;

/* NULL or "" is one seed (not listed). field names the option in the sentence of a bad text. */
bool sdt_preview_seeds_parse(const char *text, const char *field, sdt_preview_seeds *out, sdt_error *error);

#endif
