/* test_data_order.c - batch order: permutations per epoch, seeds, size buckets, save/restore. */
#include <string.h>

#include "data/data_order.h"
#include "sdt_test.h"

static sdt_dataset fake_dataset(int n, int n_small)
{
    sdt_dataset ds = {0};
    ds.items = calloc((size_t)n, sizeof(sdt_dataset_item));
    ds.n_items = n;
    for (int i = 0; i < n; i++) {
        ds.items[i].width = i < n_small ? 64 : 128; /* two size buckets when n_small > 0 */
        ds.items[i].height = 64;
    }
    return ds;
}

static void test_epochs(uint64_t seed)
{
    sdt_dataset ds = fake_dataset(7, 0);
    sdt_data_order o;
    sdt_error error = {0};
    CHECK(sdt_data_order_init(&o, &ds, 2, seed, &error), "init: %s", error.message);
    CHECK(o.n_batches == 3, "7 images, batch 2: 3 batches per epoch");
    int64_t first_epoch[6];
    bool differs = false;
    for (int64_t e = 0; e < 4; e++) {
        int seen[7] = {0};
        for (int b = 0; b < 3; b++) {
            int64_t epoch;
            int index;
            const int *batch = sdt_data_order_next(&o, &epoch, &index);
            CHECK(batch && epoch == e && index == b, "epoch %lld batch %d reported as %lld/%d", (long long)e, b,
                  (long long)epoch, index);
            for (int k = 0; batch && k < 2; k++) {
                CHECK(batch[k] >= 0 && batch[k] < 7, "index in range");
                if (batch[k] >= 0 && batch[k] < 7) seen[batch[k]]++;
                if (e == 0)
                    first_epoch[b * 2 + k] = batch[k];
                else if (batch[k] != first_epoch[b * 2 + k])
                    differs = true;
            }
        }
        int distinct = 0;
        for (int i = 0; i < 7; i++) {
            CHECK(seen[i] <= 1, "image %d used %d times in one epoch", i, seen[i]);
            distinct += seen[i];
        }
        CHECK(distinct == 6, "6 distinct images per epoch (one left over)");
    }
    CHECK(differs, "epochs are shuffled differently");

    /* Batch size above the image count is clamped, as A1111 does. */
    sdt_data_order big;
    CHECK(sdt_data_order_init(&big, &ds, 50, seed, &error) && big.batch_size == 7 && big.n_batches == 1,
          "batch clamped to 7");
    sdt_data_order_free(&big);
    CHECK(!sdt_data_order_init(&big, &ds, 0, seed, &error) && strstr(error.message, "Batch size"), "batch 0 refused");
    sdt_data_order_free(&o);
    free(ds.items);
}

static void test_seed_and_resume(uint64_t seed)
{
    sdt_dataset ds = fake_dataset(10, 0);
    sdt_data_order a, b, c;
    sdt_error error = {0};
    CHECK(sdt_data_order_init(&a, &ds, 3, seed, &error), "a");
    CHECK(sdt_data_order_init(&b, &ds, 3, seed, &error), "b");
    CHECK(sdt_data_order_init(&c, &ds, 3, seed + 1, &error), "c");
    bool same = true, other_differs = false;
    int stop_at = 7; /* save the position mid-epoch */
    int64_t saved_epoch = 0;
    int saved_pos = 0;
    for (int i = 0; i < 20; i++) {
        if (i == stop_at) sdt_data_order_get_position(&a, &saved_epoch, &saved_pos);
        const int *x = sdt_data_order_next(&a, NULL, NULL), *y = sdt_data_order_next(&b, NULL, NULL),
                  *z = sdt_data_order_next(&c, NULL, NULL);
        same = same && !memcmp(x, y, 3 * sizeof(int));
        other_differs = other_differs || memcmp(x, z, 3 * sizeof(int));
    }
    CHECK(same, "same seed, same batches");
    CHECK(other_differs, "another seed, other batches");

    /* A fresh order restored to the saved position continues exactly as the original did. */
    sdt_data_order r, ref;
    CHECK(sdt_data_order_init(&r, &ds, 3, seed, &error), "r");
    CHECK(sdt_data_order_init(&ref, &ds, 3, seed, &error), "ref");
    CHECK(sdt_data_order_set_position(&r, saved_epoch, saved_pos, &error), "restore: %s", error.message);
    for (int i = 0; i < stop_at; i++) sdt_data_order_next(&ref, NULL, NULL);
    bool resumed_same = true;
    for (int i = 0; i < 13; i++)
        resumed_same = resumed_same && !memcmp(sdt_data_order_next(&r, NULL, NULL),
                                               sdt_data_order_next(&ref, NULL, NULL), 3 * sizeof(int));
    CHECK(resumed_same, "resumed order equals the uninterrupted one");
    CHECK(!sdt_data_order_set_position(&r, 0, 99, &error) && strstr(error.message, "batch size"), "bad position: %s",
          error.message);
    sdt_data_order_free(&a);
    sdt_data_order_free(&b);
    sdt_data_order_free(&c);
    sdt_data_order_free(&r);
    sdt_data_order_free(&ref);
    free(ds.items);
}

