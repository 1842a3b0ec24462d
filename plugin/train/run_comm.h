/* run_comm.h - a run's place in a data-parallel job (docs/abi.md 3.16): its rank, the job's world
 * size and the communicator the step engine sums over, and the numbering that makes W ranks draw
 * what one rank with the global batch would.
 *
 * One rank per process (devices NULL, world_size > 1): the communicator is NCCL's, opened from
 * comm_id on the run's CUDA backend; the test build takes one the test program provides instead
 * (testhooks/test_hooks.h), which the run does not own. One rank of a trainer that lists several
 * devices (its options' devices hold its one CUDA ordinal): the communicator comes from the trainer's
 * rank group (train/rank_group.h), even with one device. Otherwise world_size 0 or 1: no
 * communicator, and every number below is the one-rank number. */
#ifndef SDT_TRAIN_RUN_COMM_H
#define SDT_TRAIN_RUN_COMM_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "host/backend_select.h"
#include "train/rank_group.h"
#include "sdtrain.h"

typedef struct sdt_run_comm {
    int rank, world_size;  /* 0 and 1 with one rank */
    sdt_comm *comm;        /* NULL with one rank */
    bool owned;            /* opened here (NCCL): closed here */
    void *nccl_module;     /* the CUDA module's handle while the NCCL table is in use */
    bool ready;            /* every rank finished preparing (sdt_run_comm_ready) */
    bool ended;            /* the run reached its end (finished or interrupted) on every rank */
    sdt_rank_group *group; /* an in-process rank's group (not owned), else NULL */
    int group_index;       /* its place in the group */
} sdt_run_comm;

/* The options' rank and world size into rc: what decides who writes, known before the locks are
 * taken; and a test program's communicator (testhooks/test_hooks.h) right away. */
void sdt_run_comm_init(sdt_run_comm *rc, const sdt_train_options *o);
/* An in-process rank: its communicator comes from group at sdt_run_comm_open (before it). */
void sdt_run_comm_join(sdt_run_comm *rc, sdt_rank_group *group, int index);
/* NCCL's communicator on pb's backend for world_size > 1, unless init found the test program's;
 * prefix names the options in sentences. */
bool sdt_run_comm_open(sdt_run_comm *rc, const sdt_train_options *o, plugin_backend *pb, const char *prefix,
                       sdt_error *error);
/* The end of prepare: waits for every rank to have prepared (a rank that failed to makes it fail). */
bool sdt_run_comm_ready(sdt_run_comm *rc, sdt_error *error);
/* A rank closed before it was ready (its prepare failed), or before its run ended (a host that
 * destroys a prepared trainer without running it), aborts, so the others stop waiting. */
void sdt_run_comm_close(sdt_run_comm *rc);
/* Only rank 0 takes locks and writes files (every rank computes the same values). */
bool sdt_run_comm_writes(const sdt_run_comm *rc);
/* The global number of micro-batch `micro` of this rank's `accum` per step at `step`: the ranks'
 * micro-batches of one step interleave as one rank's accum x world_size would run them. */
uint64_t sdt_run_comm_micro(const sdt_run_comm *rc, int64_t step, int accum, int micro);
/* Sums a decision over the ranks: *flag becomes true on every rank when it is on any. */
bool sdt_run_comm_any(const sdt_run_comm *rc, bool *flag, sdt_error *error);
/* Rank 0's value on every rank (the others' are dropped: a sum with zeros keeps its bits), so a
 * decision taken on it (validation's best step, early stop) is the same everywhere. */
bool sdt_run_comm_from_rank0(const sdt_run_comm *rc, double *value, sdt_error *error);
/* This rank stopped after an error (why): every other rank's next collective fails naming it, so
 * no rank waits for the timeout. Harmless with one rank or when repeated. */
void sdt_run_comm_abort(sdt_run_comm *rc, const char *why);

#endif
