/* trainer_factory.c - "sdtrain.trainer/1" (1.7): one trainer for every method. prepare() takes the
 * shared options and the parts to train (an embedding, a hypernetwork, or both); this file holds
 * the one reader of sdt_trainer_config and its parts into a training request
 * (compose/train_request.h); the job is composed from it (compose/train_compose.h) and run by the
 * shared lifecycle (api/trainer_handle.h). What is one method's own and not training comes as
 * extensions looked up by id: the part files (api/part_files.h) and the hypernetwork applier
 * (api/hn_applier.h). Sentences name the fields as a host of this factory writes them:
 * "options->clip_value", "embedding->learn_rate", "hypernetwork->strength". */
#include <string.h>

#include "api/distributed_ext.h"
#include "api/factories.h"
#include "api/hn_applier.h"
#include "api/part_files.h"
#include "api/trainer_handle.h"
#include "host/copy_out.h"
#include "train/train_options.h"

#define TRAINER_MAGIC 0x54726e72u /* "Trnr" */

struct sdt_trainer {
    sdt_trainer_handle core;
};

/* ---- defaults ---- */

static void embedding_part_set_defaults(sdt_embedding_part *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->learn_rate = "0.005";
    p->save_image_with_embedding = true;
}

static void hypernetwork_part_set_defaults(sdt_hypernetwork_part *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->learn_rate = "0.00001";
    p->weight_decay = 0.01;
    p->strength = 1.0;
}

static sdt_status trainer_train_options_defaults(sdt_train_options *options)
{
    sdt_train_options defaults;
    sdt_train_options_set_defaults(&defaults, NULL); /* NULL: the parts' folder (sdt_trainer_config.options) */
    return sdt_defaults_write_out(options, &defaults, sizeof defaults);
}

static sdt_status trainer_embedding_part_defaults(sdt_embedding_part *part)
{
    sdt_embedding_part defaults;
    embedding_part_set_defaults(&defaults);
    return sdt_defaults_write_out(part, &defaults, sizeof defaults);
}

static sdt_status trainer_hypernetwork_part_defaults(sdt_hypernetwork_part *part)
{
    sdt_hypernetwork_part defaults;
    hypernetwork_part_set_defaults(&defaults);
    return sdt_defaults_write_out(part, &defaults, sizeof defaults);
}

/* ---- the reader ---- */

#define INVALID(...) sdt_fail(error, SDT_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define INVALID_FIELD(...) sdt_fail(error, SDT_ERR_VALIDATION, __VA_ARGS__)

static bool read_hypernetwork(const sdt_hypernetwork_part *host, sdt_train_request *rq, sdt_error *error)
{
    sdt_hypernetwork_part p;
    hypernetwork_part_set_defaults(&p);
    if (!sdt_struct_read_in(&p, sizeof p, host))
        return INVALID(
            "prepare(): config->hypernetwork->struct_size is not set; fill the part with hypernetwork_part_defaults() first.");
    if (p.reserved0 != 0)
        return INVALID_FIELD(
            "hypernetwork->reserved0 must be 0; fill the part with hypernetwork_part_defaults() first.");
    const sdt_train_options *o = &rq->options;
    rq->has_hypernetwork = true;
    rq->hypernetwork = (sdt_hypernetwork_settings){
        .path = p.hypernetwork_path,
        .schedules = {p.learn_rate, "hypernetwork->learn_rate", o->clip_mode, o->clip_value, "options->clip_value"},
        .weight_decay = p.weight_decay,
        .strength = p.strength,
        .preview_hypernetworks = p.preview_hypernetworks,
        .preview_hypernetworks_field = "hypernetwork->preview_hypernetworks",
        .preview_strength = p.preview_strength};
    return sdt_hypernetwork_settings_check(&rq->hypernetwork, "hypernetwork->", error);
}

static bool read_embedding(const sdt_embedding_part *host, sdt_train_request *rq, sdt_error *error)
{
    sdt_embedding_part p;
    embedding_part_set_defaults(&p);
    if (!sdt_struct_read_in(&p, sizeof p, host))
        return INVALID(
            "prepare(): config->embedding->struct_size is not set; fill the part with embedding_part_defaults() first.");
    bool reserved = false;
    for (size_t i = 0; i < sizeof p.reserved0; i++) reserved |= p.reserved0[i] != 0;
    if (reserved || p.reserved1 != 0)
        return INVALID_FIELD(
            "embedding->reserved0 and reserved1 must be 0; fill the part with embedding_part_defaults() first.");
    bool own_clip = p.clip_value != NULL; /* NULL: the embedding clips as the options say */
    const sdt_train_options *o = &rq->options;
    rq->has_embedding = true;
    rq->embedding = (sdt_embedding_settings){
        .path = p.embedding_path,
        .schedules = {p.learn_rate, "embedding->learn_rate", own_clip ? p.clip_mode : o->clip_mode,
                      own_clip ? p.clip_value : o->clip_value,
                      own_clip ? "embedding->clip_value" : "options->clip_value"},
        .save_cards = p.save_image_with_embedding,
        .encoders = p.encoders,
        .encoder_learn_rates = {p.learn_rate_clip_l, p.learn_rate_clip_g, p.learn_rate_t5xxl}};
    if (!sdt_embedding_settings_check(&rq->embedding, "embedding->", error)) return false;
    if (!own_clip &&
        p.clip_mode != SDT_CLIP_DISABLED) /* a mode without its value is a forgotten field, never ignored */
        return INVALID_FIELD(
            "embedding->clip_mode is set but embedding->clip_value is not; set the embedding's clip value "
            "too, e.g. \"0.1\" (without both the embedding clips as the shared options say).");
    if (own_clip && p.clip_mode > SDT_CLIP_NORM)
        return INVALID_FIELD("embedding->clip_mode is not one of disabled, value or norm; pick one of those.");
    if (own_clip && p.clip_mode != SDT_CLIP_DISABLED && !p.clip_value[0])
        return INVALID_FIELD(
            "The embedding's gradient clipping is on but embedding->clip_value is empty; set it, e.g. \"0.1\".");
    return true;
}

