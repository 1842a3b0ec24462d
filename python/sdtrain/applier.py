"""HypernetworkApplier: A1111's hypernetwork chain applied in the host's own generation, over the
trainer factory's extension "sdtrain.hypernetwork_applier/1" (ABI 1.7; docs/abi.md).

A chain of hypernetwork files, each with its strength; apply_kv() runs A1111's apply_hypernetworks
for one attention input (the keys' or the values') on float32 rows in host memory. One call at a time
per applier (abi/sdtrain.h): the class serialises its calls with a lock."""
import ctypes
import os
import threading

from . import _abi
from ._closeable import Closeable
from .errors import SdtrainError, error_for
from .plugin import copy_out_string, read_struct

_ERR_SIZE = 2048
_FLOAT_P = ctypes.POINTER(ctypes.c_float)

KV_K = 0  # the keys' input (A1111's context_k; SDT_KV_K)
KV_V = 1  # the values' input (A1111's context_v; SDT_KV_V)
_KINDS = {"k": KV_K, "v": KV_V, KV_K: KV_K, KV_V: KV_V}


def _float_pointer(buffer, what):
    """A float* from an address (int, e.g. a CPU torch tensor's data_ptr()) or a ctypes object."""
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        if not buffer:
            raise SdtrainError(-1, "apply_kv: %s is a NULL address; pass a float32 buffer's address." % what)
        return ctypes.cast(ctypes.c_void_p(buffer), _FLOAT_P)
    if isinstance(buffer, ctypes.Array):
        return ctypes.cast(buffer, _FLOAT_P)
    raise SdtrainError(-1, "apply_kv: %s must be an address (int) or a ctypes float array, not %s."
                       % (what, type(buffer).__name__))


class HypernetworkApplier(Closeable):
    """HypernetworkApplier(plugin=None): an empty chain. add(path, strength) appends a hypernetwork
    file (A1111's .pt or sdtrain's .safetensors); set_strength(index, strength) changes one member's;
    apply_kv(kind, width, src, dst, rows) writes dst[rows, width] = the chain on src[rows, width]
    (kind "k"/"v" or KV_K/KV_V; members without a module for the width pass x on). close() (or the
    with-block's end) frees it; Plugin.close() refuses while it is open."""

    def __init__(self, plugin=None):
        if plugin is None:
            from .plugin import default_plugin
            plugin = default_plugin()
        self.plugin = plugin
        self.closed = True
        self.members = []
        factory = plugin.factory(_abi.FACTORY_TRAINER, _abi.TrainerFactory)
        address = factory.get_extension(_abi.EXT_HYPERNETWORK_APPLIER) if _abi.has_function(
            factory, "get_extension") else None
        if not address:
            raise SdtrainError(-4, "The plugin %s (ABI %s) has no extension %s, so it cannot apply hypernetworks; "
                               "install sdtrain 1.7 or newer." % (plugin.path, plugin.abi_version,
                                                                  _abi.EXT_HYPERNETWORK_APPLIER.decode()))
        self._x = read_struct(_abi.HypernetworkApplierExt, address)
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_SIZE)
        status = self._x.create(ctypes.byref(handle), ctypes.cast(err, ctypes.c_void_p), _ERR_SIZE)
        if status < 0:
            raise error_for(status, err.value.decode("utf-8", "replace"))
        self._handle = handle
        self._lock = threading.Lock()
        self.closed = False
        plugin._adopt(self)

    def _check(self, status):
        if status < 0:
            raise error_for(status, copy_out_string(self._x.get_last_error, self._handle)[1])
        return status

    def _require_open(self):
        if self.closed:
            raise SdtrainError(-9, "This HypernetworkApplier was closed; make a new one.")

    def add(self, path, strength=1.0):
        """Appends the hypernetwork file at path with its strength (A1111's multiplier). Blocking:
        reads the file."""
        with self._lock:
            self._require_open()
            self._check(self._x.add(self._handle, os.fsencode(path), float(strength)))
        self.members.append([os.fspath(path), float(strength)])

    def set_strength(self, index, strength):
        """Sets the strength of the chain's member index (0: the first added)."""
        with self._lock:
            self._require_open()
            self._check(self._x.set_strength(self._handle, int(index), float(strength)))
        self.members[index][1] = float(strength)

    def apply_kv(self, kind, width, src, dst, rows):
        """dst[rows, width] = the chain on src[rows, width]: row-major float32 in host memory, given
        as addresses (int) or ctypes float arrays; dst may be src."""
        if kind not in _KINDS:
            raise SdtrainError(-1, "apply_kv: kind must be \"k\" or \"v\" (KV_K or KV_V), not %r." % (kind,))
        src_p, dst_p = _float_pointer(src, "src"), _float_pointer(dst, "dst")
        with self._lock:
            self._require_open()
            self._check(self._x.apply_kv(self._handle, int(width), _KINDS[kind], src_p, dst_p, int(rows)))

    def close(self):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._x.destroy(self._handle)
