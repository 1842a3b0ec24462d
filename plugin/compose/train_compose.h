/* train_compose.h - the one place that knows every kind of part: it builds a training job
 * (train/train_job.h) from a request's parts (compose/train_request.h): an embedding
 * (ti/ti_part.h), a hypernetwork (hn/hn_part.h), or both (joint training: two optimizers, two LR
 * schedules, one backward, one shared loss scale). The method folders never include each other;
 * what combines them lives here. */
#ifndef SDT_COMPOSE_TRAIN_COMPOSE_H
#define SDT_COMPOSE_TRAIN_COMPOSE_H

#include "sdt_error.h"

#include "compose/train_request.h"
#include "train/run_control.h"
#include "train/train_job.h"

/* The checks that need files, in the order a user meets them (the part's file first: a
 * hypernetwork's, its name, the shared paths, then the embedding's; the template; max steps; the
 * schedules), then the locks, the model, the data, the parameter groups and the plan. On success
 * *out is a job ready to run and *info is filled (vectors and embedding_dim when an embedding
 * trains). The job may keep host and control (the trainer handle's, valid for the job's life). */
bool sdt_compose_job(const sdt_train_request *rq, const sdt_host_callbacks *host, const sdt_run_control *control,
                     sdt_train_job **out, sdt_prepare_info *info, sdt_error *error);

#endif
