/* hn_factory.c - the "sdtrain.hypernetwork/1" factory (ABI 1.2).
 *
 * The lifecycle members are the shared trainer handle's (api/trainer_handle.h), exactly as the
 * textual-inversion factory uses them; this file keeps the hypernetwork's own config and its
 * checks. create_hypernetwork() and inspect() are live (hn/hn_abi_ops.h); prepare() builds the
 * training job (hn/hn_job.h: the module on the UNet's K/V hook, and joint training with an
 * embedding) on the shared job (train/train_job.h). */
#include <stdlib.h>
#include <string.h>

#include "host/copy_out.h"
#include "api/factories.h"
#include "api/handle.h"
#include "host/host_log.h"
#include "api/trainer_handle.h"
#include "hn/hn_abi_ops.h"
#include "hn/hn_applier.h"
#include "hn/hn_job.h"
#include "train/train_options.h"

#define HN_TRAINER_MAGIC 0x484e7472u /* "HNtr" */
#define HN_LOG_DIR "hypernetworks"
struct sdt_hn_trainer {
    sdt_trainer_handle core;
};

SDT_TRAINER_LIFECYCLE(hn, sdt_hn_trainer, HN_TRAINER_MAGIC)

#define REQUIRE_TRAINER(t) do { if (!hn_valid(t)) return SDT_STATUS_INVALID_ARGUMENT; } while (0)

/* The config with its shared options: the form the method's prepare receives. */
typedef struct hn_prepared_config {
    sdt_hn_config config;
    sdt_train_options options;
} hn_prepared_config;

/* The method behind the shared lifecycle. */
static bool method_prepare(const void *config, const sdt_host_callbacks *host, sdt_run_control *control, void **job,
                           sdt_prepare_info *info, sdt_error *error)
{
    const hn_prepared_config *c = config;
    sdt_hn_job_settings s = {c->config.hypernetwork_path, c->config.learn_rate, c->config.weight_decay,
                             c->config.strength, c->config.embedding_path, c->config.embedding_learn_rate,
                             c->config.save_image_with_embedding, c->config.embedding_clip_mode,
                             c->config.embedding_clip_value, c->config.preview_hypernetworks,
                             c->config.preview_strength};
    sdt_train_job *made = NULL;
    bool ok = sdt_hn_job_prepare(&s, &c->options, host, control, &made, info, error);
    *job = made;
    return ok;
}

static const sdt_train_method hn_method = SDT_TRAIN_JOB_METHOD(method_prepare);

static void hn_config_set_defaults(sdt_hn_config *c)
{
    memset(c, 0, sizeof *c);
    c->struct_size = sizeof *c;
    c->learn_rate = "0.00001";
    c->weight_decay = 0.01;
    c->strength = 1.0;
    c->embedding_learn_rate = "0.005";
    c->save_image_with_embedding = true;
}

static sdt_status hn_config_defaults(sdt_hn_config *config)
{
    sdt_hn_config defaults;
    hn_config_set_defaults(&defaults);
    return sdt_defaults_write_out(config, &defaults, sizeof defaults);
}

static sdt_status hn_train_options_defaults(sdt_train_options *options)
{
    sdt_train_options defaults;
    sdt_train_options_set_defaults(&defaults, HN_LOG_DIR);
    return sdt_defaults_write_out(options, &defaults, sizeof defaults);
}

/* The checks that need no file: required fields and ranges, each naming the field and the fix. */
static bool hn_config_check(const sdt_hn_config *c, sdt_error *error)
{
    if (c->reserved0 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.reserved0 must be 0; fill the config with config_defaults() first.");
    if (!c->hypernetwork_path || !c->hypernetwork_path[0])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "Hypernetwork not selected: set config.hypernetwork_path to the .pt or .safetensors file to train.");
    if (!c->learn_rate || !c->learn_rate[0])
        return sdt_fail(error, SDT_ERR_VALIDATION, "Learning rate is empty: set config.learn_rate, e.g. \"0.00001\".");
    if (!(c->weight_decay >= 0 && c->weight_decay < 1))
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.weight_decay must be in [0, 1) (A1111's is 0.01).");
    if (!(c->strength > 0 && c->strength <= 10))
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.strength must be in (0, 10] (1 trains at full strength).");
    if (!(c->preview_strength >= -10 && c->preview_strength <= 10))
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.preview_strength must be in [-10, 10] (0 = the training strength).");
    if (c->embedding_path && c->embedding_path[0] && (!c->embedding_learn_rate || !c->embedding_learn_rate[0]))
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "Joint training needs config.embedding_learn_rate, e.g. \"0.005\", for the embedding's optimizer.");
    if (c->reserved1[0] || c->reserved1[1] || c->reserved1[2])
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.reserved1 must be 0; fill the config with config_defaults() first.");
    if (c->embedding_clip_mode > SDT_CLIP_NORM)
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.embedding_clip_mode is not one of disabled, value or norm; pick one of those.");
    if (!c->embedding_clip_value && c->embedding_clip_mode != SDT_CLIP_DISABLED)
        return sdt_fail(error, SDT_ERR_VALIDATION, "config.embedding_clip_mode is set but config.embedding_clip_value is not; set "
                        "the embedding's clip value too, e.g. \"0.1\" (without both the embedding clips as the shared options say).");
    if (c->embedding_clip_value && c->embedding_clip_mode != SDT_CLIP_DISABLED && !c->embedding_clip_value[0])
        return sdt_fail(error, SDT_ERR_VALIDATION, "The embedding's gradient clipping is on but config.embedding_clip_value is empty; "
                        "set it, e.g. \"0.1\".");
    return true;
}

