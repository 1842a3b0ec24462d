/* ti_trainer_stub.c - stands in for the textual-inversion trainer until it is integrated
 * (see ti_trainer.h). Every entry point says plainly that this build cannot train yet.
 * Delete this file when plugin/ti/ (or wherever the trainer lives) implements ti_trainer.h. */
#include <stdio.h>

#include "ti_trainer.h"

static sdt_status not_built(const char *what, char *err, size_t err_size)
{
    snprintf(err, err_size,
             "This build of libsdtrain.so does not include the textual-inversion trainer yet, so it "
             "cannot %s; use a plugin build that has it.", what);
    return SDT_STATUS_UNSUPPORTED;
}

sdt_status ti_create_embedding(const sdt_embedding_spec *spec, const sdt_host_callbacks *host,
                               char *path_out, size_t path_out_size, char *err, size_t err_size)
{
    (void)spec; (void)host; (void)path_out; (void)path_out_size;
    return not_built("create embeddings", err, err_size);
}

sdt_status ti_job_prepare(const sdt_ti_config *config, const sdt_host_callbacks *host,
                          ti_job **out, sdt_prepare_info *info, char *err, size_t err_size)
{
    (void)config; (void)host; (void)info;
    *out = NULL;
    return not_built("train embeddings", err, err_size);
}

void ti_job_destroy(ti_job *job)
{
    (void)job;
}

const sdt_job_ops *ti_job_ops(void)
{
    return NULL;
}

sdt_run_params ti_job_run_params(const ti_job *job)
{
    (void)job;
    sdt_run_params none = { 0, 0 };
    return none;
}

sdt_status ti_job_save_state(ti_job *job, const char *path, char *err, size_t err_size)
{
    (void)job; (void)path;
    return not_built("save training state", err, err_size);
}

sdt_status ti_job_load_state(ti_job *job, const char *path, char *err, size_t err_size)
{
    (void)job; (void)path;
    return not_built("load training state", err, err_size);
}

sdt_status ti_inspect_file(const char *path, sdt_embedding_info *info, char **json_out,
                           char *err, size_t err_size)
{
    (void)path; (void)info;
    if (json_out) *json_out = NULL;
    return not_built("read embedding files", err, err_size);
}
