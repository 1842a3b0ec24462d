"""The plugin's loss scaler ("sdtrain.scaler/1"): LossScaler over float32 buffers, and
GradScaler, the same object with torch.amp.GradScaler's calls for a host's own PyTorch loop.

Every misuse the plugin checks (unscale twice, unscale after step, step twice, a step with no
inf check, update with nothing recorded, settings out of range) raises ScalerMisuseError or
SdtrainError with the plugin's sentence; none is an assertion. Complex losses, gradients and
buffers are refused (UNSUPPORTED) before anything is touched."""
import ctypes
import struct
import weakref
import zlib

from . import _abi
from ._closeable import Closeable
from .errors import ScalerMisuseError, SdtrainError, error_for
from .plugin import copy_out_string

# The state blob (docs/abi.md 9.4): "SDTSCAL\0", u32 version, u32 enabled, f32 scale, f64 growth,
# f64 backoff, i64 interval, i64 tracker, i32 hysteresis, i32 hysteresis tracker, f32 min scale
# (64 bytes, little-endian); version 2 appends the CRC-32 of those 64 bytes and 4 zero bytes.
_BLOB = struct.Struct("<8sIIfddqqiif")
_MAGIC = b"SDTSCAL\0"
_BLOB_KEYS = ("version", "enabled", "scale", "growth_factor", "backoff_factor", "growth_interval",
              "growth_tracker", "hysteresis", "hysteresis_tracker", "min_scale")


_UNSUPPORTED = -4


def _is_complex(value):
    """A Python, NumPy or torch complex number or array (without importing NumPy or torch)."""
    if isinstance(value, complex):
        return True
    dtype = getattr(value, "dtype", None)
    return bool(getattr(dtype, "is_complex", False)) or getattr(dtype, "kind", None) == "c"


def _refuse_complex(value, what):
    """Complex values would lose their imaginary part on the way to float32 (a silent corruption):
    refused with a sentence naming what held them."""
    if _is_complex(value):
        dtype = getattr(value, "dtype", None)
        raise SdtrainError(_UNSUPPORTED, "%s is complex %s; sdtrain's loss scaler works on real float32 values "
                           "only: pass real numbers (for complex parameters, train their real and imaginary parts "
                           "as real tensors, e.g. torch.view_as_real)."
                           % (what, "(dtype %s)" % dtype if dtype is not None else repr(value)))
    return value


def decode_state(blob):
    """The fields of a scaler state blob, as a dict (BAD_FORMAT when it is not one)."""
    if len(blob) < _BLOB.size or blob[:8] != _MAGIC:
        raise SdtrainError(-7, "The buffer (%d bytes) is not a loss-scaler state from save_state()." % len(blob))
    values = _BLOB.unpack_from(blob)
    return dict(zip(_BLOB_KEYS, values[1:]))


def encode_state(fields):
    """A version-2 blob of fields (decode_state's keys), for LossScaler.load_state."""
    body = _BLOB.pack(_MAGIC, 2, *(fields[k] for k in _BLOB_KEYS[1:]))
    return body + struct.pack("<II", zlib.crc32(body) & 0xFFFFFFFF, 0)


