"""The Python binding's ctypes structs against the C compiler's layout of abi/sdtrain.h.

usage: test_struct_layout.py PROBE abi/sdtrain.h
PROBE is the program gen_layout_probe.py wrote and CMake built: it prints every struct's size
and alignment and every field's offset and size as the compiler sees them. Every struct of the
header must exist in sdtrain._abi.STRUCTS with the same fields in the same order, the same
offsets, sizes and alignment. The header's version and enum values must be the binding's too.
When someone appends a field to a struct in the header, this test fails until the same field is
appended to python/sdtrain/_abi.py (and the binding's ABI minor follows the header's)."""
import ctypes
import os
import re
import subprocess
import sys

import sdtrain._abi as abi

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def c_layout(probe):
    out = subprocess.run([probe], check=True, capture_output=True, text=True).stdout
    structs = {}
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "struct":
            structs[parts[1]] = {"size": int(parts[2]), "align": int(parts[3]), "fields": []}
        elif parts[0] == "field":
            structs[parts[1]]["fields"].append((parts[2], int(parts[3]), int(parts[4])))
    return structs


def check_structs(c):
    if len(c) < 26:
        fail("the probe printed only %d structs" % len(c))
    for name, layout in c.items():
        cls = abi.STRUCTS.get(name)
        if cls is None:
            fail("%s is in abi/sdtrain.h but not in python/sdtrain/_abi.py" % name)
            continue
        py_fields = [(f[0], getattr(cls, f[0]).offset, getattr(cls, f[0]).size) for f in cls._fields_]
        c_names, py_names = [f[0] for f in layout["fields"]], [f[0] for f in py_fields]
        if c_names != py_names:
            missing = [n for n in c_names if n not in py_names]
            extra = [n for n in py_names if n not in c_names]
            first = next(i for i, (a, b) in enumerate(zip(c_names + [None], py_names + [None])) if a != b)
            fail("%s: the fields differ from position %d (header: %s, binding: %s); missing in the binding %s, "
                 "not in the header %s" % (name, first, c_names[first:first + 3], py_names[first:first + 3],
                                           missing, extra))
        for (cn, co, cs), (pn, po, ps) in zip(layout["fields"], py_fields):
            if cn == pn and (co, cs) != (po, ps):
                fail("%s.%s: C offset %d size %d, ctypes offset %d size %d" % (name, cn, co, cs, po, ps))
        if ctypes.sizeof(cls) != layout["size"]:
            fail("%s: C sizeof %d, ctypes sizeof %d" % (name, layout["size"], ctypes.sizeof(cls)))
        if ctypes.alignment(cls) != layout["align"]:
            fail("%s: C alignment %d, ctypes alignment %d" % (name, layout["align"], ctypes.alignment(cls)))
    for name in abi.STRUCTS:
        if name not in c:
            fail("the binding has %s, which abi/sdtrain.h does not" % name)
    print("structs compared: %d, fields compared: %d" % (len(c), sum(len(v["fields"]) for v in c.values())))


def enum_values(text, prefix):
    """{suffix: value} of the enum constants PREFIX_SUFFIX = N in the header."""
    values = {}
    for m in re.finditer(r"\b%s([A-Z0-9_]+)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))" % prefix, text):
        if "FORCE_32BIT" not in m.group(1):
            values[m.group(1)] = int(m.group(2), 0)
    return values


