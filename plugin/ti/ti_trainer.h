/* ti_trainer.h - the seam between the ABI layer (ti_factory.c) and the textual-inversion
 * trainer. The ABI layer checks handles, struct sizes, states and the plain config fields;
 * the trainer (ti_job.c on the shared job, ti_embedding_ops.c) does the work behind these functions.
 *
 * Every function writes one sentence (file, field, fix) into *error on failure. Configs and specs
 * arrive complete (current sizeof, defaults filled in); their strings are borrowed for the call. */
#ifndef SDT_PLUGIN_TI_TRAINER_H
#define SDT_PLUGIN_TI_TRAINER_H

#include "sdt_error.h"

#include <stddef.h>

#include "train/run_control.h"
#include "train/run_loop.h"
#include "train/train_job.h"
#include "sdtrain.h"

/* Writes the new embedding file; its path goes into path_out. */
bool ti_create_embedding(const sdt_embedding_spec *spec, const sdt_host_callbacks *host,
                               char *path_out, size_t path_out_size, sdt_error *error);

/* All remaining validations (dataset, templates, token window, schedule, memory), then loads
 * models and data. On success *out is a job ready to run and *info is filled. The job may keep
 * host (the handle's copy of the callbacks, valid for the job's life). An interrupt requested on
 * control while it works stops it with SDT_ERR_INTERRUPTED (nothing saved). */
bool ti_job_prepare(const sdt_ti_config *config, const sdt_host_callbacks *host, const sdt_run_control *control,
                    sdt_train_job **out, sdt_prepare_info *info, sdt_error *error);

/* Reads an embedding file. *json_out (NULL when not wanted) receives a malloc'd JSON object
 * the caller frees with free(). */
bool ti_inspect_file(const char *path, sdt_embedding_info *info, char **json_out,
                           sdt_error *error);

#endif
