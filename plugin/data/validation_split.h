/* validation_split.h - which images of a dataset are held out for validation (--validation-split).
 *
 * round(fraction * n) images, at least 1 and at most n - 1, chosen by a partial Fisher-Yates
 * shuffle from a stream derived from the run's seed alone: the same seed and dataset hold out
 * the same files in every run and on every resume, and no draw of the training RNG is used. */
#ifndef SDT_DATA_VALIDATION_SPLIT_H
#define SDT_DATA_VALIDATION_SPLIT_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

/* held_out[0..n) set to true for the chosen items (the others false); *n_held their count.
 * false + a VALIDATION error when n < 2 (nothing can be held out and still train). */
bool sdt_validation_split_choose(int n, double fraction, uint64_t seed, bool *held_out, int *n_held, sdt_error *error);

#endif
