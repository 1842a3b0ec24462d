/* header_c11.c - sdtrain.h alone compiles as C11 with -Wall -Wextra -Werror -pedantic, and its
 * layout promises hold: struct_size first everywhere, enums 32 bits wide. */
#include "sdtrain.h"

#include <stddef.h>

_Static_assert(offsetof(sdt_entry, abi_version) == 0, "the version is the entry's first field");
_Static_assert(sizeof(sdt_status) == 4 && sizeof(sdt_run_state) == 4, "enums are 32-bit");
_Static_assert(offsetof(sdt_ti_config, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(sdt_metrics, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(sdt_host_callbacks, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(sdt_ti_factory, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(sdt_ti_config, max_steps) % 8 == 0, "64-bit fields aligned without hidden padding");
_Static_assert(offsetof(sdt_ti_config, v_prediction) == offsetof(sdt_ti_config, anomaly_mode) + 4 &&
                   offsetof(sdt_ti_config, v_prediction) % 8 == 0,
               "fields appended in 1.1 start past 1.0's tail padding (docs/abi.md 3.6)");
_Static_assert(offsetof(sdt_ti_config, save_state_every_seconds) == offsetof(sdt_ti_config, tokenizer_path) + 8,
               "the config field appended in 1.2 follows 1.1's last field without padding");
_Static_assert(offsetof(sdt_ti_config, prediction_type) == offsetof(sdt_ti_config, train_options) + sizeof(void *) &&
                   offsetof(sdt_train_options, prediction_type) ==
                       offsetof(sdt_train_options, gradient_checkpointing) + 3 &&
                   offsetof(sdt_train_options, prediction_type) % 8 == 0,
               "the fields appended in 1.3 start at 1.2's sizeof, past its tail padding (docs/abi.md 3.6)");
_Static_assert(sizeof(sdt_prediction_type) == 4 && sizeof(sdt_kv_kind) == 4, "enums are 32-bit");
_Static_assert(offsetof(sdt_hn_factory, applier_create) ==
                   offsetof(sdt_hn_factory, train_options_defaults) + sizeof(void *),
               "the applier's members (1.4) are appended after 1.2's last member");
_Static_assert(offsetof(sdt_train_options, save_state_every_seconds) == offsetof(sdt_train_options, reserved2) + 4 &&
                   offsetof(sdt_train_options, save_state_every_seconds) % 8 == 0 &&
                   offsetof(sdt_hn_config, save_image_with_embedding) ==
                       offsetof(sdt_hn_config, embedding_learn_rate) + sizeof(void *) &&
                   offsetof(sdt_hn_config, embedding_clip_mode) ==
                       offsetof(sdt_hn_config, save_image_with_embedding) + 4 &&
                   offsetof(sdt_hn_config, embedding_clip_value) % 8 == 0,
               "the option fields appended in 1.4 start at 1.3's sizeof (docs/abi.md 3.6)");
_Static_assert(offsetof(sdt_hn_config, preview_hypernetworks) ==
                   offsetof(sdt_hn_config, embedding_clip_value) + sizeof(void *),
               "the config fields appended in 1.4 follow the embedding's settings (1.4) without padding");
_Static_assert(offsetof(sdt_train_options, loss_type) == offsetof(sdt_train_options, save_state_every_seconds) + 8 &&
                   offsetof(sdt_train_options, warmup_steps) == offsetof(sdt_train_options, loss_type) + 24 &&
                   offsetof(sdt_train_options, huber_delta) == offsetof(sdt_train_options, warmup_steps) + 24 &&
                   sizeof(sdt_loss_type) == 4 && sizeof(sdt_lr_scheduler) == 4,
               "the loss options appended in 1.5 start at 1.4's sizeof and pack without padding (docs/abi.md 3.6)");
_Static_assert(
    offsetof(sdt_train_options, validation_dir) == offsetof(sdt_train_options, reserved3) + 3 &&
        offsetof(sdt_train_options, ema_every) == offsetof(sdt_train_options, ema_decay) + 8 &&
        sizeof(sdt_train_options) % 8 == 0,
    "the validation and EMA fields appended in 1.5 follow the data options and end without tail padding (docs/abi.md 3.13)");
_Static_assert(
    offsetof(sdt_train_options, bucket_max_area) == offsetof(sdt_train_options, reserved4) + 5 &&
        offsetof(sdt_train_options, bucket_step) == offsetof(sdt_train_options, bucket_max_area) + 12 &&
        offsetof(sdt_train_options, buckets) == offsetof(sdt_train_options, bucket_step) + 4 &&
        offsetof(sdt_train_options, reserved5) == offsetof(sdt_train_options, random_crop) + 1 &&
        offsetof(sdt_train_options, reserved5) + 6 == offsetof(sdt_train_options, deterministic),
    "the bucket options appended in 1.5 follow the validation fields and end without tail padding (docs/abi.md 3.14)");
_Static_assert(offsetof(sdt_train_options, deterministic) % 8 == 0 &&
                   offsetof(sdt_train_options, reserved6) == offsetof(sdt_train_options, deterministic) + 1 &&
                   offsetof(sdt_train_options, reserved6) + 7 == offsetof(sdt_train_options, world_size),
               "deterministic (1.6) starts at 1.5's sizeof and its block ends without tail padding (docs/abi.md 3.15)");
_Static_assert(offsetof(sdt_train_options, world_size) == offsetof(sdt_train_options, reserved6) + 7 &&
                   offsetof(sdt_train_options, devices) == offsetof(sdt_train_options, world_size) + 8 &&
                   offsetof(sdt_train_options, device_count) == offsetof(sdt_train_options, devices) + sizeof(void *) &&
                   offsetof(sdt_train_options, comm_id) == offsetof(sdt_train_options, comm_timeout_seconds) + 4 &&
                   offsetof(sdt_train_options, comm_id) + 128 == offsetof(sdt_train_options, clip_l_path),
               "the data-parallel block (1.8) starts at 1.6's sizeof and ends without tail padding (docs/abi.md 3.16)");
_Static_assert(offsetof(sdt_train_options, clip_l_path) % 8 == 0 &&
                   offsetof(sdt_train_options, logit_mean) ==
                       offsetof(sdt_train_options, clip_l_path) + 6 * sizeof(void *) &&
                   offsetof(sdt_train_options, t5_max_length) == offsetof(sdt_train_options, logit_mean) + 5 * 8 &&
                   offsetof(sdt_train_options, reserved7) + 4 == offsetof(sdt_train_options, cuda_graph),
               "the flow block (1.9) starts at 1.8's sizeof and ends without tail padding (docs/abi.md 3.17)");
_Static_assert(offsetof(sdt_embedding_part, encoders) == offsetof(sdt_embedding_part, reserved0) + 7 &&
                   offsetof(sdt_embedding_part, learn_rate_t5xxl) + sizeof(void *) == sizeof(sdt_embedding_part) &&
                   offsetof(sdt_embedding_spec, clip_l_path) ==
                       offsetof(sdt_embedding_spec, tokenizer_path) + sizeof(void *) &&
                   offsetof(sdt_generate_request, clip_l_path) ==
                       offsetof(sdt_generate_request, sampler) + sizeof(void *),
               "the encoder fields appended in 1.9 start at 1.8's sizeof of each struct (docs/abi.md 3.17)");
_Static_assert(offsetof(sdt_generate_request, t5_max_length) ==
                       offsetof(sdt_generate_request, vae_path) + sizeof(void *) &&
                   offsetof(sdt_generate_request, reserved1) + 4 == sizeof(sdt_generate_request),
               "the generate request's T5 length (1.10) starts at 1.9's sizeof and ends without tail padding "
               "(docs/abi.md 3.18)");
_Static_assert(offsetof(sdt_train_options, cuda_graph) == offsetof(sdt_train_options, reserved7) + 4 &&
                   offsetof(sdt_train_options, reserved8) + 4 == sizeof(sdt_train_options),
               "the CUDA graph switch (1.11) starts at 1.10's sizeof and ends without tail padding (docs/abi.md 3.19)");
_Static_assert(offsetof(sdt_embedding_spec, tokenizer_path) == offsetof(sdt_embedding_spec, overwrite) + 8,
               "the spec field appended in 1.1 starts past 1.0's tail padding (docs/abi.md 3.6)");

_Static_assert(offsetof(sdt_train_options, preview_prompts_file) == offsetof(sdt_train_options, huber_delta) + 8 &&
                   offsetof(sdt_train_options, reserved3) == offsetof(sdt_train_options, flip) + 1 &&
                   offsetof(sdt_train_options, validation_dir) == offsetof(sdt_train_options, reserved3) + 3 &&
                   offsetof(sdt_generate_request, sampler) ==
                       offsetof(sdt_generate_request, embedding_path) + sizeof(void *),
               "the preview and data options appended in 1.5 follow the loss options without padding");

int main(void)
{
    sdt_version v = SDT_ABI_VERSION_INIT;
    return v.major == SDT_ABI_VERSION_MAJOR ? 0 : 1;
}
