/* suggest.c - see suggest.h. */
#include <stdlib.h>
#include <string.h>

#include "suggest.h"

/* Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
 * neighbours ("trian" -> "train": 1), over two rows of the table plus the one before. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    size_t *rows = malloc(3 * (m + 1) * sizeof *rows);
    if (!rows) return (size_t)-1;
    size_t *before = rows, *prev = rows + (m + 1), *cur = rows + 2 * (m + 1);
    for (size_t j = 0; j <= m; j++) prev[j] = j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = prev[j - 1] + cost;
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            cur[j] = best;
        }
        size_t *oldest = before;
        before = prev, prev = cur, cur = oldest;
    }
    size_t d = prev[m];
    free(rows);
    return d;
}

const char *suggest_nearest(const char *word, const char *const *candidates, size_t n)
{
    size_t limit = strlen(word) / 3 > 0 ? strlen(word) / 3 : 1;
    const char *best = NULL;
    size_t best_distance = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_distance) best = candidates[i], best_distance = d;
    }
    return best;
}
