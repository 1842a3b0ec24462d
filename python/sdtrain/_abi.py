"""ctypes mirror of abi/sdtrain.h: every struct, enum and function-table the binding uses.

Rules (docs/abi.md section 3):
- Each struct lists its fields in the header's order, with the header's version blocks marked
  the same way ("---- appended in 1.N ----"). A field the header appends is appended here as one
  more tuple at the end of the list; nothing is ever inserted.
- The binding sets struct_size = ctypes.sizeof(its own struct). A plugin of a newer minor reads
  only those bytes and takes its defaults for the rest, so a binding that lags the header keeps
  working; a plugin of an older minor reads what it knows.
- tests/python/test_struct_layout.py compares every struct's size, every field's offset and size
  with the C compiler's (a probe generated from the header), so the two cannot drift apart.
"""
import ctypes
from ctypes import (CFUNCTYPE, POINTER, c_bool, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_uint8, c_uint32, c_uint64, c_void_p)

# The version the structs below describe (abi/sdtrain.h SDT_ABI_VERSION_*).
ABI_VERSION_MAJOR = 1
ABI_VERSION_MINOR = 11
ABI_VERSION_PATCH = 0

ENTRY_SYMBOL = "sdtrain_entry"
FACTORY_TRAINER = b"sdtrain.trainer/1"  # 1.7: what the binding trains through
FACTORY_TEXTUAL_INVERSION = b"sdtrain.textual_inversion/1"  # deprecated in 1.7; mirrored, not used
FACTORY_HYPERNETWORK = b"sdtrain.hypernetwork/1"  # deprecated in 1.7; mirrored, not used
FACTORY_SCALER = b"sdtrain.scaler/1"
EXT_EMBEDDING_FILES = b"sdtrain.embedding_files/1"
EXT_HYPERNETWORK_FILES = b"sdtrain.hypernetwork_files/1"
EXT_HYPERNETWORK_APPLIER = b"sdtrain.hypernetwork_applier/1"
EXT_DISTRIBUTED = b"sdtrain.distributed/1"
# sdt_embedding_part.encoders (1.9): the per-encoder tables of SD3.5 and Flux.1
ENCODER_CLIP_L = 0x1
ENCODER_CLIP_G = 0x2
ENCODER_T5XXL = 0x4

sdt_status = c_int32  # enum sdt_status: 32 bits on every compiler (SDT_STATUS_FORCE_32BIT)


class AbiStruct(ctypes.Structure):
    """A struct of the ABI. c_name is its name in abi/sdtrain.h."""
    c_name = None

    @classmethod
    def new(cls):
        """A zeroed instance with struct_size set (docs/abi.md 3.5), for structs that have one."""
        obj = cls()
        if cls._fields_ and cls._fields_[0][0] == "struct_size":
            obj.struct_size = ctypes.sizeof(cls)
        return obj


# Every struct class, by its C name (the layout test walks this).
STRUCTS = {}


def _register(cls):
    STRUCTS[cls.c_name] = cls
    return cls


@_register
class Version(AbiStruct):
    c_name = "sdt_version"
    _fields_ = [("major", c_uint32), ("minor", c_uint32), ("patch", c_uint32)]


# ---- Host callbacks ----------------------------------------------------------------------------

@_register
class Metrics(AbiStruct):
    c_name = "sdt_metrics"
    _fields_ = [
        ("struct_size", c_uint32),
        ("precision", c_uint32),
        ("step", c_int64),
        ("max_steps", c_int64),
        ("epoch", c_int64),
        ("epoch_step", c_int64),
        ("skipped_steps", c_int64),
        ("loss", c_double),
        ("grad_norm", c_double),
        ("learn_rate", c_double),
        ("loss_scale", c_double),
        ("images_per_second", c_double),
        ("elapsed_seconds", c_double),
        ("fallback_fired", c_bool),
    ]