def check_constants(text):
    version = {k: int(v) for k, v in re.findall(r"#define SDT_ABI_VERSION_(MAJOR|MINOR|PATCH) (\d+)", text)}
    mine = {"MAJOR": abi.ABI_VERSION_MAJOR, "MINOR": abi.ABI_VERSION_MINOR, "PATCH": abi.ABI_VERSION_PATCH}
    if version != mine:
        fail("the header is ABI %s, the binding %s: update ABI_VERSION_* in python/sdtrain/_abi.py (the "
             "package version follows) with the fields the new minor appends" % (version, mine))
    # The package's version is the ABI's: python/sdtrain_wheel.py (the build backend) reads it from
    # _abi.py, and pyproject.toml states none that could disagree.
    python_dir = os.path.dirname(os.path.dirname(abi.__file__))
    backend = os.path.join(python_dir, "sdtrain_wheel.py")
    wanted = "%d.%d.%d" % (abi.ABI_VERSION_MAJOR, abi.ABI_VERSION_MINOR, abi.ABI_VERSION_PATCH)
    if os.path.isfile(backend):
        import importlib.util
        spec = importlib.util.spec_from_file_location("sdtrain_wheel", backend)
        wheel = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(wheel)
        if wheel.version() != wanted:
            fail("python/sdtrain_wheel.py builds version %s, the binding's ABI %s" % (wheel.version(), wanted))
    pyproject = os.path.join(python_dir, "pyproject.toml")
    if os.path.isfile(pyproject):
        with open(pyproject, encoding="utf-8") as f:
            found = re.search(r'^version = "([^"]+)"', f.read(), flags=re.M)
        if found and found.group(1) != wanted:
            fail("python/pyproject.toml's version is %s, the binding's ABI %s" % (found.group(1), wanted))
    for m in re.finditer(r'#define (SDT_FACTORY_\w+) "([^"]+)"', text):
        attr = {"SDT_FACTORY_TEXTUAL_INVERSION": "FACTORY_TEXTUAL_INVERSION", "SDT_FACTORY_HYPERNETWORK":
                "FACTORY_HYPERNETWORK", "SDT_FACTORY_SCALER": "FACTORY_SCALER",
                "SDT_FACTORY_TRAINER": "FACTORY_TRAINER"}.get(m.group(1))
        if attr is None or getattr(abi, attr).decode() != m.group(2):
            fail("factory id %s = %s is not the binding's" % (m.group(1), m.group(2)))
    # The trainer factory's extensions (1.7): SDT_EXT_EMBEDDING_FILES is the binding's EXT_EMBEDDING_FILES.
    extensions = re.findall(r'#define SDT_(EXT_\w+) "([^"]+)"', text)
    if len(extensions) < 3:
        fail("the header names %d extension ids; the trainer factory has three" % len(extensions))
    for name, value in extensions:
        if getattr(abi, name, b"").decode() != value:
            fail("extension id SDT_%s = %s is not the binding's" % (name, value))
    tables = [
        ("SDT_STATUS_", {v: k for k, v in abi.STATUS_NAMES.items()}),
        ("SDT_LOG_", {v.upper(): k for k, v in abi.LOG_LEVELS.items()}),
        ("SDT_PRECISION_", {k.upper(): v for k, v in abi.PRECISIONS.items()}),
        ("SDT_DEVICE_CHOICE_", {k.upper(): v for k, v in abi.DEVICES.items()}),
        ("SDT_CLIP_", {k.upper(): v for k, v in abi.CLIP_MODES.items()}),
        ("SDT_LATENT_", {k.upper(): v for k, v in abi.LATENT_SAMPLING.items()}),
        ("SDT_PREDICTION_", {k.upper(): v for k, v in abi.PREDICTION_TYPES.items()}),
        ("SDT_FILE_", {v.upper(): k for k, v in abi.FILE_KINDS.items()}),
        ("SDT_RUN_", {v.upper(): k for k, v in abi.RUN_STATES.items()}),
        ("SDT_EMBEDDING_FILE_", {v.upper(): k for k, v in abi.EMBEDDING_FORMATS.items()}),
    ]
    for prefix, mine in tables:
        header = enum_values(text, prefix)
        if prefix == "SDT_CLIP_":
            header = {k: v for k, v in header.items() if k in ("DISABLED", "VALUE", "NORM")}
        if header != mine:
            fail("enum %s*: the header has %s, the binding %s" % (prefix, sorted(header.items(), key=lambda kv: kv[1]),
                                                                 sorted(mine.items(), key=lambda kv: kv[1])))


def check_struct_size_rule():
    """new() sets struct_size to the binding's sizeof, so the plugin reads only what it knows."""
    for name, cls in abi.STRUCTS.items():
        if cls._fields_[0][0] == "struct_size" and cls.new().struct_size != ctypes.sizeof(cls):
            fail("%s.new() does not set struct_size" % name)


def main():
    probe, header = sys.argv[1], sys.argv[2]
    with open(header, encoding="utf-8") as f:
        text = f.read()
    check_structs(c_layout(probe))
    check_constants(text)
    check_struct_size_rule()
    if failures:
        print("%d layout difference(s) between abi/sdtrain.h and python/sdtrain/_abi.py" % len(failures))
        return 1
    print("OK: every struct, field and constant of abi/sdtrain.h matches the Python binding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
