/* rank_group.h - the ranks of one trainer that lists several devices (in-process data parallelism,
 * docs/abi.md 3.16): one training job per listed device, each preparing and running on its own
 * thread, and the one place where their communicators are made.
 *
 * The communicators need every rank's backend (NCCL's group of ncclCommInitRank calls, one per
 * device, is ncclCommInitAll when the process is the whole job), so each rank's prepare waits in
 * sdt_rank_group_open until every rank has its backend, and the last to arrive opens them all. A
 * rank whose prepare fails before that point leaves the group (sdt_rank_group_leave), which fails
 * every waiting and later open at once with one sentence naming it; after that point its
 * communicator's abort tells the others (train/run_comm.h). The group also keeps which rank failed
 * first, so the trainer's run returns that rank's failure.
 *
 * The test build takes the ranks' communicators from the test program (testhooks/test_hooks.h) when
 * it provides them (ranks as threads on the CPU); otherwise they are NCCL's (CUDA backends only), but
 * one device that is the whole job trains without a communicator where NCCL cannot run (nothing to
 * sum: the plain one-device path on that device). */
#ifndef SDT_TRAIN_RANK_GROUP_H
#define SDT_TRAIN_RANK_GROUP_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "host/backend_select.h"
#include "sdtrain.h"
#include "train/options_copy.h"

typedef struct sdt_rank_group sdt_rank_group;

/* A group for the options' devices (checked: train_options.h): device_count ranks, the first being
 * rank of world_size (0 or 1: the process is the whole job of device_count ranks). NULL plus a
 * sentence when out of memory. */
sdt_rank_group *sdt_rank_group_new(const sdt_train_options *o, sdt_error *error);
void sdt_rank_group_free(sdt_rank_group *g);
int sdt_rank_group_world_size(const sdt_rank_group *g);
int sdt_rank_group_first_rank(const sdt_rank_group *g);

/* Rank `index`'s communicator over pb's backend, once every rank has its backend (the group's last
 * arrival opens them all; NULL for one device without NCCL, see above); *owned: the rank destroys it (NCCL's; the test program's is not). prefix
 * names the options in sentences. Fails at once when a rank left the group. */
bool sdt_rank_group_open(sdt_rank_group *g, int index, plugin_backend *pb, const char *prefix, sdt_comm **comm,
                         bool *owned, sdt_error *error);
/* Rank `index`'s prepare failed (why: its sentence): every rank waiting in, or later reaching,
 * sdt_rank_group_open fails naming it. Harmless once the communicators are open. */
void sdt_rank_group_leave(sdt_rank_group *g, int index, const char *why);
/* Rank `index` cannot run (its thread could not start): its communicator aborts, naming why, so the
 * other ranks stop at their next collective. Only while no call of that rank is in flight. */
void sdt_rank_group_abort(sdt_rank_group *g, int index, const char *why);
/* Rank `index` stopped after an error; the first such rank is kept (sdt_rank_group_first_failed). */
void sdt_rank_group_note_failure(sdt_rank_group *g, int index);
/* The index of the rank that failed first, or -1. */
int sdt_rank_group_first_failed(const sdt_rank_group *g);

#endif