@_register
class Preview(AbiStruct):
    c_name = "sdt_preview"
    _fields_ = [
        ("struct_size", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("channels", c_uint32),
        ("step", c_int64),
        ("pixels", POINTER(c_uint8)),
        ("path", c_char_p),
        ("prompt", c_char_p),
    ]


@_register
class SavedFile(AbiStruct):
    c_name = "sdt_saved_file"
    _fields_ = [
        ("struct_size", c_uint32),
        ("kind", c_uint32),
        ("step", c_int64),
        ("path", c_char_p),
    ]


LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
METRICS_FN = CFUNCTYPE(None, c_void_p, POINTER(Metrics))
PREVIEW_FN = CFUNCTYPE(None, c_void_p, POINTER(Preview))
FILE_SAVED_FN = CFUNCTYPE(None, c_void_p, POINTER(SavedFile))


@_register
class HostCallbacks(AbiStruct):
    c_name = "sdt_host_callbacks"
    _fields_ = [
        ("struct_size", c_uint32),
        ("user_data", c_void_p),
        ("log", LOG_FN),
        ("metrics", METRICS_FN),
        ("preview_ready", PREVIEW_FN),
        ("file_saved", FILE_SAVED_FN),
    ]


# ---- The entry point ---------------------------------------------------------------------------

@_register
class Entry(AbiStruct):
    c_name = "sdt_entry"
    _fields_ = [
        ("abi_version", Version),
        ("plugin_version", c_char_p),
        ("init", CFUNCTYPE(sdt_status, Version, c_void_p, c_uint32)),
        ("deinit", CFUNCTYPE(None)),
        ("get_factory", CFUNCTYPE(c_void_p, c_char_p)),
        ("status_name", CFUNCTYPE(c_char_p, sdt_status)),
    ]


# ---- Textual inversion -------------------------------------------------------------------------

@_register
class EmbeddingSpec(AbiStruct):
    c_name = "sdt_embedding_spec"
    _fields_ = [
        ("struct_size", c_uint32),
        ("vectors_per_token", c_uint32),
        ("name", c_char_p),
        ("init_text", c_char_p),
        ("model_path", c_char_p),
        ("output_dir", c_char_p),
        ("overwrite", c_bool),
        # ---- appended in 1.1 ----
        ("tokenizer_path", c_char_p),
        # ---- appended in 1.9 ----
        ("clip_l_path", c_char_p),
        ("clip_g_path", c_char_p),
        ("t5xxl_path", c_char_p),
    ]


# ---- Options every training method shares (1.2) -------------------------------------------------

@_register
class TrainOptions(AbiStruct):
    c_name = "sdt_train_options"
    _fields_ = [
        ("struct_size", c_uint32),
        ("batch_size", c_uint32),
        ("grad_accum_steps", c_uint32),
        ("clip_mode", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("latent_sampling", c_uint32),
        ("precision", c_uint32),
        ("device", c_uint32),
        ("clip_skip", c_uint32),
        ("max_consecutive_nonfinite", c_uint32),
        ("preview_steps", c_uint32),
        ("preview_width", c_uint32),
        ("preview_height", c_uint32),
        ("cpu_threads", c_uint32),
        ("reserved0", c_uint32),
        ("max_steps", c_int64),
        ("save_every", c_int64),
        ("preview_every", c_int64),
        ("write_csv_every", c_int64),
        ("seed", c_uint64),
        ("preview_seed", c_int64),
        ("tag_dropout", c_double),
        ("lr_backoff", c_double),
        ("preview_cfg_scale", c_double),
        ("loss_scale_init", c_double),
        ("model_path", c_char_p),
        ("clip_value", c_char_p),
        ("dataset_dir", c_char_p),
        ("log_dir", c_char_p),
        ("template_file", c_char_p),
        ("filename_word_regex", c_char_p),
        ("filename_join_string", c_char_p),
        ("preview_prompt", c_char_p),
        ("preview_negative_prompt", c_char_p),
        ("preview_sampler", c_char_p),
        ("resume_state_path", c_char_p),
        ("tokenizer_path", c_char_p),
        ("varsize", c_bool),
        ("shuffle_tags", c_bool),
        ("use_alpha_as_loss_weight", c_bool),
        ("anomaly_mode", c_bool),
        ("v_prediction", c_bool),
        ("gradient_checkpointing", c_bool),
        # ---- appended in 1.3 ----
        ("reserved1", c_uint8 * 2),
        ("prediction_type", c_uint32),
        ("reserved2", c_uint32),
        # ---- appended in 1.4 ----
        ("save_state_every_seconds", c_int64),
        # ---- appended in 1.5 ----
        ("loss_type", c_uint32),
        ("lr_scheduler", c_uint32),
        ("lr_cycles", c_uint32),
        ("timestep_min", c_uint32),
        ("timestep_max", c_uint32),
        ("zero_terminal_snr", c_bool),
        ("noise_offset_random_strength", c_bool),
        ("reserved_loss", c_uint8 * 2),
        ("warmup_steps", c_int64),
        ("min_snr_gamma", c_double),
        ("noise_offset", c_double),
        ("huber_delta", c_double),
        ("preview_prompts_file", c_char_p),
        ("preview_seeds", c_char_p),
        ("caption_dropout", c_double),
        ("keep_tokens", c_uint32),
        ("flip", c_bool),
        ("reserved3", c_uint8 * 3),
        ("validation_dir", c_char_p),
        ("validation_split", c_double),
        ("validate_every", c_int64),
        ("ema_decay", c_double),
        ("ema_every", c_uint32),
        ("stop_after_no_improvement", c_uint32),
        ("ema_result", c_bool),
        ("ema_previews", c_bool),
        ("write_metrics", c_bool),
        ("reserved4", c_uint8 * 5),
        # 1.5, too: aspect-ratio buckets
        ("bucket_max_area", c_uint32),
        ("bucket_min_side", c_uint32),
        ("bucket_max_side", c_uint32),
        ("bucket_step", c_uint32),
        ("buckets", c_bool),
        ("random_crop", c_bool),
        ("reserved5", c_uint8 * 6),
        # ---- appended in 1.6 ----
        ("deterministic", c_bool),
        ("reserved6", c_uint8 * 7),
        # ---- appended in 1.8 ---- data parallelism
        ("world_size", c_int32),
        ("rank", c_int32),
        ("devices", POINTER(c_int32)),
        ("device_count", c_int32),
        ("comm_timeout_seconds", c_int32),
        ("comm_id", c_uint8 * 128),
        # ---- appended in 1.9 ----
        ("clip_l_path", c_char_p),
        ("clip_g_path", c_char_p),
        ("t5xxl_path", c_char_p),
        ("vae_path", c_char_p),
        ("timestep_sampling", c_char_p),
        ("flow_weighting", c_char_p),
        ("logit_mean", c_double),
        ("logit_std", c_double),
        ("mode_scale", c_double),
        ("flow_shift", c_double),
        ("guidance", c_double),
        ("t5_max_length", c_uint32),
        ("reserved7", c_uint32),
        ("cuda_graph", c_uint32),  # 1.11, sdt_cuda_graph
        ("reserved8", c_uint32),
    ]


@_register
class TiConfig(AbiStruct):
    c_name = "sdt_ti_config"
    _fields_ = [
        ("struct_size", c_uint32),
        ("batch_size", c_uint32),
        ("grad_accum_steps", c_uint32),
        ("clip_mode", c_uint32),
        ("width", c_uint32),
        ("height", c_uint32),
        ("latent_sampling", c_uint32),
        ("precision", c_uint32),
        ("device", c_uint32),
        ("clip_skip", c_uint32),
        ("max_consecutive_nonfinite", c_uint32),
        ("preview_steps", c_uint32),
        ("preview_width", c_uint32),
        ("preview_height", c_uint32),
        ("cpu_threads", c_uint32),
        ("reserved0", c_uint32),
        ("max_steps", c_int64),
        ("save_every", c_int64),
        ("preview_every", c_int64),
        ("write_csv_every", c_int64),
        ("seed", c_uint64),
        ("preview_seed", c_int64),
        ("tag_dropout", c_double),
        ("lr_backoff", c_double),
        ("preview_cfg_scale", c_double),
        ("loss_scale_init", c_double),
        ("embedding_path", c_char_p),
        ("model_path", c_char_p),
        ("learn_rate", c_char_p),
        ("clip_value", c_char_p),
        ("dataset_dir", c_char_p),
        ("log_dir", c_char_p),
        ("template_file", c_char_p),
        ("filename_word_regex", c_char_p),
        ("filename_join_string", c_char_p),
        ("preview_prompt", c_char_p),
        ("preview_negative_prompt", c_char_p),
        ("preview_sampler", c_char_p),
        ("resume_state_path", c_char_p),
        ("varsize", c_bool),
        ("shuffle_tags", c_bool),
        ("use_alpha_as_loss_weight", c_bool),
        ("save_image_with_embedding", c_bool),
        ("anomaly_mode", c_bool),
        # ---- appended in 1.1 ----
        ("reserved1", c_uint8 * 3),
        ("v_prediction", c_bool),
        ("gradient_checkpointing", c_bool),
        ("tokenizer_path", c_char_p),
        # ---- appended in 1.2 ----
        ("save_state_every_seconds", c_int64),
        ("train_options", POINTER(TrainOptions)),
        # ---- appended in 1.3 ----
        ("prediction_type", c_uint32),
        ("reserved2", c_uint32),
    ]


@_register
class PrepareInfo(AbiStruct):
    c_name = "sdt_prepare_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("precision", c_uint32),
        ("device", c_uint32),
        ("vectors", c_uint32),
        ("embedding_dim", c_uint32),
        ("batch_size", c_uint32),
        ("grad_accum_steps", c_uint32),
        ("reserved0", c_uint32),
        ("dataset_images", c_int64),
        ("steps_per_epoch", c_int64),
        ("start_step", c_int64),
        ("max_steps", c_int64),
        ("memory_estimate_bytes", c_uint64),
        ("memory_available_bytes", c_uint64),
    ]


@_register
class EmbeddingInfo(AbiStruct):
    c_name = "sdt_embedding_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("format", c_uint32),
        ("vectors", c_uint32),
        ("embedding_dim", c_uint32),
        ("step", c_int64),
        ("vector_norm_mean", c_double),
        ("all_finite", c_bool),
        ("name", c_char * 256),
        ("init_text", c_char * 256),
        ("checkpoint_name", c_char * 256),
        ("checkpoint_hash", c_char * 72),
    ]


