/* hn_abi_ops.h - the hypernetwork factory's file work behind the ABI structs: "Create
 * hypernetwork" from an sdt_hypernetwork_spec and inspect() into an sdt_hypernetwork_info.
 *
 * Kept apart from hn_factory.c because the ABI's sdt_hn_config (the Train tab) and the
 * module's sdt_hn_config (hn/hn_config.h: the network's shape) share a name; only
 * hn_abi_ops.c sees both, with the ABI's renamed there. */
#ifndef SDT_HN_ABI_OPS_H
#define SDT_HN_ABI_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "sdt_error.h"
#include "sdtrain.h"

/* Parses and checks every text field of spec (each failure one sentence naming the field
 * and the fix), refuses a missing output folder and an existing <output_dir>/<name>.pt
 * unless spec->overwrite, then writes the file atomically; its path goes to path_out.
 * The weights are drawn from a seed derived from the name, so one name and structure
 * always give the same starting weights. */
bool sdt_hn_abi_create(const sdt_hypernetwork_spec *spec, char *path_out, size_t path_out_size, sdt_error *error);

/* Reads a hypernetwork file (.pt or .safetensors) into info (zeroed by the caller with its
 * struct_size set) and, when json_out, a JSON description (the caller frees it). A run's state
 * file (<name>.state.safetensors) is described by train/train_state_describe.h: name, step,
 * checkpoint, finiteness and the hypernetwork's trained values in info, the state's facts in
 * the JSON. */
bool sdt_hn_abi_inspect(const char *path, sdt_hypernetwork_info *info, char **json_out, sdt_error *error);

#endif
