/* hn_factory.c - "sdtrain.hypernetwork/1" (1.2; deprecated in 1.7): an adapter over the trainer
 * factory for hosts built against 1.2-1.6. Its prepare reads sdt_hn_config (the struct's one
 * reader, below) into a training request and prepares it as the trainer factory does; every other
 * member forwards to the shared lifecycle (api/trainer_handle.h), the part-file calls
 * (api/part_files.h) or the applier (api/hn_applier.h). Sentences name the fields config.<field>
 * and config.train_options-><field>, as they always have. */
#include <string.h>

#include "api/factories.h"
#include "api/hn_applier.h"
#include "api/part_files.h"
#include "api/trainer_handle.h"
#include "host/copy_out.h"
#include "train/train_options.h"

#define HN_TRAINER_MAGIC 0x484e7472u /* "HNtr" */
#define HN_LOG_DIR "hypernetworks"
struct sdt_hn_trainer {
    sdt_trainer_handle core;
};

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

/* The joint-training fields' checks that need no file, each naming the field and the fix. */
static bool check_joint_fields(const sdt_hn_config *c, sdt_error *error)
{
    if (c->embedding_path && c->embedding_path[0] && (!c->embedding_learn_rate || !c->embedding_learn_rate[0]))
        return sdt_fail(
            error, SDT_ERR_VALIDATION,
            "Joint training needs config.embedding_learn_rate, e.g. \"0.005\", for the embedding's optimizer.");
    if (c->reserved1[0] || c->reserved1[1] || c->reserved1[2])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "config.reserved1 must be 0; fill the config with config_defaults() first.");
    if (c->embedding_clip_mode > SDT_CLIP_NORM)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "config.embedding_clip_mode is not one of disabled, value or norm; pick one of those.");
    if (!c->embedding_clip_value && c->embedding_clip_mode != SDT_CLIP_DISABLED)
        return sdt_fail(
            error, SDT_ERR_VALIDATION,
            "config.embedding_clip_mode is set but config.embedding_clip_value is not; set "
            "the embedding's clip value too, e.g. \"0.1\" (without both the embedding clips as the shared options say).");
    if (c->embedding_clip_value && c->embedding_clip_mode != SDT_CLIP_DISABLED && !c->embedding_clip_value[0])
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "The embedding's gradient clipping is on but config.embedding_clip_value is empty; "
                        "set it, e.g. \"0.1\".");
    return true;
}

/* The one reader of sdt_hn_config: the host's config (any struct_size from 1.2 on) and its options
 * into rq, then the checks that need no file in the order they always came. */
static bool hn_config_read(const sdt_hn_config *host, sdt_train_request *rq, sdt_error *error)
{
    sdt_hn_config c;
    hn_config_set_defaults(&c);
    if (!host || !sdt_struct_read_in(&c, sizeof c, host))
        return sdt_fail(
            error, SDT_ERR_INVALID_ARGUMENT,
            "prepare(): config is NULL or config->struct_size is not set; fill it with config_defaults() first.");
    memset(rq, 0, sizeof *rq);
    const sdt_train_options *o = &rq->options;
    if (!sdt_train_options_read(&rq->options, c.train_options, HN_LOG_DIR, "config.train_options", error)) return false;
    rq->options_prefix = "config.train_options->";
    rq->train_options_prefix = "config.train_options->";
    rq->has_hypernetwork = true;
    rq->hypernetwork = (sdt_hypernetwork_settings){.path = c.hypernetwork_path,
                                                   .schedules = {c.learn_rate, "config.learn_rate", o->clip_mode,
                                                                 o->clip_value, "config.train_options->clip_value"},
                                                   .weight_decay = c.weight_decay,
                                                   .strength = c.strength,
                                                   .preview_hypernetworks = c.preview_hypernetworks,
                                                   .preview_hypernetworks_field = "config.preview_hypernetworks",
                                                   .preview_strength = c.preview_strength};
    rq->has_embedding = c.embedding_path && c.embedding_path[0];
    bool own_clip = c.embedding_clip_value != NULL; /* 1.4: the embedding's own clip settings */
    rq->embedding = (sdt_embedding_settings){
        .path = c.embedding_path,
        .schedules = {c.embedding_learn_rate, "config.embedding_learn_rate",
                      own_clip ? c.embedding_clip_mode : o->clip_mode,
                      own_clip ? c.embedding_clip_value : o->clip_value,
                      own_clip ? "config.embedding_clip_value" : "config.train_options->clip_value"},
        .save_cards = c.save_image_with_embedding};
    if (c.reserved0 != 0)
        return sdt_fail(error, SDT_ERR_VALIDATION,
                        "config.reserved0 must be 0; fill the config with config_defaults() first.");
    return sdt_hypernetwork_settings_check(&rq->hypernetwork, "config.", error) && check_joint_fields(&c, error) &&
           sdt_train_options_check(o, "config.train_options->", error);
}

SDT_TRAINER_LIFECYCLE(hn, sdt_hn_trainer, HN_TRAINER_MAGIC, sdt_hn_config, hn_config_read)

#define REQUIRE_TRAINER(t)                                                                                             \
    do {                                                                                                               \
        if (!hn_valid(t)) return SDT_STATUS_INVALID_ARGUMENT;                                                          \
    } while (0)

static sdt_status hn_create_hypernetwork(sdt_hn_trainer *t, const sdt_hypernetwork_spec *spec, char *path_buf,
                                         uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_create_hypernetwork(&t->core, spec, path_buf, path_buf_size, needed);
}

static sdt_status hn_inspect(sdt_hn_trainer *t, const char *path, sdt_hypernetwork_info *info, char *json_buf,
                             uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_inspect_hypernetwork(&t->core, path, info, json_buf, json_buf_size, json_needed);
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