_TiTrainer = c_void_p  # opaque handles
_HnTrainer = c_void_p
_Applier = c_void_p
_Scaler = c_void_p

GET_LAST_ERROR_FN = CFUNCTYPE(sdt_status, c_void_p, c_void_p, c_uint32, POINTER(c_uint32))


@_register
class TiFactory(AbiStruct):
    c_name = "sdt_ti_factory"
    _fields_ = [
        ("struct_size", c_uint32),
        ("config_defaults", CFUNCTYPE(sdt_status, POINTER(TiConfig))),
        ("create", CFUNCTYPE(sdt_status, POINTER(HostCallbacks), POINTER(_TiTrainer), c_void_p, c_uint32)),
        ("destroy", CFUNCTYPE(None, _TiTrainer)),
        ("get_last_error", GET_LAST_ERROR_FN),
        ("create_embedding", CFUNCTYPE(sdt_status, _TiTrainer, POINTER(EmbeddingSpec), c_void_p, c_uint32,
                                       POINTER(c_uint32))),
        ("prepare", CFUNCTYPE(sdt_status, _TiTrainer, POINTER(TiConfig), POINTER(PrepareInfo))),
        ("run", CFUNCTYPE(sdt_status, _TiTrainer)),
        ("interrupt", CFUNCTYPE(sdt_status, _TiTrainer)),
        ("get_run_state", CFUNCTYPE(sdt_status, _TiTrainer, POINTER(c_int32))),
        ("get_metrics", CFUNCTYPE(sdt_status, _TiTrainer, POINTER(Metrics))),
        ("save_state", CFUNCTYPE(sdt_status, _TiTrainer, c_char_p)),
        ("load_state", CFUNCTYPE(sdt_status, _TiTrainer, c_char_p)),
        ("inspect", CFUNCTYPE(sdt_status, _TiTrainer, c_char_p, POINTER(EmbeddingInfo), c_void_p, c_uint32,
                              POINTER(c_uint32))),
        # ---- appended in 1.2 ----
        ("train_options_defaults", CFUNCTYPE(sdt_status, POINTER(TrainOptions))),
    ]


