/* data_order.h - which images form each batch, epoch after epoch, from a seed.
 *
 * A1111's GroupedBatchSampler: images are grouped by exact size (one group
 * unless "Do not resize"); each epoch every group is shuffled and cut into full
 * batches, the remainders fill the missing batches (a group picked with
 * probability proportional to its remainder, images drawn with replacement),
 * and the batch order is shuffled. n_items / batch_size batches per epoch.
 *
 * An epoch's batches are a pure function of (seed, epoch), so the whole state
 * is (epoch, position): save those two numbers, restore them, and the run
 * continues with exactly the batches it would have had.
 */
#ifndef SDT_DATA_ORDER_H
#define SDT_DATA_ORDER_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"

typedef struct sdt_data_order {
    uint64_t seed;
    int batch_size;
    int n_items;
    int n_groups;
    int *group_of; /* [n_items] */
    int n_batches; /* per epoch */
    int64_t epoch; /* the epoch batches[] holds */
    int position;  /* next batch to hand out within the epoch */
    int *batches;  /* [n_batches * batch_size] item indices */
} sdt_data_order;

/* batch_size is clamped to the number of images (as A1111 does); the clamped
 * value is in o->batch_size. */
bool sdt_data_order_init(sdt_data_order *o, const sdt_dataset *ds, int batch_size, uint64_t seed, sdt_error *error);
void sdt_data_order_free(sdt_data_order *o);

/* The next batch (batch_size indices); moves to the next epoch when one ends.
 * epoch and index (may be NULL) receive where the batch sits. */
const int *sdt_data_order_next(sdt_data_order *o, int64_t *epoch, int *index);

/* Data parallelism (docs/abi.md 3.16): the order is made with the global batch (every rank's
 * batch together, o->batch_size), the same order one device with that batch uses, and rank `rank`
 * of `world_size` trains the rank-th slice of each global batch, so the ranks' shards are disjoint
 * and together are that batch. *shard points into batch; *count is the per-rank batch. A global
 * batch that does not split evenly (e.g. clamped to a small dataset) is a VALIDATION error naming
 * the numbers and the fix. */
bool sdt_data_order_shard(const sdt_data_order *o, const int *batch, int world_size, int rank, const int **shard,
                          int *count, sdt_error *error);

/* Resume support: where the next batch will come from, and jumping there. */
void sdt_data_order_get_position(const sdt_data_order *o, int64_t *epoch, int *position);
bool sdt_data_order_set_position(sdt_data_order *o, int64_t epoch, int position, sdt_error *error);

#endif
