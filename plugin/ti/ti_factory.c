/* ti_factory.c - the "sdtrain.textual_inversion/1" factory: the ABI face of the trainer.
 *
 * This layer owns handle checks, struct_size handling, states and threads; the work is behind
 * ti_trainer.h. Every function that can fail clears the handle's last error on entry and leaves
 * a sentence on failure. */
#include <stdlib.h>
#include <string.h>

#include "api/copy_out.h"
#include "api/factories.h"
#include "api/handle.h"
#include "api/host_log.h"
#include "train/run_control.h"
#include "ti/ti_config.h"
#include "ti/ti_trainer.h"

#define TI_TRAINER_MAGIC 0x54497472u /* "TItr" */

struct sdt_ti_trainer {
    sdt_handle base;
    sdt_host_callbacks host;   /* the plugin's own copy */
    sdt_run_control control;
    ti_job *job;               /* NULL until prepare() succeeds */
};

static bool valid(const sdt_ti_trainer *t)
{
    return t && sdt_handle_is(&t->base, TI_TRAINER_MAGIC);
}

/* Handles the "not a trainer" case the same way everywhere: no handle to put a sentence on. */
#define REQUIRE_TRAINER(t) do { if (!valid(t)) return SDT_STATUS_INVALID_ARGUMENT; } while (0)

static sdt_status ti_config_defaults(sdt_ti_config *config)
{
    if (!config || config->struct_size < sizeof(uint32_t)) return SDT_STATUS_INVALID_ARGUMENT;
    sdt_ti_config defaults;
    ti_config_set_defaults(&defaults);
    sdt_struct_write_out(config, &defaults, sizeof defaults);
    return SDT_STATUS_OK;
}

static sdt_status ti_create(const sdt_host_callbacks *callbacks, sdt_ti_trainer **out, char *err, uint32_t err_size)
{
    if (!out) {
        if (err && err_size) sdt_copy_string_out("create(): the out pointer is NULL; pass the address of an sdt_ti_trainer pointer.", err, err_size, NULL);
        return SDT_STATUS_INVALID_ARGUMENT;
    }
    *out = NULL;
    sdt_ti_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        if (err && err_size) sdt_copy_string_out("Out of memory while creating a trainer.", err, err_size, NULL);
        return SDT_STATUS_OUT_OF_MEMORY;
    }
    if (!sdt_host_callbacks_adopt(&t->host, callbacks)) {
        free(t);
        if (err && err_size)
            sdt_copy_string_out("create(): callbacks->struct_size is smaller than its own field; set it to sizeof(sdt_host_callbacks).", err, err_size, NULL);
        return SDT_STATUS_INVALID_ARGUMENT;
    }
    sdt_handle_init(&t->base, TI_TRAINER_MAGIC);
    sdt_run_control_init(&t->control);
    if (err && err_size) err[0] = '\0';
    *out = t;
    return SDT_STATUS_OK;
}

static void ti_destroy(sdt_ti_trainer *t)
{
    if (!valid(t)) return;
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) {
        /* Freeing now would pull the memory from under run(); refusing leaks one trainer,
         * which is the lesser harm. The host broke rule [main thread]; tell it. */
        sdt_run_control_request_interrupt(&t->control);
        sdt_host_log(&t->host, SDT_LOG_ERROR,
                     "destroy() was called while run() is in progress; the trainer is interrupted but not "
                     "freed. Call interrupt(), wait for run() to return, then destroy().");
        return;
    }
    ti_job_destroy(t->job);
    sdt_run_control_fini(&t->control);
    sdt_handle_fini(&t->base);
    free(t);
}

static sdt_status ti_get_last_error(const sdt_ti_trainer *t, char *buf, uint32_t buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    return sdt_handle_copy_error(&t->base, buf, buf_size, needed);
}

static sdt_status refuse_while_running(sdt_ti_trainer *t, const char *call)
{
    return sdt_handle_fail(&t->base, SDT_STATUS_BAD_STATE,
                           "%s() was called while run() is in progress; interrupt() and wait for run() to return first.", call);
}

static sdt_status ti_create_embedding_abi(sdt_ti_trainer *t, const sdt_embedding_spec *spec, char *path_buf,
                                          uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->base);
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) return refuse_while_running(t, "create_embedding");
    sdt_embedding_spec own;
    ti_spec_set_defaults(&own);
    if (!spec || !sdt_struct_read_in(&own, sizeof own, spec))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT,
                               "create_embedding(): spec is NULL or spec->struct_size is not set; set it to sizeof(sdt_embedding_spec).");
    sdt_error error = {0};
    char path[4096] = "";
    if (!ti_spec_check(&own, &error) || !ti_create_embedding(&own, &t->host, path, sizeof path, &error))
        return sdt_handle_fail_error(&t->base, &error);
    sdt_host_file_saved(&t->host, SDT_FILE_EMBEDDING, path, 0);
    if (!path_buf && path_buf_size == 0 && !needed) return SDT_STATUS_OK;
    sdt_status st = sdt_copy_string_out(path, path_buf, path_buf_size, needed);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(&t->base, st, "The embedding was written, but its path needs %zu bytes and path_buf has %u.",
                               strlen(path) + 1, (unsigned)path_buf_size);
    return SDT_STATUS_OK;
}

static void drop_job(sdt_ti_trainer *t)
{
    ti_job_destroy(t->job);
    t->job = NULL;
    sdt_run_control_set_state(&t->control, SDT_RUN_IDLE);
}