class LossScaler(Closeable):
    """The plugin's scaler over float32 gradient buffers, one state per optimizer index.

    LossScaler(plugin=None, optimizer_count=1, init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True, hysteresis=1, min_scale=0.0). Per iteration: scale_loss ->
    (backward) -> unscale(i, buffers) for each optimizer -> (clip) -> should_step(i), stepping
    optimizer i only when True -> update()."""

    def __init__(self, plugin=None, **config):
        if plugin is None:
            from .plugin import default_plugin
            plugin = default_plugin()
        self.plugin = plugin
        self.closed = True
        self._f = plugin.factory(_abi.FACTORY_SCALER, _abi.LossScalerFactory)
        cfg = _abi.LossScalerConfig.new()
        st = self._f.config_defaults(ctypes.byref(cfg))
        if st < 0:
            raise error_for(st, "config_defaults() of the loss scaler failed.")
        known = [n for n, _ in _abi.LossScalerConfig._fields_ if n != "struct_size" and not n.startswith("reserved")]
        for name, value in config.items():
            if name not in known:
                raise SdtrainError(-1, "LossScaler has no setting %r; the settings are: %s." % (name, ", ".join(known)))
            try:
                setattr(cfg, name, value)
            except TypeError:
                raise SdtrainError(-1, "LossScaler setting %s cannot be %r." % (name, value)) from None
        self.optimizer_count = cfg.optimizer_count
        self.enabled = bool(cfg.enabled)
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(2048)
        st = self._f.create(ctypes.byref(cfg), ctypes.byref(handle), ctypes.cast(err, ctypes.c_void_p), 2048)
        if st < 0:
            raise error_for(st, err.value.decode("utf-8", "replace"))
        self._handle = handle
        self.closed = False
        plugin._adopt(self)

    def _check(self, status):
        if status < 0:
            raise error_for(status, copy_out_string(self._f.get_last_error, self._handle)[1])
        return status

    def _require_open(self):
        if self.closed:
            raise SdtrainError(-9, "This loss scaler was closed; make a new one.")

    def scale_loss(self, loss):
        """loss * scale, as the plugin computes it in float32 (loss unchanged when disabled)."""
        self._require_open()
        out = ctypes.c_float()
        loss = float(_refuse_complex(loss, "scale_loss(): the loss"))
        self._check(self._f.scale_loss(self._handle, loss, ctypes.byref(out)))
        return out.value

    def unscale_pointers(self, optimizer, buffers):
        """Unscales optimizer's gradients in place: buffers is a list of (address, float count)
        of float32 memory. Returns True when any was inf or NaN (its step will be skipped)."""
        self._require_open()
        n = len(buffers)
        ptrs = (ctypes.POINTER(ctypes.c_float) * max(n, 1))(
            *[ctypes.cast(ctypes.c_void_p(a), ctypes.POINTER(ctypes.c_float)) for a, _ in buffers])
        counts = (ctypes.c_uint64 * max(n, 1))(*[c for _, c in buffers])
        found = ctypes.c_bool(False)
        self._check(self._f.unscale(self._handle, optimizer, ptrs if n else None, counts if n else None, n,
                                    ctypes.byref(found)))
        return found.value

    def unscale(self, optimizer, buffers):
        """As unscale_pointers, for writable float32 buffers (array.array("f"), a ctypes float
        array, a NumPy float32 array, a memoryview of one)."""
        views, pairs = [], []
        for b in buffers:
            m = memoryview(b)
            if "Z" in m.format:  # the buffer protocol's complex formats ("Zf", "Zd")
                raise SdtrainError(_UNSUPPORTED, "unscale(): buffer %d holds complex numbers (format %r); sdtrain's "
                                   "loss scaler unscales real float32 gradients only: pass their real and imaginary "
                                   "parts as float32 (NumPy: a.view(numpy.float32))." % (len(pairs), m.format))
            if m.readonly or m.itemsize != 4 or m.format not in ("f", "<f", "=f") or not m.c_contiguous:
                raise SdtrainError(-1, "unscale(): buffer %d is not writable contiguous float32 memory (format %r, "
                                   "item size %d); pass float32 arrays." % (len(pairs), m.format, m.itemsize))
            arr = (ctypes.c_float * (m.nbytes // 4)).from_buffer(m.cast("B"))
            views.append(arr)
            pairs.append((ctypes.addressof(arr), m.nbytes // 4))
        return self.unscale_pointers(optimizer, pairs)

    def should_step(self, optimizer):
        """Records optimizer's step: True when its gradients were finite and it should step."""
        self._require_open()
        out = ctypes.c_bool(False)
        self._check(self._f.should_step(self._handle, optimizer, ctypes.byref(out)))
        return out.value

    def update(self):
        """Ends the iteration: one backoff on any overflow, else a count toward growth."""
        self._require_open()
        self._check(self._f.update(self._handle))

    def get_scale(self):
        self._require_open()
        out = ctypes.c_double()
        self._check(self._f.get_scale(self._handle, ctypes.byref(out)))
        return out.value

    def save_state(self):
        """The state blob (bytes); only between iterations."""
        self._require_open()
        needed = ctypes.c_uint32(0)
        self._f.save_state(self._handle, None, 0, ctypes.byref(needed))
        buf = ctypes.create_string_buffer(max(needed.value, 1))
        self._check(self._f.save_state(self._handle, ctypes.cast(buf, ctypes.c_void_p), len(buf), ctypes.byref(needed)))
        return buf.raw[:needed.value]

    def load_state(self, blob):
        """Restores a blob from save_state (or encode_state); the plugin refuses a damaged one."""
        self._require_open()
        blob = bytes(blob)
        buf = ctypes.create_string_buffer(blob, len(blob))
        self._check(self._f.load_state(self._handle, ctypes.cast(buf, ctypes.c_void_p), len(blob)))

    def close(self):
        if not self.closed:
            self.closed = True
            self._f.destroy(self._handle)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


class GradScaler:
    """torch.amp.GradScaler's calls over the plugin's scaler, for a host's own PyTorch loop:

        scaler = sdtrain.GradScaler()
        with torch.autocast(...):
            loss = model(x)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)                 # optional, e.g. to clip
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(optimizer)                     # skipped when a gradient was inf/NaN
        scaler.update()

    GradScaler(device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True, *, plugin=None, max_optimizers=8). device is accepted for
    torch's signature: gradients in contiguous float32 CPU tensors are unscaled in place through
    their memory, any other gradient (CUDA, bfloat16, strided) through a float32 CPU copy. Misuse
    raises ScalerMisuseError with the plugin's sentence instead of an AssertionError."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, plugin=None, max_optimizers=8):
        self._device = device
        self._enabled = bool(enabled)
        self._scaler = LossScaler(plugin, optimizer_count=max_optimizers, init_scale=float(init_scale),
                                  growth_factor=float(growth_factor), backoff_factor=float(backoff_factor),
                                  growth_interval=int(growth_interval), enabled=self._enabled)
        self._index = {}       # id(optimizer) -> (a weak reference to it, the plugin's optimizer index)
        self._next_index = 0
        self._recorded = False  # the plugin holds an inf check of this iteration
        self._stage = {}       # index -> "unscaled" / "stepped" since the last update
        self._layouts = {}     # index -> the parameters whose gradients the plugin was given
        self._scratch = {}     # (index, position) -> zeros for a parameter without a gradient
        self._state = decode_state(self._scaler.save_state())  # as of the last update

    # ---- torch's calls ---------------------------------------------------------------------------------

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs * scale: a tensor (the graph kept), a float, or a list/tuple of them."""
        if not self._enabled:
            return outputs
        _refuse_complex(outputs, "scale(): the loss")
        torch = _torch()
        if torch is not None and isinstance(outputs, torch.Tensor):
            # The plugin's scale_loss(1) is its scale (a float32 value, so the product is torch's
            # outputs * scale exactly) and tells it the iteration's loss was scaled.
            return outputs * self._scaler.scale_loss(1.0)
        if isinstance(outputs, (int, float)) and not isinstance(outputs, bool):
            return self._scaler.scale_loss(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise SdtrainError(-1, "scale(): outputs must be a tensor, a float or a list or tuple of them (PyTorch: "
                           "\"outputs must be a Tensor or an iterable of Tensors\").")

    def _optimizer_index(self, optimizer):
        """The plugin's index of optimizer: a new one per optimizer object (the plugin fixes an index's
        gradient layout at its first unscale, so an optimizer made later never reuses one)."""
        known = self._index.get(id(optimizer))
        if known is not None and known[0]() is optimizer:
            return known[1]
        if self._next_index >= self._scaler.optimizer_count:
            raise SdtrainError(-1, "GradScaler: optimizer number %d is more than this scaler was made for; pass "
                               "GradScaler(max_optimizers=N) with N at least the number of optimizers (at most 64)."
                               % (self._next_index + 1))
        self._index[id(optimizer)] = (weakref.ref(optimizer), self._next_index)
        self._next_index += 1
        return self._next_index - 1

    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale in place and records whether any was inf/NaN."""
        if not self._enabled:
            return
        torch = _torch()
        index = self._optimizer_index(optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.numel() > 0]
        first = self._layouts.get(index)
        if first is not None and [p.numel() for p in first] != [p.numel() for p in params]:
            raise SdtrainError(-1, "GradScaler: optimizer %d had %d parameters (%d values) at its first unscale_ and "
                               "now %d (%d values); the scaler fixes an optimizer's parameters at its first unscale_, "
                               "so make a new GradScaler after add_param_group." % (
                                   index, len(first), sum(p.numel() for p in first), len(params),
                                   sum(p.numel() for p in params)))
        if not any(p.grad is not None for p in params):
            # Nothing to check: the plugin's step then says "No inf checks were recorded".
            self._stage[index] = "unscaled"
            return
        buffers, copies = [], []
        for pos, p in enumerate(params):
            g = p.grad
            if g is None:
                z = self._scratch.get((index, pos))
                if z is None or len(z) != p.numel():
                    z = self._scratch[(index, pos)] = (ctypes.c_float * p.numel())()
                ctypes.memset(z, 0, ctypes.sizeof(z))
                buffers.append((ctypes.addressof(z), p.numel()))
                continue
            if g.is_sparse:
                raise SdtrainError(-4, "GradScaler: parameter %d of optimizer %d has a sparse gradient; sdtrain's "
                                   "scaler unscales dense float32 gradients only." % (pos, index))
            _refuse_complex(g, "GradScaler: the gradient of parameter %d of optimizer %d (shape %s)"
                            % (pos, index, list(p.shape)))
            if g.dtype == torch.float16:
                raise ScalerMisuseError(-14, "optimizer %d: parameter %d has a float16 gradient (PyTorch: \"Attempting "
                                        "to unscale FP16 gradients.\"); keep the parameters an optimizer updates in "
                                        "float32 and run the forward in float16 under autocast." % (index, pos))
            if g.device.type == "cpu" and g.dtype == torch.float32 and g.is_contiguous():
                buffers.append((g.data_ptr(), g.numel()))
            else:
                tmp = g.detach().to(device="cpu", dtype=torch.float32).contiguous()
                if tmp.data_ptr() == g.data_ptr():
                    tmp = tmp.clone()
                copies.append((g, tmp))
                buffers.append((tmp.data_ptr(), tmp.numel()))
        self._scaler.unscale_pointers(index, buffers)
        self._recorded = True
        with torch.no_grad():
            for g, tmp in copies:
                g.copy_(tmp)
        self._layouts[index] = params
        self._stage[index] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless done this iteration), then optimizer.step(*args, **kwargs) unless a
        gradient was inf/NaN; returns what optimizer.step returned, or None when skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise ScalerMisuseError(-14, "step(): a closure is not supported while the scaler is enabled (PyTorch: "
                                    "\"Closure use is not currently supported if GradScaler is enabled.\"); run the "
                                    "forward and backward before step().")
        index = self._optimizer_index(optimizer)
        if index not in self._stage:
            self.unscale_(optimizer)
        if not self._scaler.should_step(index):  # raises the plugin's sentence on misuse
            self._stage[index] = "stepped"
            return None
        self._stage[index] = "stepped"
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Ends the iteration: one backoff when any optimizer overflowed, else a count toward growth.
        update(new_scale) sets the scale instead (the growth tracker unchanged), as torch's does."""
        if not self._enabled:
            return
        if new_scale is None:
            self._scaler.update()
        else:
            torch = _torch()
            _refuse_complex(new_scale, "update(): new_scale")
            if torch is not None and isinstance(new_scale, torch.Tensor):
                new_scale = new_scale.item()
            if self._recorded:
                self._scaler.update()  # ends the plugin's iteration; the scale is replaced below
            fields = dict(self._state, scale=float(new_scale))
            self._scaler.load_state(encode_state(fields))
        self._stage.clear()
        self._recorded = False
        self._state = decode_state(self._scaler.save_state())

    def get_scale(self):
        return self._scaler.get_scale() if self._enabled else 1.0

    def get_growth_factor(self):
        return self._state["growth_factor"]

    def get_backoff_factor(self):
        return self._state["backoff_factor"]

    def get_growth_interval(self):
        return self._state["growth_interval"]

    def _get_growth_tracker(self):
        return self._state["growth_tracker"] if self._enabled else 0

    def state_dict(self):
        """torch's five keys (scale, growth_factor, backoff_factor, growth_interval, _growth_tracker),
        which torch's GradScaler loads, plus "sdtrain_scaler_state": the plugin's blob. {} when disabled."""
        if not self._enabled:
            return {}
        blob = self._scaler.save_state()  # the plugin refuses mid-iteration, with its sentence
        s = decode_state(blob)
        return {"scale": float(s["scale"]), "growth_factor": s["growth_factor"], "backoff_factor": s["backoff_factor"],
                "growth_interval": s["growth_interval"], "_growth_tracker": s["growth_tracker"],
                "sdtrain_scaler_state": blob}

    def load_state_dict(self, state_dict):
        """Loads state_dict() of this class or of torch's GradScaler; the plugin validates the values."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise SdtrainError(-7, "load_state_dict(): the state dict is empty, possibly because it was saved from a "
                               "disabled GradScaler (PyTorch's words); pass the dict state_dict() returned.")
        if "sdtrain_scaler_state" in state_dict:
            self._scaler.load_state(state_dict["sdtrain_scaler_state"])
        else:
            fields = dict(self._state)
            for key, field in (("scale", "scale"), ("growth_factor", "growth_factor"),
                               ("backoff_factor", "backoff_factor"), ("growth_interval", "growth_interval"),
                               ("_growth_tracker", "growth_tracker")):
                if key not in state_dict:
                    raise SdtrainError(-7, "load_state_dict(): the state dict has no %r; pass the dict a GradScaler's "
                                       "state_dict() returned." % key)
                value = state_dict[key]
                fields[field] = float(value) if field in ("scale", "growth_factor", "backoff_factor") else int(value)
            self._scaler.load_state(encode_state(fields))
        self._state = decode_state(self._scaler.save_state())

    def close(self):
        self._scaler.close()