# ---- The loss scaler ---------------------------------------------------------------------------

@_register
class LossScalerConfig(AbiStruct):
    c_name = "sdt_loss_scaler_config"
    _fields_ = [
        ("struct_size", c_uint32),
        ("optimizer_count", c_uint32),
        ("growth_interval", c_int64),
        ("hysteresis", c_uint32),
        ("reserved0", c_uint32),
        ("init_scale", c_double),
        ("growth_factor", c_double),
        ("backoff_factor", c_double),
        ("min_scale", c_double),
        ("enabled", c_bool),
    ]


@_register
class LossScalerFactory(AbiStruct):
    c_name = "sdt_loss_scaler_factory"
    _fields_ = [
        ("struct_size", c_uint32),
        ("config_defaults", CFUNCTYPE(sdt_status, POINTER(LossScalerConfig))),
        ("create", CFUNCTYPE(sdt_status, POINTER(LossScalerConfig), POINTER(_Scaler), c_void_p, c_uint32)),
        ("destroy", CFUNCTYPE(None, _Scaler)),
        ("get_last_error", GET_LAST_ERROR_FN),
        ("scale_loss", CFUNCTYPE(sdt_status, _Scaler, c_float, POINTER(c_float))),
        ("unscale", CFUNCTYPE(sdt_status, _Scaler, c_uint32, POINTER(POINTER(c_float)), POINTER(c_uint64), c_uint32,
                              POINTER(c_bool))),
        ("should_step", CFUNCTYPE(sdt_status, _Scaler, c_uint32, POINTER(c_bool))),
        ("update", CFUNCTYPE(sdt_status, _Scaler)),
        ("get_scale", CFUNCTYPE(sdt_status, _Scaler, POINTER(c_double))),
        ("save_state", CFUNCTYPE(sdt_status, _Scaler, c_void_p, c_uint32, POINTER(c_uint32))),
        ("load_state", CFUNCTYPE(sdt_status, _Scaler, c_void_p, c_uint32)),
    ]


