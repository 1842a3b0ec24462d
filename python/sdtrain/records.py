"""Plain Python records made from the ABI's output structs (metrics, previews, files, infos)."""
import ctypes

from . import _abi

# Output-struct fields that hold an enum, and the names they are shown as.
_ENUM_NAMES = {
    "precision": {v: k for k, v in _abi.PRECISIONS.items()},
    "device": {v: k for k, v in _abi.DEVICES.items()},
    "kind": _abi.FILE_KINDS,
    "format": _abi.EMBEDDING_FORMATS,
}


class Record:
    """Attribute access over the fields of one struct, e.g. metrics.step, metrics.loss."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def as_dict(self):
        return dict(self.__dict__)

    def __eq__(self, other):
        return isinstance(other, Record) and self.__dict__ == other.__dict__

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.__dict__.items()))


def _value(name, ctype, raw):
    if isinstance(raw, bytes):  # char[N]
        return raw.decode("utf-8", "replace")
    if ctype is ctypes.c_char_p:
        return None if raw is None else raw.decode("utf-8", "replace")
    if isinstance(raw, ctypes.Array):
        return list(raw)
    if name in _ENUM_NAMES:
        return _ENUM_NAMES[name].get(raw, raw)
    return raw


def record_from(struct, cls=Record, skip=()):
    """A Record of every field of a ctypes struct but struct_size, reserved* and pointers."""
    fields = {}
    for name, ctype in type(struct)._fields_:
        if name == "struct_size" or name.startswith("reserved") or name in skip:
            continue
        if issubclass(ctype, ctypes._Pointer):
            continue
        fields[name] = _value(name, ctype, getattr(struct, name))
    return cls(**fields)


class Metrics(Record):
    """sdt_metrics: step, max_steps, epoch, epoch_step, skipped_steps, loss, grad_norm, learn_rate,
    loss_scale, images_per_second, elapsed_seconds, fallback_fired, precision ("fp32"/"fp16"/"bf16")."""


class Preview(Record):
    """sdt_preview: width, height, channels, step, path, prompt, and pixels (bytes, RGB rows top to bottom)."""


class SavedFile(Record):
    """sdt_saved_file: kind ("embedding", "training_state", "hypernetwork", ...), step, path."""


class PrepareInfo(Record):
    """sdt_prepare_info: what prepare() found (precision, device, batch_size, steps_per_epoch, start_step,
    max_steps, memory_estimate_bytes, ...)."""
