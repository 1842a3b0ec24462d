/* abi_types_anchor.c - makes every public type of sdtrain.h reachable from one exported
 * function, so abidw/abidiff see the layout of the factory tables and structs (which the
 * plugin hands out as const void * and libabigail could not follow). Built only for the check. */
#include "sdtrain.h"

__attribute__((visibility("default"))) void
sdt_abi_types_anchor(const sdt_entry *entry, const sdt_ti_factory *ti, const sdt_loss_scaler_factory *scaler,
                     const sdt_ti_config *config, const sdt_embedding_spec *spec, const sdt_prepare_info *prepare,
                     const sdt_metrics *metrics, const sdt_embedding_info *info, const sdt_host_callbacks *callbacks,
                     const sdt_preview *preview, const sdt_saved_file *saved,
                     const sdt_loss_scaler_config *scaler_config, sdt_status status, sdt_run_state state,
                     sdt_file_kind kind, sdt_clip_mode clip, sdt_latent_sampling latent, sdt_precision precision,
                     sdt_device_choice device, sdt_embedding_file_format format, sdt_log_level level);

void sdt_abi_types_anchor(const sdt_entry *entry, const sdt_ti_factory *ti, const sdt_loss_scaler_factory *scaler,
                          const sdt_ti_config *config, const sdt_embedding_spec *spec, const sdt_prepare_info *prepare,
                          const sdt_metrics *metrics, const sdt_embedding_info *info,
                          const sdt_host_callbacks *callbacks, const sdt_preview *preview, const sdt_saved_file *saved,
                          const sdt_loss_scaler_config *scaler_config, sdt_status status, sdt_run_state state,
                          sdt_file_kind kind, sdt_clip_mode clip, sdt_latent_sampling latent, sdt_precision precision,
                          sdt_device_choice device, sdt_embedding_file_format format, sdt_log_level level)
{
    (void)entry;
    (void)ti;
    (void)scaler;
    (void)config;
    (void)spec;
    (void)prepare;
    (void)metrics;
    (void)info;
    (void)callbacks;
    (void)preview;
    (void)saved;
    (void)scaler_config;
    (void)status;
    (void)state;
    (void)kind;
    (void)clip;
    (void)latent;
    (void)precision;
    (void)device;
    (void)format;
    (void)level;
}

/* The types ABI 1.2 added: the hypernetwork factory and the shared training options. */
__attribute__((visibility("default"))) void
sdt_abi_types_anchor_1_2(const sdt_hn_factory *hn, const sdt_hn_config *hn_config, const sdt_hypernetwork_spec *hn_spec,
                         const sdt_hypernetwork_info *hn_info, const sdt_train_options *options);

void sdt_abi_types_anchor_1_2(const sdt_hn_factory *hn, const sdt_hn_config *hn_config,
                              const sdt_hypernetwork_spec *hn_spec, const sdt_hypernetwork_info *hn_info,
                              const sdt_train_options *options)
{
    (void)hn;
    (void)hn_config;
    (void)hn_spec;
    (void)hn_info;
    (void)options;
}

/* The type ABI 1.3 added: the prediction type of sdt_ti_config and sdt_train_options. */
__attribute__((visibility("default"))) void sdt_abi_types_anchor_1_3(sdt_prediction_type prediction);

void sdt_abi_types_anchor_1_3(sdt_prediction_type prediction)
{
    (void)prediction;
}

/* The type ABI 1.4 added: the K/V kind of the hypernetwork applier (the factory's new members
 * are reached through sdt_hn_factory above). */
__attribute__((visibility("default"))) void sdt_abi_types_anchor_1_4(sdt_kv_kind kind);

void sdt_abi_types_anchor_1_4(sdt_kv_kind kind)
{
    (void)kind;
}

/* The types ABI 1.5 added: the loss type and the LR scheduler of sdt_train_options. */
__attribute__((visibility("default"))) void sdt_abi_types_anchor_1_5(sdt_loss_type loss, sdt_lr_scheduler scheduler);

void sdt_abi_types_anchor_1_5(sdt_loss_type loss, sdt_lr_scheduler scheduler)
{
    (void)loss;
    (void)scheduler;
}

/* The types ABI 1.7 added: the trainer factory, its config and parts, and its extension tables. */
__attribute__((visibility("default"))) void sdt_abi_types_anchor_1_7(
    const sdt_trainer_factory *trainer, const sdt_trainer_config *config, const sdt_embedding_part *embedding,
    const sdt_hypernetwork_part *hypernetwork, const sdt_embedding_files_ext *embedding_files,
    const sdt_hypernetwork_files_ext *hypernetwork_files, const sdt_hypernetwork_applier_ext *applier);

void sdt_abi_types_anchor_1_7(const sdt_trainer_factory *trainer, const sdt_trainer_config *config,
                              const sdt_embedding_part *embedding, const sdt_hypernetwork_part *hypernetwork,
                              const sdt_embedding_files_ext *embedding_files,
                              const sdt_hypernetwork_files_ext *hypernetwork_files,
                              const sdt_hypernetwork_applier_ext *applier)
{
    (void)trainer;
    (void)config;
    (void)embedding;
    (void)hypernetwork;
    (void)embedding_files;
    (void)hypernetwork_files;
    (void)applier;
}

/* The type ABI 1.8 added: the distributed extension's table (the options' fields are sdt_train_options'). */
__attribute__((visibility("default"))) void sdt_abi_types_anchor_1_8(const sdt_distributed_ext *distributed);

void sdt_abi_types_anchor_1_8(const sdt_distributed_ext *distributed)
{
    (void)distributed;
}
