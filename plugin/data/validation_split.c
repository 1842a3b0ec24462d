/* validation_split.c - see validation_split.h. */
#include "data/validation_split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_rng.h"

/* Keeps the split's stream apart from every other use of the seed (data order, templates). */
#define SPLIT_STREAM 0x56414c4944415445ull /* "VALIDATE" */

bool sdt_validation_split_choose(int n, double fraction, uint64_t seed, bool *held_out, int *n_held, sdt_error *error)
{
    if (n < 2)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "the dataset has %d image(s), so none can be held out for validation and "
                        "still leave one to train on; add images, or use a separate validation folder",
                        n);
    int count = (int)lround(fraction * n);
    if (count < 1) count = 1;
    if (count > n - 1) count = n - 1;
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) return sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "out of host memory choosing the validation images");
    for (int i = 0; i < n; i++) order[i] = i;
    sdt_data_rng rng = sdt_data_rng_derived(seed, SPLIT_STREAM);
    for (int i = 0; i < count; i++) { /* the first `count` places of a uniform shuffle */
        int j = i + (int)sdt_data_rng_below(&rng, (uint64_t)(n - i));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    memset(held_out, 0, (size_t)n * sizeof *held_out);
    for (int i = 0; i < count; i++) held_out[order[i]] = true;
    free(order);
    *n_held = count;
    return true;
}