# ---- Hypernetworks (1.2) -------------------------------------------------------------------------

@_register
class HypernetworkSpec(AbiStruct):
    c_name = "sdt_hypernetwork_spec"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("name", c_char_p),
        ("output_dir", c_char_p),
        ("widths", c_char_p),
        ("layer_structure", c_char_p),
        ("activation", c_char_p),
        ("weight_init", c_char_p),
        ("dropout_structure", c_char_p),
        ("layer_norm", c_bool),
        ("use_dropout", c_bool),
        ("activate_output", c_bool),
        ("overwrite", c_bool),
    ]


@_register
class HnConfig(AbiStruct):
    c_name = "sdt_hn_config"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("train_options", POINTER(TrainOptions)),
        ("hypernetwork_path", c_char_p),
        ("learn_rate", c_char_p),
        ("weight_decay", c_double),
        ("strength", c_double),
        ("embedding_path", c_char_p),
        ("embedding_learn_rate", c_char_p),
        # ---- appended in 1.4 ----
        ("save_image_with_embedding", c_bool),
        ("reserved1", c_uint8 * 3),
        ("embedding_clip_mode", c_uint32),
        ("embedding_clip_value", c_char_p),
        # ---- appended in 1.4 (after the above) ----
        ("preview_hypernetworks", c_char_p),
        ("preview_strength", c_double),
    ]


@_register
class HypernetworkInfo(AbiStruct):
    c_name = "sdt_hypernetwork_info"
    _fields_ = [
        ("struct_size", c_uint32),
        ("width_count", c_uint32),
        ("widths", c_uint32 * 8),
        ("layer_count", c_uint32),
        ("reserved0", c_uint32),
        ("step", c_int64),
        ("parameter_count", c_uint64),
        ("layer_norm", c_bool),
        ("use_dropout", c_bool),
        ("activate_output", c_bool),
        ("all_finite", c_bool),
        ("name", c_char * 256),
        ("activation", c_char * 32),
        ("weight_init", c_char * 32),
        ("layer_structure", c_char * 128),
        ("checkpoint_name", c_char * 256),
        ("checkpoint_hash", c_char * 72),
    ]