static sdt_status hn_create(const sdt_host_callbacks *callbacks, sdt_hn_trainer **out, char *err, uint32_t err_size)
{
    sdt_trainer_handle *made = NULL;
    sdt_status st = sdt_trainer_create(sizeof(sdt_hn_trainer), HN_TRAINER_MAGIC, &hn_method, callbacks, "sdt_hn_trainer",
                                       &made, err, err_size);
    if (out) *out = (sdt_hn_trainer *)made;
    return st;
}

static sdt_status hn_create_hypernetwork(sdt_hn_trainer *t, const sdt_hypernetwork_spec *spec, char *path_buf,
                                         uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    sdt_status st = sdt_trainer_begin_call(&t->core, "create_hypernetwork");
    if (st != SDT_STATUS_OK) return st;
    sdt_hypernetwork_spec own;
    memset(&own, 0, sizeof own);
    own.struct_size = sizeof own;
    if (!spec || !sdt_struct_read_in(&own, sizeof own, spec))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT,
                               "create_hypernetwork(): spec is NULL or spec->struct_size is not set; set it to sizeof(sdt_hypernetwork_spec).");
    sdt_error error = {0};
    char path[4096] = "";
    if (!sdt_hn_abi_create(&own, path, sizeof path, &error)) return sdt_handle_fail_error(&t->core.base, &error);
    sdt_host_file_saved(&t->core.host, SDT_FILE_HYPERNETWORK, path, 0);
    if (!path_buf && path_buf_size == 0 && !needed) return SDT_STATUS_OK;
    st = sdt_copy_string_out(path, path_buf, path_buf_size, needed);
    if (st != SDT_STATUS_OK)
        return sdt_handle_fail(&t->core.base, st, "The hypernetwork was written, but its path needs %zu bytes and path_buf has %u.",
                               strlen(path) + 1, (unsigned)path_buf_size);
    return SDT_STATUS_OK;
}

static sdt_status hn_prepare(sdt_hn_trainer *t, const sdt_hn_config *config, sdt_prepare_info *info)
{
    REQUIRE_TRAINER(t);
    sdt_status st = sdt_trainer_begin_call(&t->core, "prepare");
    if (st != SDT_STATUS_OK) return st;
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT, "prepare(): info->struct_size is not set; set it to sizeof(sdt_prepare_info).");
    hn_prepared_config own;
    hn_config_set_defaults(&own.config);
    if (!config || !sdt_struct_read_in(&own.config, sizeof own.config, config))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT,
                               "prepare(): config is NULL or config->struct_size is not set; fill it with config_defaults() first.");
    sdt_error error = {0};
    if (!sdt_train_options_read(&own.options, own.config.train_options, HN_LOG_DIR, "config.train_options", &error) ||
        !hn_config_check(&own.config, &error) || !sdt_train_options_check(&own.options, "config.train_options->", &error))
        return sdt_handle_fail_error(&t->core.base, &error);
    return sdt_trainer_prepare(&t->core, &own, info);
}

static sdt_status hn_inspect(sdt_hn_trainer *t, const char *path, sdt_hypernetwork_info *info, char *json_buf,
                             uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    sdt_handle_clear_error(&t->core.base);
    if (!path || !path[0])
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT, "inspect(): path is empty; pass a hypernetwork file.");
    if (info && info->struct_size < sizeof(uint32_t))
        return sdt_handle_fail(&t->core.base, SDT_STATUS_INVALID_ARGUMENT,
                               "inspect(): info->struct_size is not set; set it to sizeof(sdt_hypernetwork_info).");
    bool want_json = json_buf || json_needed;
    sdt_hypernetwork_info found;
    memset(&found, 0, sizeof found);
    found.struct_size = sizeof found;
    char *json = NULL;
    sdt_error error = {0};
    if (!sdt_hn_abi_inspect(path, &found, want_json ? &json : NULL, &error)) {
        free(json);
        return sdt_handle_fail_error(&t->core.base, &error);
    }
    return sdt_handle_inspect_out(&t->core.base, info, &found, sizeof found, json, json_buf, json_buf_size, json_needed);
}

const sdt_hn_factory sdt_hn_factory_table = {
    .struct_size = sizeof(sdt_hn_factory),
    .config_defaults = hn_config_defaults,
    .create = hn_create,
    .destroy = hn_destroy,
    .get_last_error = hn_get_last_error,
    .create_hypernetwork = hn_create_hypernetwork,
    .prepare = hn_prepare,
    .run = hn_run,
    .interrupt = hn_interrupt,
    .get_run_state = hn_get_run_state,
    .get_metrics = hn_get_metrics,
    .save_state = hn_save_state,
    .load_state = hn_load_state,
    .inspect = hn_inspect,
    .train_options_defaults = hn_train_options_defaults,
    .applier_create = sdt_hn_applier_create,
    .applier_destroy = sdt_hn_applier_destroy,
    .applier_get_last_error = sdt_hn_applier_get_last_error,
    .applier_add = sdt_hn_applier_add,
    .applier_set_strength = sdt_hn_applier_set_strength,
    .applier_apply_kv = sdt_hn_applier_apply_kv,
    .applier_generate = sdt_hn_applier_generate,
};
