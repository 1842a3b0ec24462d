/* dataset_test_util.h - looking up what the dataset loader produced, shared by the data tests. */
#ifndef SDT_DATASET_TEST_UTIL_H
#define SDT_DATASET_TEST_UTIL_H

#include <glib.h>

#include "data/dataset.h"

/* The loaded item whose path ends with name, or NULL. */
static inline const sdt_dataset_item *find_item(const sdt_dataset *ds, const char *name)
{
    for (int i = 0; i < ds->n_items; i++)
        if (g_str_has_suffix(ds->items[i].path, name)) return &ds->items[i];
    return NULL;
}

#endif