@_register
class GenerateRequest(AbiStruct):
    c_name = "sdt_generate_request"
    _fields_ = [
        ("struct_size", c_uint32),
        ("device", c_uint32),
        ("model_path", c_char_p),
        ("tokenizer_path", c_char_p),
        ("prompt", c_char_p),
        ("negative_prompt", c_char_p),
        ("width", c_uint32),
        ("height", c_uint32),
        ("steps", c_uint32),
        ("clip_skip", c_uint32),
        ("cfg_scale", c_double),
        ("seed", c_uint64),
        ("cpu_threads", c_uint32),
        ("reserved0", c_uint32),
        ("embedding_path", c_char_p),
        # ---- appended in 1.5 ----
        ("sampler", c_char_p),
        # ---- appended in 1.9 ----
        ("clip_l_path", c_char_p),
        ("clip_g_path", c_char_p),
        ("t5xxl_path", c_char_p),
        ("vae_path", c_char_p),
        # ---- appended in 1.10 ----
        ("t5_max_length", c_uint32),
        ("reserved1", c_uint32),
    ]


@_register
class HnFactory(AbiStruct):
    c_name = "sdt_hn_factory"
    _fields_ = [
        ("struct_size", c_uint32),
        ("config_defaults", CFUNCTYPE(sdt_status, POINTER(HnConfig))),
        ("create", CFUNCTYPE(sdt_status, POINTER(HostCallbacks), POINTER(_HnTrainer), c_void_p, c_uint32)),
        ("destroy", CFUNCTYPE(None, _HnTrainer)),
        ("get_last_error", GET_LAST_ERROR_FN),
        ("create_hypernetwork", CFUNCTYPE(sdt_status, _HnTrainer, POINTER(HypernetworkSpec), c_void_p, c_uint32,
                                          POINTER(c_uint32))),
        ("prepare", CFUNCTYPE(sdt_status, _HnTrainer, POINTER(HnConfig), POINTER(PrepareInfo))),
        ("run", CFUNCTYPE(sdt_status, _HnTrainer)),
        ("interrupt", CFUNCTYPE(sdt_status, _HnTrainer)),
        ("get_run_state", CFUNCTYPE(sdt_status, _HnTrainer, POINTER(c_int32))),
        ("get_metrics", CFUNCTYPE(sdt_status, _HnTrainer, POINTER(Metrics))),
        ("save_state", CFUNCTYPE(sdt_status, _HnTrainer, c_char_p)),
        ("load_state", CFUNCTYPE(sdt_status, _HnTrainer, c_char_p)),
        ("inspect", CFUNCTYPE(sdt_status, _HnTrainer, c_char_p, POINTER(HypernetworkInfo), c_void_p, c_uint32,
                              POINTER(c_uint32))),
        ("train_options_defaults", CFUNCTYPE(sdt_status, POINTER(TrainOptions))),
        # ---- appended in 1.4: applying hypernetworks in the host's own generation ----
        ("applier_create", CFUNCTYPE(sdt_status, POINTER(_Applier), c_void_p, c_uint32)),
        ("applier_destroy", CFUNCTYPE(None, _Applier)),
        ("applier_get_last_error", GET_LAST_ERROR_FN),
        ("applier_add", CFUNCTYPE(sdt_status, _Applier, c_char_p, c_double)),
        ("applier_set_strength", CFUNCTYPE(sdt_status, _Applier, c_uint32, c_double)),
        ("applier_apply_kv", CFUNCTYPE(sdt_status, _Applier, c_uint32, c_uint32, POINTER(c_float), POINTER(c_float),
                                       c_uint64)),
        ("applier_generate", CFUNCTYPE(sdt_status, _Applier, POINTER(GenerateRequest), POINTER(c_uint8), c_uint64)),
    ]


# ---- One trainer: "sdtrain.trainer/1" (1.7) --------------------------------------------------------

_Trainer = c_void_p


@_register
class EmbeddingPart(AbiStruct):
    c_name = "sdt_embedding_part"
    _fields_ = [
        ("struct_size", c_uint32),
        ("clip_mode", c_uint32),
        ("embedding_path", c_char_p),
        ("learn_rate", c_char_p),
        ("clip_value", c_char_p),
        ("save_image_with_embedding", c_bool),
        ("reserved0", c_uint8 * 7),
        # ---- appended in 1.9 ----
        ("encoders", c_uint32),
        ("reserved1", c_uint32),
        ("learn_rate_clip_l", c_char_p),
        ("learn_rate_clip_g", c_char_p),
        ("learn_rate_t5xxl", c_char_p),
    ]