static sdt_status ti_prepare(sdt_ti_trainer *t, const sdt_ti_config *config, sdt_prepare_info *info)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->base);
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) return refuse_while_running(t, "prepare");
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "prepare(): info->struct_size is not set; set it to sizeof(sdt_prepare_info).");
    sdt_ti_config own;
    ti_config_set_defaults(&own);
    if (!config || !sdt_struct_read_in(&own, sizeof own, config))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT,
                               "prepare(): config is NULL or config->struct_size is not set; fill it with config_defaults() first.");
    drop_job(t);
    sdt_run_control_reset(&t->control);
    sdt_error error = {0};
    sdt_prepare_info found;
    memset(&found, 0, sizeof found);
    found.struct_size = sizeof found;
    if (!ti_config_check(&own, &error) || !ti_job_prepare(&own, &t->host, &t->job, &found, &error)) {
        t->job = NULL;
        return sdt_handle_fail_error(&t->base, &error);
    }
    if (info) sdt_struct_write_out(info, &found, sizeof found);
    sdt_run_control_set_state(&t->control, SDT_RUN_PREPARED);
    return SDT_STATUS_OK;
}

static sdt_status ti_run(sdt_ti_trainer *t)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->base);
    if (!t->job || !sdt_run_control_begin_run(&t->control)) {
        sdt_run_state s = sdt_run_control_state(&t->control);
        if (s == SDT_RUN_RUNNING) return refuse_while_running(t, "run");
        return sdt_handle_fail(&t->base, SDT_STATUS_BAD_STATE,
                               "run() needs a freshly prepared trainer; call prepare() first (to continue an interrupted run, prepare with resume_state_path).");
    }
    sdt_error error = {0};
    sdt_run_params params = ti_job_run_params(t->job);
    sdt_status st = sdt_run_job(ti_job_ops(), t->job, &params, &t->control, &t->host, &error);
    if (st < 0) return sdt_handle_fail_error(&t->base, &error);
    return st;
}

static sdt_status ti_interrupt(sdt_ti_trainer *t)
{
    REQUIRE_TRAINER(t);
    sdt_run_control_request_interrupt(&t->control);
    return SDT_STATUS_OK;
}

static sdt_status ti_get_run_state(const sdt_ti_trainer *t, sdt_run_state *state)
{
    REQUIRE_TRAINER(t);
    if (!state) return SDT_STATUS_INVALID_ARGUMENT;
    *state = sdt_run_control_state(&t->control);
    return SDT_STATUS_OK;
}

static sdt_status ti_get_metrics(const sdt_ti_trainer *t, sdt_metrics *metrics)
{
    REQUIRE_TRAINER(t);
    if (!metrics || metrics->struct_size < sizeof(uint32_t)) return SDT_STATUS_INVALID_ARGUMENT;
    sdt_metrics latest;
    sdt_run_control_latest(&t->control, &latest);
    sdt_struct_write_out(metrics, &latest, sizeof latest);
    return SDT_STATUS_OK;
}

typedef bool (*state_io_fn)(ti_job *, const char *, sdt_error *);

static sdt_status state_io(sdt_ti_trainer *t, const char *path, const char *call, state_io_fn io)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->base);
    if (sdt_run_control_state(&t->control) == SDT_RUN_RUNNING) return refuse_while_running(t, call);
    if (!path || !path[0]) return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "%s(): path is empty; pass a file path.", call);
    if (!t->job) return sdt_handle_fail(&t->base, SDT_STATUS_BAD_STATE, "%s() needs a prepared trainer; call prepare() first.", call);
    sdt_error error = {0};
    return io(t->job, path, &error) ? SDT_STATUS_OK : sdt_handle_fail_error(&t->base, &error);
}

static sdt_status ti_save_state(sdt_ti_trainer *t, const char *path)
{
    return state_io(t, path, "save_state", ti_job_save_state);
}

static sdt_status ti_load_state(sdt_ti_trainer *t, const char *path)
{
    return state_io(t, path, "load_state", ti_job_load_state);
}

static sdt_status ti_inspect(sdt_ti_trainer *t, const char *path, sdt_embedding_info *info, char *json_buf,
                             uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->base);
    if (!path || !path[0]) return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): path is empty; pass an embedding file.");
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): info->struct_size is not set; set it to sizeof(sdt_embedding_info).");
    bool want_json = json_buf || json_needed;
    sdt_embedding_info found;
    memset(&found, 0, sizeof found);
    found.struct_size = sizeof found;
    char *json = NULL;
    sdt_error error = {0};
    if (!ti_inspect_file(path, &found, want_json ? &json : NULL, &error)) {
        free(json);
        return sdt_handle_fail_error(&t->base, &error);
    }
    if (info) sdt_struct_write_out(info, &found, sizeof found);
    sdt_status st = SDT_STATUS_OK;
    if (want_json) st = sdt_copy_string_out(json, json_buf, json_buf_size, json_needed);
    free(json);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(&t->base, st, "inspect(): the JSON did not fit json_buf (%u bytes); *json_needed says the size.",
                               (unsigned)json_buf_size);
    return SDT_STATUS_OK;
}

const sdt_ti_factory sdt_ti_factory_table = {
    .struct_size = sizeof(sdt_ti_factory),
    .config_defaults = ti_config_defaults,
    .create = ti_create,
    .destroy = ti_destroy,
    .get_last_error = ti_get_last_error,
    .create_embedding = ti_create_embedding_abi,
    .prepare = ti_prepare,
    .run = ti_run,
    .interrupt = ti_interrupt,
    .get_run_state = ti_get_run_state,
    .get_metrics = ti_get_metrics,
    .save_state = ti_save_state,
    .load_state = ti_load_state,
    .inspect = ti_inspect,
};
