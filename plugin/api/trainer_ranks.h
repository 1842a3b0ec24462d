/* trainer_ranks.h - one trainer handle over several devices (in-process data parallelism,
 * docs/abi.md 3.16): the options' `devices` become one training job per device, ranks
 * rank .. rank + device_count - 1, in one rank group (train/rank_group.h).
 *
 * The host sees one trainer: prepare, run, interrupt, metrics and the state calls act on the
 * ranks together. Rank 0 prepares and runs on the caller's thread with the host's callbacks and
 * run control, so the host hears one progress stream from the thread it called on; every other
 * rank prepares and runs on a thread of its own with no callbacks (rank 0's lines, metrics and
 * saved files are the job's: the ranks compute the same values and only rank 0 writes). Each rank
 * works on its CUDA device as its thread's current one, set around its work and put back, so the
 * host's thread keeps its device. */
#ifndef SDT_PLUGIN_TRAINER_RANKS_H
#define SDT_PLUGIN_TRAINER_RANKS_H

#include "sdt_error.h"

#include "compose/train_request.h"
#include "train/run_control.h"
#include "sdtrain.h"

struct sdt_train_method; /* api/trainer_handle.h */
typedef struct sdt_trainer_ranks sdt_trainer_ranks;

/* Prepares one job per device of rq->options.devices (every rank at once, each its own backend on
 * its device); control is the handle's (an interrupt stops every rank's preparation). A rank that
 * fails stops the others; the sentence is the first failing rank's. *info: rank 0's (the per-rank
 * batch). */
bool sdt_trainer_ranks_prepare(const struct sdt_train_method *method, const sdt_train_request *rq,
                               const sdt_host_callbacks *host, sdt_run_control *control, sdt_trainer_ranks **out,
                               sdt_prepare_info *info, sdt_error *error);
/* Runs every rank until they end together; control (the handle's, already RUNNING) and host are rank
 * 0's. A failure of any rank stops all: the status is that rank's, the sentence rank 0's (which names
 * it, its cause and what rank 0 saved), or the failing rank's own when rank 0 ended well. The host's
 * interrupt reaches control alone: rank 0 sums it with the other ranks before each step, and all stop. */
sdt_status sdt_trainer_ranks_run(sdt_trainer_ranks *r, sdt_run_control *control, const sdt_host_callbacks *host,
                                 sdt_error *error);
/* Rank 0 saves the state (it holds what every rank holds); a state loads into every rank. */
bool sdt_trainer_ranks_save_state(sdt_trainer_ranks *r, const char *path, sdt_error *error);
bool sdt_trainer_ranks_load_state(sdt_trainer_ranks *r, const char *path, sdt_error *error);
void sdt_trainer_ranks_destroy(sdt_trainer_ranks *r);

#endif