@_register
class HypernetworkPart(AbiStruct):
    c_name = "sdt_hypernetwork_part"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("hypernetwork_path", c_char_p),
        ("learn_rate", c_char_p),
        ("weight_decay", c_double),
        ("strength", c_double),
        ("preview_hypernetworks", c_char_p),
        ("preview_strength", c_double),
    ]


@_register
class TrainerConfig(AbiStruct):
    c_name = "sdt_trainer_config"
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved0", c_uint32),
        ("options", POINTER(TrainOptions)),
        ("embedding", POINTER(EmbeddingPart)),
        ("hypernetwork", POINTER(HypernetworkPart)),
    ]


@_register
class TrainerFactory(AbiStruct):
    c_name = "sdt_trainer_factory"
    _fields_ = [
        ("struct_size", c_uint32),
        ("train_options_defaults", CFUNCTYPE(sdt_status, POINTER(TrainOptions))),
        ("embedding_part_defaults", CFUNCTYPE(sdt_status, POINTER(EmbeddingPart))),
        ("hypernetwork_part_defaults", CFUNCTYPE(sdt_status, POINTER(HypernetworkPart))),
        ("create", CFUNCTYPE(sdt_status, POINTER(HostCallbacks), POINTER(_Trainer), c_void_p, c_uint32)),
        ("destroy", CFUNCTYPE(None, _Trainer)),
        ("get_last_error", GET_LAST_ERROR_FN),
        ("prepare", CFUNCTYPE(sdt_status, _Trainer, POINTER(TrainerConfig), POINTER(PrepareInfo))),
        ("run", CFUNCTYPE(sdt_status, _Trainer)),
        ("interrupt", CFUNCTYPE(sdt_status, _Trainer)),
        ("get_run_state", CFUNCTYPE(sdt_status, _Trainer, POINTER(c_int32))),
        ("get_metrics", CFUNCTYPE(sdt_status, _Trainer, POINTER(Metrics))),
        ("save_state", CFUNCTYPE(sdt_status, _Trainer, c_char_p)),
        ("load_state", CFUNCTYPE(sdt_status, _Trainer, c_char_p)),
        ("get_extension", CFUNCTYPE(c_void_p, c_char_p)),
    ]


@_register
class EmbeddingFilesExt(AbiStruct):
    c_name = "sdt_embedding_files_ext"
    _fields_ = [
        ("struct_size", c_uint32),
        ("create_embedding", CFUNCTYPE(sdt_status, _Trainer, POINTER(EmbeddingSpec), c_void_p, c_uint32,
                                       POINTER(c_uint32))),
        ("inspect", CFUNCTYPE(sdt_status, _Trainer, c_char_p, POINTER(EmbeddingInfo), c_void_p, c_uint32,
                              POINTER(c_uint32))),
    ]


@_register
class HypernetworkFilesExt(AbiStruct):
    c_name = "sdt_hypernetwork_files_ext"
    _fields_ = [
        ("struct_size", c_uint32),
        ("create_hypernetwork", CFUNCTYPE(sdt_status, _Trainer, POINTER(HypernetworkSpec), c_void_p, c_uint32,
                                          POINTER(c_uint32))),
        ("inspect", CFUNCTYPE(sdt_status, _Trainer, c_char_p, POINTER(HypernetworkInfo), c_void_p, c_uint32,
                              POINTER(c_uint32))),
    ]


@_register
class HypernetworkApplierExt(AbiStruct):
    c_name = "sdt_hypernetwork_applier_ext"
    _fields_ = [
        ("struct_size", c_uint32),
        ("create", CFUNCTYPE(sdt_status, POINTER(_Applier), c_void_p, c_uint32)),
        ("destroy", CFUNCTYPE(None, _Applier)),
        ("get_last_error", GET_LAST_ERROR_FN),
        ("add", CFUNCTYPE(sdt_status, _Applier, c_char_p, c_double)),
        ("set_strength", CFUNCTYPE(sdt_status, _Applier, c_uint32, c_double)),
        ("apply_kv", CFUNCTYPE(sdt_status, _Applier, c_uint32, c_uint32, POINTER(c_float), POINTER(c_float),
                               c_uint64)),
        ("generate", CFUNCTYPE(sdt_status, _Applier, POINTER(GenerateRequest), POINTER(c_uint8), c_uint64)),
    ]


