/* hn_file.h - hypernetwork files: A1111's .pt and the .safetensors twin, both read
 * through the same key rules.
 *
 * .safetensors: one F32 tensor per parameter named by A1111's state-dict path
 * "<width>.<0 = K, 1 = V>.linear.<position>.<weight|bias>" (A1111's dict flattened:
 * int key, tuple index, state-dict key), plus string metadata with A1111's keys:
 *   name, step, layer_structure ("[1.0, 2.0, 1.0]"), activation_func,
 *   weight_initialization, is_layer_norm, use_dropout, dropout_structure,
 *   activate_output, last_layer_dropout ("true"/"false"), sd_checkpoint and
 *   sd_checkpoint_name (absent = None), and "modules" ("[768, 320, 640, 1280]",
 *   the width order, which the tensor header does not keep).
 * Saves are atomic (temp + fsync + rename): a failed save leaves the old file.
 *
 * Reading applies A1111's defaults for missing keys (Hypernetwork.load):
 * layer_structure [1, 2, 1], activation None (no activation), Normal init, no
 * layer norm, activate_output TRUE, last_layer_dropout false; a missing
 * dropout_structure is rebuilt from use_dropout and last_layer_dropout; old
 * "linear1"/"linear2" tensor names count as linear.0/linear.1. Every tensor must
 * match the structure the keys describe, and every expected tensor must be there.
 */
#ifndef SDT_HN_FILE_H
#define SDT_HN_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hn/hn_module.h"

/* Writes hn to path as .safetensors (tensors f32, metadata as above), atomically. */
bool sdt_hn_save_safetensors(const sdt_hn *hn, const char *path, sdt_error *error);
/* Reads a .safetensors hypernetwork onto be. NULL + a sentence naming the file, the
 * key and the fix. */
sdt_hn *sdt_hn_load_safetensors(const char *path, sdt_backend *be, sdt_error *error);

/* A1111's .pt: torch.save of {width: (state_dict_K, state_dict_V), "step", "name",
 * "layer_structure", "activation_func", "is_layer_norm", "weight_initialization",
 * "sd_checkpoint", "sd_checkpoint_name", "activate_output", "use_dropout",
 * "dropout_structure", "last_layer_dropout", "optional_info"} in A1111's key order,
 * state dicts as OrderedDicts of plain tensors (models/formats/torch_save.h: loads with
 * torch.load(weights_only=True)). Written atomically. */
bool sdt_hn_save_pt(const sdt_hn *hn, const char *path, sdt_error *error);
/* Reads A1111 .pt hypernetworks (zip or legacy torch files) through the restricted
 * unpickler (models/formats/torch_file.h: nothing runs, unknown globals refused), with the
 * same defaults and old names as above. */
sdt_hn *sdt_hn_load_pt(const char *path, sdt_backend *be, sdt_error *error);
/* By file: save picks the format from the extension (.pt or .safetensors, else
 * UNSUPPORTED); load looks at the bytes (a torch file, else .safetensors). */
bool sdt_hn_save(const sdt_hn *hn, const char *path, sdt_error *error);
sdt_hn *sdt_hn_load(const char *path, sdt_backend *be, sdt_error *error);

/* "Create hypernetwork": validates c (creating), refuses an existing path unless
 * overwrite ("file ... already exists"), initialises from init_seed and saves
 * (.pt or .safetensors by the extension). Returns the new hypernetwork (the caller
 * frees it) or NULL + a sentence. */
sdt_hn *sdt_hn_create_file(const sdt_hn_config *c, const char *path, bool overwrite, sdt_backend *be,
                           uint64_t init_seed, sdt_error *error);

/* ---- shared with every reader ---- */
/* The keys a file may carry, each with a presence flag (absent = A1111's default). */
typedef struct sdt_hn_file_keys {
    bool has_name;
    char name[SDT_HN_NAME_MAX + 1];
    bool has_step;
    int64_t step;
    bool has_layer_structure;
    int entry_count;
    double layer_structure[SDT_HN_MAX_ENTRIES];
    bool has_activation; /* false or "" (None): no activation */
    char activation[SDT_HN_ACTIVATION_MAX];
    bool has_init;
    char init[32];
    bool has_layer_norm, layer_norm;
    bool has_use_dropout, use_dropout;
    bool has_dropout_structure;
    int dropout_count;
    double dropout_structure[SDT_HN_MAX_ENTRIES];
    bool has_activate_output, activate_output;
    bool has_last_layer_dropout, last_layer_dropout;
    char sd_checkpoint[SDT_HN_CHECKPOINT_MAX];      /* "" = None */
    char sd_checkpoint_name[SDT_HN_CHECKPOINT_MAX]; /* "" = None */
    int width_count;                                /* 0: take the widths from the tensor names */
    int widths[SDT_HN_MAX_WIDTHS];
} sdt_hn_file_keys;

/* Keys with A1111's defaults -> config and info; fallback_name (the file's base name)
 * when the file has no usable name. `file` names the file in sentences. */
bool sdt_hn_keys_to_config(const sdt_hn_file_keys *keys, const char *fallback_name, const char *file,
                           sdt_hn_config *config, sdt_hn_info *info, sdt_error *error);
/* A1111's fix_old_state_dict on one state-dict key: "linear1.weight" -> "linear.0.weight",
 * "linear2.bias" -> "linear.1.bias"; other keys are copied. */
void sdt_hn_fix_old_key(const char *key, char *out, size_t out_size);

#endif
