#!/usr/bin/env python3
"""sdt-host (host-sim/, serve included) and the Python binding (python/sdtrain) speak only the trainer
factory ("sdtrain.trainer/1") and its extensions: none of them names a deprecated method factory (the
textual-inversion or hypernetwork factory, their trainers or configs), so neither asks a plugin for one.
The binding's _abi.py mirrors every struct of abi/sdtrain.h (tests/python/test_struct_layout.py) and so
keeps their definitions; nothing else in the binding uses them. A file breaking the rule is printed with
the line, and the check fails.
Usage: check_host_factories.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")

C_LEGACY = re.compile(r"\b(SDT_FACTORY_TEXTUAL_INVERSION|SDT_FACTORY_HYPERNETWORK|sdt_ti_factory|sdt_hn_factory|"
                      r"sdt_ti_config|sdt_hn_config|sdt_ti_trainer|sdt_hn_trainer)\b|sdtrain\.(textual_inversion|hypernetwork)/1")
PY_LEGACY = re.compile(r"\b(FACTORY_TEXTUAL_INVERSION|FACTORY_HYPERNETWORK|TiFactory|HnFactory|TiConfig|HnConfig)\b|"
                       r"sdtrain\.(textual_inversion|hypernetwork)/1")


def comment_free(text):
    """C text without comments (a comment may name the old factories, to say what they were)."""
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def scan(files, pattern, strip):
    broken = []
    for path in files:
        text = strip(path.read_text(encoding="utf-8"))
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                broken.append("%s:%d: %s" % (path.relative_to(root), number, line.strip()))
    return broken


c_files = sorted(p for p in (root / "host-sim").rglob("*") if p.suffix in (".c", ".h"))
py_files = sorted(p for p in (root / "python" / "sdtrain").glob("*.py") if p.name != "_abi.py")
if len(c_files) < 20 or not py_files:
    sys.exit("check_host_factories: found only %d C files and %d Python files under %s" % (len(c_files), len(py_files), root))
broken = scan(c_files, C_LEGACY, comment_free) + scan(py_files, PY_LEGACY, lambda text: re.sub(r"#[^\n]*", "", text))
for line in broken:
    print("uses a deprecated method factory (use sdtrain.trainer/1 and its extensions):", line)
print("%d C files and %d Python files checked" % (len(c_files), len(py_files)))
sys.exit(1 if broken else 0)
