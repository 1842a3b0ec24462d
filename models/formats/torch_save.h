/* torch_save.h - writing PyTorch files that torch.load(path, weights_only=True) reads.
 *
 * The zip layout torch.save has used since 1.6: <name>/data.pkl (the protocol 2
 * pickle of pickle_write.h), <name>/byteorder ("little"), <name>/data/<i> (one
 * raw storage per distinct sdt_pv_storage, numbered in order of first use),
 * <name>/version ("3"), each stored and 64-byte aligned (zip_write.h). Saved
 * atomically (models/formats/atomic_file.h): a failed save leaves any old file as it was.
 */
#ifndef SDT_MODELS_TORCH_SAVE_H
#define SDT_MODELS_TORCH_SAVE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "pickle_value.h"

/* Saves root to path. archive_name is the zip's top folder (NULL: "archive",
 * what torch >= 2 writes). Tensors' storages must have their data attached. */
bool sdt_torch_save(const char *path, const sdt_pv *root, const char *archive_name, sdt_error *error);

#endif
