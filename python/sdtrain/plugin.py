"""Opening libsdtrain.so: the entry symbol, the ABI version check, init/deinit and the factories."""
import ctypes
import threading
import weakref

from . import _abi
from ._loader import find_plugin
from .errors import SdtrainError, error_for

_ERR_SIZE = 2048


def copy_out_string(fn, *args):
    """Calls a copy-out function fn(*args, buf, size, &needed) (docs/abi.md 5.2) and returns
    (status, text), growing the buffer once when the first did not fit."""
    size = _ERR_SIZE
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        needed = ctypes.c_uint32(0)
        st = fn(*args, ctypes.cast(buf, ctypes.c_void_p), size, ctypes.byref(needed))
        if st != -10 or needed.value <= size:  # not BUFFER_TOO_SMALL
            return st, buf.value.decode("utf-8", "replace")
        size = needed.value
    return st, buf.value.decode("utf-8", "replace")


def read_struct(cls, address):
    """A copy of the plugin's struct at address, reading only the first struct_size bytes it
    wrote (docs/abi.md 3.3); fields it does not know stay 0."""
    obj = cls()
    if address:
        size = ctypes.c_uint32.from_address(address).value
        ctypes.memmove(ctypes.addressof(obj), address, min(size, ctypes.sizeof(cls)))
    return obj


def _version_text(v):
    return "%d.%d.%d" % (v.major, v.minor, v.patch)


HOST_VERSION = _abi.Version(_abi.ABI_VERSION_MAJOR, _abi.ABI_VERSION_MINOR, _abi.ABI_VERSION_PATCH)


class Plugin:
    """An opened and initialised libsdtrain.so.

    Plugin(path=None): path, else $SDTRAIN_PLUGIN, else pkg-config's `plugin` variable of sdtrain.pc.
    A plugin of another ABI major is refused (SdtrainError, VERSION_MISMATCH) before anything but its
    version is read. close() (or the with-block's end) drops the init reference; every trainer and
    scaler made from it must be closed first."""

    def __init__(self, path=None):
        self.path = find_plugin(path)
        try:
            self._lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise SdtrainError(-6, "The plugin %s could not be loaded: %s; check that it is libsdtrain.so built for "
                               "this machine and that the libraries it needs are installed." % (self.path, e)) from None
        try:
            version = _abi.Version.in_dll(self._lib, _abi.ENTRY_SYMBOL)
        except ValueError:
            raise SdtrainError(-7, "%s is not an sdtrain plugin: it exports no %s symbol; pass the path of "
                               "libsdtrain.so." % (self.path, _abi.ENTRY_SYMBOL)) from None
        # Rule 1.2: abi_version is the only field any version keeps; check it before the rest.
        if version.major != _abi.ABI_VERSION_MAJOR:
            raise SdtrainError(-2, "The plugin %s speaks ABI %s but this sdtrain Python package speaks ABI %s; use a "
                               "plugin of ABI major %d or the Python package that comes with the plugin."
                               % (self.path, _version_text(version), _version_text(HOST_VERSION),
                                  _abi.ABI_VERSION_MAJOR))
        self._entry = _abi.Entry.in_dll(self._lib, _abi.ENTRY_SYMBOL)
        self.abi_version = _version_text(self._entry.abi_version)
        self.plugin_version = (self._entry.plugin_version or b"").decode("utf-8", "replace")
        err = ctypes.create_string_buffer(_ERR_SIZE)
        st = self._entry.init(HOST_VERSION, ctypes.cast(err, ctypes.c_void_p), _ERR_SIZE)
        if st < 0:
            raise error_for(st, err.value.decode("utf-8", "replace"))
        self._open = True
        self._lock = threading.Lock()
        self._handles = weakref.WeakSet()

    # ---- factories -----------------------------------------------------------------------------

    def factory(self, factory_id, cls):
        """A copy of the factory table named factory_id (bytes), only the bytes the plugin's table
        has (a function appended later reads as NULL); SdtrainError UNSUPPORTED when absent."""
        self._require_open()
        address = self._entry.get_factory(factory_id)
        if not address:
            raise SdtrainError(-4, "The plugin %s (ABI %s) has no factory %s; install a newer sdtrain."
                               % (self.path, self.abi_version, factory_id.decode()))
        return read_struct(cls, address)

    def status_name(self, status):
        return self._entry.status_name(status).decode("ascii", "replace")

    def _require_open(self):
        if not getattr(self, "_open", False):
            raise SdtrainError(-3, "This sdtrain.Plugin was closed; open the plugin again.")

    def _adopt(self, handle_owner):
        self._handles.add(handle_owner)

    # ---- the handles a host makes ----------------------------------------------------------------

    def embedding_trainer(self, **callbacks):
        """A textual-inversion trainer (sdtrain.EmbeddingTrainer); callbacks as its constructor's."""
        from .training import EmbeddingTrainer
        return EmbeddingTrainer(self, **callbacks)

    def hypernetwork_trainer(self, **callbacks):
        """A hypernetwork trainer (sdtrain.HypernetworkTrainer); callbacks as its constructor's."""
        from .training import HypernetworkTrainer
        return HypernetworkTrainer(self, **callbacks)

    def loss_scaler(self, **config):
        """The plugin's loss scaler over float32 buffers (sdtrain.LossScaler)."""
        from .scaler import LossScaler
        return LossScaler(self, **config)

    # ---- lifetime ----------------------------------------------------------------------------------

    def close(self):
        """Drops this object's init reference (docs/abi.md 6.1). Every trainer and scaler made from
        it must be closed first; the library itself stays mapped (ctypes never unloads it)."""
        with self._lock:
            if not self._open:
                return
            live = [h for h in self._handles if not h.closed]
            if live:
                raise SdtrainError(-9, "Plugin.close() while %d trainer(s) or scaler(s) are open; close them first."
                                   % len(live))
            self._open = False
            self._entry.deinit()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<sdtrain.Plugin %s ABI %s plugin %s>" % (self.path, self.abi_version, self.plugin_version)


_default = None
_default_lock = threading.Lock()


def default_plugin():
    """One Plugin() per process for callers that pass none (found by Plugin's rule), opened at first use."""
    global _default
    with _default_lock:
        if _default is None or not _default._open:
            _default = Plugin()
        return _default
