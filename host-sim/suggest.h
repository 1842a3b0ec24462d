/* suggest.h - "did you mean": the candidate nearest a mistyped word (a command, an option). */
#ifndef SDT_HOST_SUGGEST_H
#define SDT_HOST_SUGGEST_H

#include <stddef.h>

/* The candidate nearest word by edit distance (a swap of two neighbours counts one), when it is
 * close enough to be a typo of it (at most a third of the word's letters, at least one); NULL
 * when none is. */
const char *suggest_nearest(const char *word, const char *const *candidates, size_t n);

#endif