/* The one reader of sdt_trainer_config: the struct, the options, each part (the hypernetwork's
 * first, as its file is checked first), then the shared values. */
static bool read_config(const sdt_trainer_config *host, sdt_train_request *rq, sdt_error *error)
{
    sdt_trainer_config c;
    memset(&c, 0, sizeof c);
    if (!host || !sdt_struct_read_in(&c, sizeof c, host))
        return INVALID(
            "prepare(): config is NULL or config->struct_size is not set; zero an sdt_trainer_config and set "
            "struct_size = sizeof(sdt_trainer_config).");
    if (c.reserved0 != 0) return INVALID_FIELD("config->reserved0 must be 0; zero the config before filling it.");
    if (!c.embedding && !c.hypernetwork)
        return INVALID_FIELD("prepare(): nothing to train: set config->embedding, config->hypernetwork or both (joint "
                             "training), each filled with its part_defaults() first.");
    memset(rq, 0, sizeof *rq);
    if (!sdt_train_options_read(&rq->options, c.options, NULL, "options", error)) return false;
    if (!rq->options.log_dir)
        rq->options.log_dir = c.hypernetwork ? "hypernetworks" : "textual_inversion"; /* A1111's */
    rq->options_prefix = "options->";
    rq->train_options_prefix = "options->";
    return (!c.hypernetwork || read_hypernetwork(c.hypernetwork, rq, error)) &&
           (!c.embedding || read_embedding(c.embedding, rq, error)) &&
           sdt_train_options_check(&rq->options, "options->", error);
}

SDT_TRAINER_LIFECYCLE(trainer, sdt_trainer, TRAINER_MAGIC, sdt_trainer_config, read_config)

#define REQUIRE_TRAINER(t)                                                                                             \
    do {                                                                                                               \
        if (!trainer_valid(t)) return SDT_STATUS_INVALID_ARGUMENT;                                                     \
    } while (0)

/* ---- the extensions ---- */

static sdt_status ext_create_embedding(sdt_trainer *t, const sdt_embedding_spec *spec, char *path_buf,
                                       uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_create_embedding(&t->core, spec, path_buf, path_buf_size, needed);
}

static sdt_status ext_inspect_embedding(sdt_trainer *t, const char *path, sdt_embedding_info *info, char *json_buf,
                                        uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_inspect_embedding(&t->core, path, info, json_buf, json_buf_size, json_needed);
}

static sdt_status ext_create_hypernetwork(sdt_trainer *t, const sdt_hypernetwork_spec *spec, char *path_buf,
                                          uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_create_hypernetwork(&t->core, spec, path_buf, path_buf_size, needed);
}

static sdt_status ext_inspect_hypernetwork(sdt_trainer *t, const char *path, sdt_hypernetwork_info *info,
                                           char *json_buf, uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_inspect_hypernetwork(&t->core, path, info, json_buf, json_buf_size, json_needed);
}

static const sdt_embedding_files_ext embedding_files_ext = {
    .struct_size = sizeof(sdt_embedding_files_ext),
    .create_embedding = ext_create_embedding,
    .inspect = ext_inspect_embedding,
};

static const sdt_hypernetwork_files_ext hypernetwork_files_ext = {
    .struct_size = sizeof(sdt_hypernetwork_files_ext),
    .create_hypernetwork = ext_create_hypernetwork,
    .inspect = ext_inspect_hypernetwork,
};

static const sdt_hypernetwork_applier_ext hypernetwork_applier_ext = {
    .struct_size = sizeof(sdt_hypernetwork_applier_ext),
    .create = sdt_hn_applier_create,
    .destroy = sdt_hn_applier_destroy,
    .get_last_error = sdt_hn_applier_get_last_error,
    .add = sdt_hn_applier_add,
    .set_strength = sdt_hn_applier_set_strength,
    .apply_kv = sdt_hn_applier_apply_kv,
    .generate = sdt_hn_applier_generate,
};

static const void *trainer_get_extension(const char *extension_id)
{
    if (!extension_id) return NULL;
    if (strcmp(extension_id, SDT_EXT_EMBEDDING_FILES) == 0) return &embedding_files_ext;
    if (strcmp(extension_id, SDT_EXT_HYPERNETWORK_FILES) == 0) return &hypernetwork_files_ext;
    if (strcmp(extension_id, SDT_EXT_HYPERNETWORK_APPLIER) == 0) return &hypernetwork_applier_ext;
    if (strcmp(extension_id, SDT_EXT_DISTRIBUTED) == 0) return &sdt_distributed_ext_table;
    return NULL;
}

const sdt_trainer_factory sdt_trainer_factory_table = {
    .struct_size = sizeof(sdt_trainer_factory),
    .train_options_defaults = trainer_train_options_defaults,
    .embedding_part_defaults = trainer_embedding_part_defaults,
    .hypernetwork_part_defaults = trainer_hypernetwork_part_defaults,
    .create = trainer_create,
    .destroy = trainer_destroy,
    .get_last_error = trainer_get_last_error,
    .prepare = trainer_prepare,
    .run = trainer_run,
    .interrupt = trainer_interrupt,
    .get_run_state = trainer_get_run_state,
    .get_metrics = trainer_get_metrics,
    .save_state = trainer_save_state,
    .load_state = trainer_load_state,
    .get_extension = trainer_get_extension,
};
