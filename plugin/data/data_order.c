/* data_order.c - seeded, resumable batch order; see data_order.h. */
#include "data/data_order.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_rng.h"

void sdt_data_order_free(sdt_data_order *o)
{
    if (!o) return;
    free(o->group_of);
    free(o->batches);
    memset(o, 0, sizeof(*o));
}

static void shuffle_ints(int *a, int n, sdt_data_rng *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)sdt_data_rng_below(rng, (uint64_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* Fills o->batches for epoch. */
static bool build_epoch(sdt_data_order *o, int64_t epoch)
{
    const int b = o->batch_size;
    sdt_data_rng rng = sdt_data_rng_derived(o->seed, (uint64_t)epoch);
    int *members = malloc((size_t)o->n_items * sizeof(int)); /* items sorted by group */
    int *group_start = calloc((size_t)o->n_groups + 1, sizeof(int));
    int *batch_perm = malloc((size_t)o->n_batches * sizeof(int));
    int *unordered = malloc((size_t)o->n_batches * (size_t)b * sizeof(int));
    bool ok = members && group_start && batch_perm && unordered;
    if (ok) {
        for (int i = 0; i < o->n_items; i++) group_start[o->group_of[i] + 1]++;
        for (int g = 0; g < o->n_groups; g++) group_start[g + 1] += group_start[g];
        int *fill = malloc((size_t)o->n_groups * sizeof(int));
        ok = fill != NULL;
        if (ok) {
            memcpy(fill, group_start, (size_t)o->n_groups * sizeof(int));
            for (int i = 0; i < o->n_items; i++) members[fill[o->group_of[i]]++] = i;
            free(fill);
        }
    }
    if (ok) {
        int made = 0;
        int64_t remainder_total = 0;
        for (int g = 0; g < o->n_groups; g++) {
            int *m = members + group_start[g], size = group_start[g + 1] - group_start[g];
            shuffle_ints(m, size, &rng);
            for (int k = 0; k + b <= size && made < o->n_batches; k += b, made++)
                memcpy(unordered + (size_t)made * b, m + k, (size_t)b * sizeof(int));
            remainder_total += size % b;
        }
        /* Missing batches come from the groups' remainders, weighted by their size. */
        for (; made < o->n_batches; made++) {
            int64_t pick = remainder_total > 0 ? (int64_t)sdt_data_rng_below(&rng, (uint64_t)remainder_total) : 0;
            int g = 0;
            for (; g < o->n_groups - 1; g++) {
                int64_t r = (group_start[g + 1] - group_start[g]) % b;
                if (pick < r) break;
                pick -= r;
            }
            int size = group_start[g + 1] - group_start[g];
            for (int k = 0; k < b; k++)
                unordered[(size_t)made * b + k] =
                    members[group_start[g] + (int)sdt_data_rng_below(&rng, (uint64_t)size)];
        }
        for (int i = 0; i < o->n_batches; i++) batch_perm[i] = i;
        shuffle_ints(batch_perm, o->n_batches, &rng);
        for (int i = 0; i < o->n_batches; i++)
            memcpy(o->batches + (size_t)i * b, unordered + (size_t)batch_perm[i] * b, (size_t)b * sizeof(int));
        o->epoch = epoch;
    }
    free(members);
    free(group_start);
    free(batch_perm);
    free(unordered);
    return ok;
}

bool sdt_data_order_init(sdt_data_order *o, const sdt_dataset *ds, int batch_size, uint64_t seed, sdt_error *error)
{
    memset(o, 0, sizeof(*o));
    if (ds->n_items <= 0) {
        sdt_fail(error, SDT_ERR_VALIDATION, "data order: the dataset has no images");
        return false;
    }
    if (batch_size <= 0) {
        sdt_fail(error, SDT_ERR_VALIDATION, "Batch size must be positive (it is %d)", batch_size);
        return false;
    }
    o->seed = seed;
    o->n_items = ds->n_items;
    o->batch_size = batch_size < ds->n_items ? batch_size : ds->n_items;
    o->n_batches = ds->n_items / o->batch_size;
    o->group_of = malloc((size_t)ds->n_items * sizeof(int));
    o->batches = malloc((size_t)o->n_batches * (size_t)o->batch_size * sizeof(int));
    if (!o->group_of || !o->batches) {
        sdt_data_order_free(o);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "data order: out of memory");
        return false;
    }
    /* Groups numbered by first appearance in the (name-sorted) dataset. */
    for (int i = 0; i < ds->n_items; i++) {
        o->group_of[i] = -1;
        for (int j = 0; j < i; j++)
            if (ds->items[j].width == ds->items[i].width && ds->items[j].height == ds->items[i].height) {
                o->group_of[i] = o->group_of[j];
                break;
            }
        if (o->group_of[i] < 0) o->group_of[i] = o->n_groups++;
    }
    if (!build_epoch(o, 0)) {
        sdt_data_order_free(o);
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "data order: out of memory");
        return false;
    }
    return true;
}

const int *sdt_data_order_next(sdt_data_order *o, int64_t *epoch, int *index)
{
    if (o->position >= o->n_batches) {
        if (!build_epoch(o, o->epoch + 1)) return NULL;
        o->position = 0;
    }
    if (epoch) *epoch = o->epoch;
    if (index) *index = o->position;
    return o->batches + (size_t)o->position++ * o->batch_size;
}

bool sdt_data_order_shard(const sdt_data_order *o, const int *batch, int world_size, int rank, const int **shard,
                          int *count, sdt_error *error)
{
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return sdt_fail(error, SDT_ERR_INTERNAL, "data order: rank %d of %d ranks", rank, world_size);
    if (o->batch_size % world_size != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "data order: the global batch of %d images (%d images in the dataset cap it) does not split "
                        "evenly over %d ranks; use a batch size per device that the dataset holds %d times",
                        o->batch_size, o->n_items, world_size, world_size);
    *count = o->batch_size / world_size;
    *shard = batch + (size_t)rank * (size_t)*count;
    return true;
}

void sdt_data_order_get_position(const sdt_data_order *o, int64_t *epoch, int *position)
{
    *epoch = o->epoch;
    *position = o->position;
}

bool sdt_data_order_set_position(sdt_data_order *o, int64_t epoch, int position, sdt_error *error)
{
    if (epoch < 0 || position < 0 || position > o->n_batches) {
        sdt_fail(error, SDT_ERR_VALIDATION,
                 "data order: position epoch %" PRId64 " batch %d does not fit this dataset (%d batches per epoch); "
                 "resume with the same dataset and batch size",
                 epoch, position, o->n_batches);
        return false;
    }
    if (epoch != o->epoch && !build_epoch(o, epoch)) {
        sdt_fail(error, SDT_ERR_OUT_OF_MEMORY, "data order: out of memory");
        return false;
    }
    o->position = position;
    return true;
}
