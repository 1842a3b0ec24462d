"""The plugin's defaults, as plain dicts: what a host shows in its form before the user types.

They come from the trainer factory ("sdtrain.trainer/1", ABI 1.7): train_options_defaults,
embedding_part_defaults and hypernetwork_part_defaults. Enum fields read as their names (the names
the trainers take), strings as str, encoders (1.9) as a list of names ([]: every encoder of the
family); reserved fields and struct_size are left out."""
import ctypes

from . import _abi
from .errors import error_for

_PARTS = (("options", _abi.TrainOptions, "train_options_defaults"),
          ("embedding", _abi.EmbeddingPart, "embedding_part_defaults"),
          ("hypernetwork", _abi.HypernetworkPart, "hypernetwork_part_defaults"))


def _as_python(name, value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if name in _abi.BITS_FIELDS:  # encoders: the names of its bits, [] for every one of the family
        return [n for n, bit in _abi.BITS_FIELDS[name].items() if value & bit]
    if name in _abi.ENUM_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        for enum_name, number in _abi.ENUM_FIELDS[name].items():
            if number == value:
                return enum_name
    return value


def defaults(plugin=None):
    """{"options": {...}, "embedding": {...}, "hypernetwork": {...}}: the plugin's defaults of
    sdt_train_options, sdt_embedding_part and sdt_hypernetwork_part by field name (the option names
    EmbeddingTrainer and HypernetworkTrainer take; a path field the plugin leaves empty is None)."""
    if plugin is None:
        from .plugin import default_plugin
        plugin = default_plugin()
    table = plugin.factory(_abi.FACTORY_TRAINER, _abi.TrainerFactory)
    out = {}
    for key, cls, fn_name in _PARTS:
        struct = cls.new()
        status = getattr(table, fn_name)(ctypes.byref(struct))
        if status < 0:
            raise error_for(status, "The plugin %s did not give its %s defaults (%s); reinstall sdtrain."
                            % (plugin.path, key, plugin.status_name(status)))
        out[key] = {name: _as_python(name, getattr(struct, name)) for name, _ in cls._fields_
                    if name != "struct_size" and not name.startswith("reserved")}
    return out
