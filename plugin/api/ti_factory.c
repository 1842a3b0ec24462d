/* ti_factory.c - "sdtrain.textual_inversion/1" (deprecated in 1.7): an adapter over the trainer
 * factory for hosts built against 1.0-1.6. Its prepare reads sdt_ti_config into a training request
 * (api/ti_config.h, the struct's one reader) and prepares it as the trainer factory does; every
 * other member forwards to the shared lifecycle (api/trainer_handle.h) or the part-file calls
 * (api/part_files.h). Nothing here trains differently: the bytes and sentences are 1.6's. */
#include "api/factories.h"
#include "api/part_files.h"
#include "api/ti_config.h"
#include "api/trainer_handle.h"
#include "host/copy_out.h"

#define TI_TRAINER_MAGIC 0x54497472u /* "TItr" */

/* The shared trainer handle (api/trainer_handle.h) is all a textual-inversion trainer holds. */
struct sdt_ti_trainer {
    sdt_trainer_handle core;
};

SDT_TRAINER_LIFECYCLE(ti, sdt_ti_trainer, TI_TRAINER_MAGIC, sdt_ti_config, ti_config_read)

#define REQUIRE_TRAINER(t)                                                                                             \
    do {                                                                                                               \
        if (!ti_valid(t)) return SDT_STATUS_INVALID_ARGUMENT;                                                          \
    } while (0)

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

static sdt_status ti_create_embedding(sdt_ti_trainer *t, const sdt_embedding_spec *spec, char *path_buf,
                                      uint32_t path_buf_size, uint32_t *needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_create_embedding(&t->core, spec, path_buf, path_buf_size, needed);
}

static sdt_status ti_inspect(sdt_ti_trainer *t, const char *path, sdt_embedding_info *info, char *json_buf,
                             uint32_t json_buf_size, uint32_t *json_needed)
{
    REQUIRE_TRAINER(t);
    return sdt_part_files_inspect_embedding(&t->core, path, info, json_buf, json_buf_size, json_needed);
}

const sdt_ti_factory sdt_ti_factory_table = {
    .struct_size = sizeof(sdt_ti_factory),
    .config_defaults = ti_config_defaults,
    .create = ti_create,
    .destroy = ti_destroy,
    .get_last_error = ti_get_last_error,
    .create_embedding = ti_create_embedding,
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
