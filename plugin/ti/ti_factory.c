/* ti_factory.c - the "sdtrain.textual_inversion/1" factory: the ABI face of the trainer.
 *
 * The lifecycle (create, destroy, last error, prepare's bookkeeping, run, interrupt, metrics,
 * state files) is the shared trainer handle's (api/trainer_handle.h); this file keeps what is
 * textual inversion's own: its config struct and checks, create_embedding and inspect. The work
 * is behind ti_trainer.h. Every call that can fail clears the last error on entry and leaves a
 * sentence on failure. */
#include <stdlib.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/factories.h"
#include "api/handle.h"
#include "host/host_log.h"
#include "api/trainer_handle.h"
#include "checkpoint_describe.h"
#include "ti/ti_config.h"
#include "ti/ti_trainer.h"

#define TI_TRAINER_MAGIC 0x54497472u /* "TItr" */

/* The shared trainer handle (api/trainer_handle.h) is all a textual-inversion trainer holds. */
struct sdt_ti_trainer {
    sdt_trainer_handle core;
};

SDT_TRAINER_LIFECYCLE(ti, sdt_ti_trainer, TI_TRAINER_MAGIC)

#define REQUIRE_TRAINER(t) do { if (!ti_valid(t)) return SDT_STATUS_INVALID_ARGUMENT; } while (0)

/* The method behind the shared lifecycle. */
static bool method_prepare(const void *config, const sdt_host_callbacks *host, sdt_run_control *control, void **job,
                           sdt_prepare_info *info, sdt_error *error)
{
    sdt_train_job *made = NULL;
    bool ok = ti_job_prepare(config, host, control, &made, info, error);
    *job = made;
    return ok;
}

static const sdt_train_method ti_method = SDT_TRAIN_JOB_METHOD(method_prepare);

static sdt_status ti_config_defaults(sdt_ti_config *config)
{
    sdt_ti_config defaults;
    ti_config_set_defaults(&defaults);
    return sdt_defaults_write_out(config, &defaults, sizeof defaults);
}

static sdt_status ti_train_options_defaults(sdt_train_options *options)
{
    sdt_train_options defaults;
    ti_train_options_set_defaults(&defaults);
    return sdt_defaults_write_out(options, &defaults, sizeof defaults);
}

static sdt_status ti_create(const sdt_host_callbacks *callbacks, sdt_ti_trainer **out, char *err, uint32_t err_size)
{
    sdt_trainer_handle *made = NULL;
    sdt_status st = sdt_trainer_create(sizeof(sdt_ti_trainer), TI_TRAINER_MAGIC, &ti_method, callbacks, "sdt_ti_trainer",
                                       &made, err, err_size);
    if (out) *out = (sdt_ti_trainer *)made;
    return st;
}

static sdt_status ti_create_embedding_abi(sdt_ti_trainer *t, const sdt_embedding_spec *spec, char *path_buf,
                                          uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    sdt_status st = sdt_trainer_begin_call(&t->core, "create_embedding");
    if (st != SDT_STATUS_OK) return st;
    sdt_embedding_spec own;
    ti_spec_set_defaults(&own);
    if (!spec || !sdt_struct_read_in(&own, sizeof own, spec))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT,
                               "create_embedding(): spec is NULL or spec->struct_size is not set; set it to sizeof(sdt_embedding_spec).");
    sdt_error error = {0};
    char path[4096] = "";
    if (!ti_spec_check(&own, &error) || !ti_create_embedding(&own, &t->core.host, path, sizeof path, &error))
        return sdt_handle_fail_error(&t->core.base, &error);
    sdt_host_file_saved(&t->core.host, SDT_FILE_EMBEDDING, path, 0);
    if (!path_buf && path_buf_size == 0 && !needed) return SDT_STATUS_OK;
    st = sdt_copy_string_out(path, path_buf, path_buf_size, needed);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(&t->core.base, st, "The embedding was written, but its path needs %zu bytes and path_buf has %u.",
                               strlen(path) + 1, (unsigned)path_buf_size);
    return SDT_STATUS_OK;
}

static sdt_status ti_prepare(sdt_ti_trainer *t, const sdt_ti_config *config, sdt_prepare_info *info)
{
    REQUIRE_TRAINER(t);
    sdt_status st = sdt_trainer_begin_call(&t->core, "prepare");
    if (st != SDT_STATUS_OK) return st;
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT, "prepare(): info->struct_size is not set; set it to sizeof(sdt_prepare_info).");
    sdt_ti_config own;
    ti_config_set_defaults(&own);
    if (!config || !sdt_struct_read_in(&own, sizeof own, config))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT,
                               "prepare(): config is NULL or config->struct_size is not set; fill it with config_defaults() first.");
    sdt_error error = {0};
    if (!ti_config_take_train_options(&own, &error) || !ti_config_check(&own, &error))
        return sdt_handle_fail_error(&t->core.base, &error);
    return sdt_trainer_prepare(&t->core, &own, info);
}

static sdt_status ti_inspect(sdt_ti_trainer *t, const char *path, sdt_embedding_info *info, char *json_buf,
                             uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->core.base);
    if (!path || !path[0]) return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): path is empty; pass an embedding file.");
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): info->struct_size is not set; set it to sizeof(sdt_embedding_info).");
    bool want_json = json_buf || json_needed;
    sdt_embedding_info found;
    memset(&found, 0, sizeof found);
    found.struct_size = sizeof found;
    char *json = NULL;
    sdt_error error = {0};
    if (!ti_inspect_file(path, &found, want_json ? &json : NULL, &error)) {
        free(json);
        /* the JSON alone (no info to fill) may describe a model checkpoint instead */
        bool is_checkpoint = false;
        sdt_error model_error = {0};
        json = !info && want_json ? sd_checkpoint_describe_json(path, &is_checkpoint, &model_error) : NULL;
        if (!json) return sdt_handle_fail_error(&t->core.base, is_checkpoint ? &model_error : &error);
    }
    return sdt_handle_inspect_out(&t->core.base, info, &found, sizeof found, json, json_buf, json_buf_size, json_needed);
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
    .train_options_defaults = ti_train_options_defaults,
};