static void test_buckets(uint64_t seed)
{
    sdt_dataset ds = fake_dataset(11, 5); /* 5 of 64x64, 6 of 128x64 */
    sdt_data_order o;
    sdt_error error = {0};
    CHECK(sdt_data_order_init(&o, &ds, 2, seed, &error), "init");
    CHECK(o.n_groups == 2 && o.n_batches == 5, "2 groups, 5 batches");
    for (int i = 0; i < 50; i++) {
        const int *b = sdt_data_order_next(&o, NULL, NULL);
        CHECK(ds.items[b[0]].width == ds.items[b[1]].width, "a batch never mixes sizes");
    }
    sdt_data_order_free(&o);
    free(ds.items);
}

/* Data parallelism: W ranks with per-rank batch b walk the order one device with batch W*b walks,
 * each training a disjoint slice; together the slices are that device's batches. */
static void test_shards(uint64_t seed)
{
    sdt_dataset ds = fake_dataset(12, 0);
    sdt_error error;
    for (int world = 1; world <= 3; world++) {
        sdt_data_order global, rank_order[3];
        int per_rank = 2;
        CHECK(sdt_data_order_init(&global, &ds, world * per_rank, seed, &error), "global: %s", error.message);
        for (int r = 0; r < world; r++)
            CHECK(sdt_data_order_init(&rank_order[r], &ds, world * per_rank, seed, &error), "rank");
        for (int step = 0; step < 9; step++) {
            const int *want = sdt_data_order_next(&global, NULL, NULL);
            int seen[12] = {0};
            for (int r = 0; r < world; r++) {
                const int *batch = sdt_data_order_next(&rank_order[r], NULL, NULL), *shard = NULL;
                int count = 0;
                CHECK(sdt_data_order_shard(&rank_order[r], batch, world, r, &shard, &count, &error) &&
                          count == per_rank,
                      "world %d rank %d shard: %s", world, r, error.message);
                for (int i = 0; i < count; i++) {
                    CHECK(shard[i] == want[r * per_rank + i], "world %d step %d rank %d: item %d is the global batch's",
                          world, step, r, i);
                    seen[shard[i]]++;
                }
            }
            for (int i = 0; i < 12; i++)
                CHECK(seen[i] <= 1, "world %d step %d: image %d in two shards", world, step, i);
        }
        sdt_data_order_free(&global);
        for (int r = 0; r < world; r++) sdt_data_order_free(&rank_order[r]);
    }
    /* A global batch clamped to a small dataset that no longer splits is refused with the numbers. */
    sdt_data_order small;
    CHECK(sdt_data_order_init(&small, &ds, 16, seed, &error) && small.batch_size == 12, "clamped to 12");
    const int *batch = sdt_data_order_next(&small, NULL, NULL), *shard = NULL;
    int count = 0;
    CHECK(!sdt_data_order_shard(&small, batch, 5, 1, &shard, &count, &error) && error.code == SDT_ERR_VALIDATION &&
              strstr(error.message, "12 images") && strstr(error.message, "5 ranks"),
          "an uneven split is refused: %s", error.message);
    sdt_data_order_free(&small);
    free(ds.items);
}

int main(void)
{
    sdt_test_rng rng = sdt_test_rng_from_env("data_order");
    uint64_t seed = sdt_test_next(&rng);
    test_epochs(seed);
    test_seed_and_resume(seed);
    test_buckets(seed);
    test_shards(seed);
    return sdt_test_finish("data_order");
}
