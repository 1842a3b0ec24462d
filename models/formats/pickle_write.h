/* pickle_write.h - writing pickle_value.h trees as the pickle torch.save writes.
 *
 * Protocol 2, the opcodes CPython's pickler emits for these types: None,
 * bools, ints (BININT1/BININT2/BININT/LONG1), floats (BINFLOAT), str
 * (BINUNICODE), lists (APPENDS), tuples (TUPLE1-3, TUPLE), dicts and
 * collections.OrderedDict (SETITEMS), tensors as
 * torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
 * requires_grad, OrderedDict()) with the storage a persistent id
 * ('storage', torch.<Type>Storage, key, 'cpu', numel), wrapped in
 * torch._utils._rebuild_parameter for Parameters. torch.load accepts the
 * result with weights_only=True. Bytes and inert objects are refused (torch's
 * weights_only loader would refuse them too).
 */
#ifndef SDT_MODELS_PICKLE_WRITE_H
#define SDT_MODELS_PICKLE_WRITE_H

#include "sdt_error.h"

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>

#include "pickle_value.h"

/* Appends the pickle of root to out. storages receives each distinct storage
 * (sdt_pv_storage *) in order of first use; the pickle names the i-th one by
 * the key "<i>", whatever its own key says. what names the file in sentences. */
bool sdt_pickle_write(const sdt_pv *root, GByteArray *out, GPtrArray *storages, const char *what, sdt_error *error);

#endif
