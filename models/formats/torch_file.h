/* torch_file.h - reading PyTorch files (torch.save) safely.
 *
 * Two layouts are read:
 *   zip      (torch >= 1.6): <dir>/data.pkl, the pickle; <dir>/data/<key>,
 *            one raw little-endian storage per key; <dir>/version,
 *            <dir>/byteorder (must say "little" when present). <dir> is any
 *            single top folder ("archive" today, the file's stem in older torch).
 *   legacy   (torch < 1.6, torch.save(..., _use_new_zipfile_serialization=False)):
 *            pickles of the magic number, the protocol version and sys_info,
 *            the data pickle, the list of storage keys, then per key an int64
 *            element count and the raw storage.
 * The data pickle runs through the restricted unpickler (pickle_read.h): no
 * code runs, every global outside its allow-list is refused with a sentence.
 * Each storage's bytes are attached to its sdt_pv_storage after checking that
 * the entry holds numel x element size bytes; tensors were already checked to
 * lie inside their storage. The file is memory-mapped; stored zip entries
 * stay in the mapping (CRC checked once when attached).
 *
 * Errors (kernels/sdt_error.h): false or NULL with the status (BAD_FORMAT for a
 * damaged or refused file, NOT_FOUND/IO when it cannot be read, OUT_OF_MEMORY)
 * and one sentence naming the file, the entry or key and the fix.
 */
#ifndef SDT_MODELS_TORCH_FILE_H
#define SDT_MODELS_TORCH_FILE_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "pickle_value.h"
#include "tensor.h"

typedef enum sdt_torch_layout {
    SDT_TORCH_NOT_TORCH = 0,
    SDT_TORCH_ZIP,
    SDT_TORCH_LEGACY,
} sdt_torch_layout;

/* What the first bytes say: a zip archive or the legacy magic number. A zip
 * that is not torch's is told apart only when opened. */
sdt_torch_layout sdt_torch_sniff(const void *buf, size_t size);
/* The same for a file on disk (reads its first bytes; NOT_TORCH when unreadable). */
sdt_torch_layout sdt_torch_sniff_file(const char *path);

typedef struct sdt_torch_file sdt_torch_file;

sdt_torch_file *sdt_torch_open(const char *path, sdt_error *error);
/* buf must outlive the result. origin names it in sentences (fuzzing, tests). */
sdt_torch_file *sdt_torch_open_memory(const void *buf, size_t size, const char *origin, sdt_error *error);
void sdt_torch_close(sdt_torch_file *f);

sdt_torch_layout sdt_torch_layout_of(const sdt_torch_file *f);
/* The unpickled object (owned by f). */
const sdt_pv *sdt_torch_root(const sdt_torch_file *f);

/* A tensor value's elements as one row-major block: a pointer into the file when
 * the tensor is contiguous and aligned, else a copy owned by f. what names the
 * tensor in sentences (e.g. its key). */
bool sdt_torch_tensor_bytes(sdt_torch_file *f, const sdt_pv *v, const char *what, const void **data, sdt_error *error);
/* A CPU sdt_tensor of a tensor value (F32, F16, BF16 and I32 only; at most
 * SDT_MAX_DIMS dims), read-only: do not write through it. */
bool sdt_torch_tensor(sdt_torch_file *f, const sdt_pv *v, const char *what, sdt_tensor *out, sdt_error *error);

#endif