@_register
class DistributedExt(AbiStruct):
    c_name = "sdt_distributed_ext"
    _fields_ = [
        ("struct_size", c_uint32),
        ("available", CFUNCTYPE(sdt_status, c_void_p, c_uint32)),
        ("new_comm_id", CFUNCTYPE(sdt_status, POINTER(c_uint8), c_void_p, c_uint32)),
    ]


def has_function(table, name):
    """True when a factory table (a ctypes struct read from the plugin) has the member `name`:
    its offset lies below the table's struct_size (docs/abi.md 3.1) and it is not NULL."""
    field = getattr(type(table), name)
    return field.offset + field.size <= table.struct_size and bool(getattr(table, name))


# ---- Enums (names a Python host writes instead of numbers) ---------------------------------------

STATUS_NAMES = {
    0: "OK", 1: "INTERRUPTED", -1: "INVALID_ARGUMENT", -2: "VERSION_MISMATCH", -3: "NOT_INITIALIZED",
    -4: "UNSUPPORTED", -5: "OUT_OF_MEMORY", -6: "IO", -7: "BAD_FORMAT", -8: "VALIDATION", -9: "BAD_STATE",
    -10: "BUFFER_TOO_SMALL", -11: "ALREADY_EXISTS", -12: "NOT_FOUND", -13: "NUMERICAL", -14: "SCALER_MISUSE",
    -15: "NO_GRADIENT", -16: "DEVICE", -17: "INTERNAL",
}
LOG_LEVELS = {0: "debug", 1: "info", 2: "warning", 3: "error"}
PRECISIONS = {"fp32": 0, "fp16": 1, "bf16": 2}
DEVICES = {"auto": 0, "cpu": 1, "cuda": 2}
CLIP_MODES = {"disabled": 0, "value": 1, "norm": 2}
LATENT_SAMPLING = {"once": 0, "deterministic": 1, "random": 2}
PREDICTION_TYPES = {"auto": 0, "epsilon": 1, "v": 2}
LOSS_TYPES = {"l2": 0, "l1": 1, "huber": 2}
LR_SCHEDULERS = {"constant": 0, "linear": 1, "cosine": 2, "cosine_with_restarts": 3}
CUDA_GRAPHS = {"auto": 0, "on": 1, "off": 2}  # sdt_cuda_graph (1.11)
FILE_KINDS = {0: "embedding", 1: "embedding_snapshot", 2: "embedding_card", 3: "training_state", 4: "loss_csv",
              5: "settings", 6: "preview", 7: "hypernetwork", 8: "hypernetwork_snapshot"}
RUN_STATES = {0: "idle", 1: "prepared", 2: "running", 3: "finished", 4: "interrupted", 5: "failed"}
EMBEDDING_FORMATS = {0: "unknown", 1: "safetensors", 2: "safetensors_sdxl", 3: "a1111_pt", 4: "png_chunk",
                     5: "png_pixels", 6: "training_state"}
# Fields of the config structs that take one of the names above (or the number).
# sdt_embedding_part.encoders (1.9): SDT_ENCODER_* bits, the SD3.5 / Flux.1 tables that train (0: all of the family's)
ENCODERS = {"clip_l": 0x1, "clip_g": 0x2, "t5xxl": 0x4}
BITS_FIELDS = {"encoders": ENCODERS}
ENUM_FIELDS = {"precision": PRECISIONS, "device": DEVICES, "clip_mode": CLIP_MODES,
               "embedding_clip_mode": CLIP_MODES, "latent_sampling": LATENT_SAMPLING,
               "prediction_type": PREDICTION_TYPES, "loss_type": LOSS_TYPES, "lr_scheduler": LR_SCHEDULERS,
               "cuda_graph": CUDA_GRAPHS}
