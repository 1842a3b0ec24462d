/* pickle_read.h - a restricted unpickler for PyTorch files.
 *
 * Runs the pickle opcodes of protocols 0-5 that build data (containers,
 * numbers, strings, memo, marks, frames) and builds pickle_value.h values. It
 * never imports or calls anything: a GLOBAL is looked up in a fixed
 * allow-list (collections.OrderedDict; torch._utils._rebuild_tensor_v2,
 * _rebuild_tensor, _rebuild_parameter, _rebuild_parameter_with_state;
 * torch._tensor._rebuild_from_type_v2 with torch.Tensor/Parameter; the typed
 * storages torch.FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage,
 * LongStorage, IntStorage, ShortStorage, CharStorage, ByteStorage,
 * BoolStorage, UntypedStorage; and, as inert records that keep their
 * arguments but are never called, the bookkeeping classes found in old
 * checkpoints and embeddings: torch.nn.modules.container.ParameterDict and
 * the sets in its state, pytorch_lightning's ModelCheckpoint, numpy scalars
 * and dtypes, _codecs.encode). Any other
 * global is refused with a sentence naming it and the file.
 *
 * Persistent ids must be torch's storage tuples ('storage', <StorageType>,
 * key, location, numel); each becomes an sdt_pv_storage (data left NULL for
 * the caller to attach) and tensors built on it are checked against its numel.
 *
 * Bounds: the pickle at most SDT_PICKLE_MAX_BYTES, at most SDT_PICKLE_MAX_VALUES
 * values and SDT_PICKLE_MAX_ITEMS container items, marks nested at most
 * SDT_PICKLE_MAX_MARKS deep, the result at most SDT_PV_MAX_DEPTH deep and
 * without cycles, every length inside the buffer, ints at most 64 bits.
 */
#ifndef SDT_MODELS_PICKLE_READ_H
#define SDT_MODELS_PICKLE_READ_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>

#include "pickle_value.h"

#define SDT_PICKLE_MAX_BYTES ((size_t)1 << 30)
#define SDT_PICKLE_MAX_VALUES ((size_t)1 << 22)
#define SDT_PICKLE_MAX_ITEMS ((size_t)1 << 24)
#define SDT_PICKLE_MAX_MARKS 1024

/* Runs one pickle from buf (up to its STOP). On success *root is the result
 * (owned by arena) and *consumed, if not NULL, the bytes read up to and
 * including STOP. origin names the pickle in sentences, e.g.
 * "emb.pt (archive/data.pkl)". */
bool sdt_pickle_load(const void *buf, size_t size, sdt_pv_arena *arena, const char *origin, sdt_pv **root,
                     size_t *consumed, sdt_error *error);

#endif
