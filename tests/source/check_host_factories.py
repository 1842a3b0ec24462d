#!/usr/bin/env python3
"""sdt-host (host-sim/, serve included), the Python binding (python/sdtrain) and the host integrations
(integrations/: the ComfyUI node pack and the webui extension, through the binding) speak only the trainer
factory ("sdtrain.trainer/1") and its extensions: none of them names a deprecated method factory (the
textual-inversion or hypernetwork factory, their trainers or configs), so neither asks a plugin for one.
The binding's _abi.py mirrors every struct of abi/sdtrain.h (tests/python/test_struct_layout.py) and so
keeps their definitions; nothing else in the binding uses them, and integrations/ keeps no struct copies of
its own (no ctypes.Structure: the binding is the one home of the ABI's layouts). A file breaking the rule is printed with
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

# integrations/ goes through the binding's public API: no factory tables or ABI structs of its own.
INTEGRATION_LEGACY = re.compile(PY_LEGACY.pattern + r"|\bctypes\.Structure\b|\b_abi\b|\.factory\(")


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
integration_files = sorted((root / "integrations").rglob("*.py"))
if len(c_files) < 20 or not py_files or len(integration_files) < 3:
    sys.exit("check_host_factories: found only %d C files, %d binding and %d integration Python files under %s"
             % (len(c_files), len(py_files), len(integration_files), root))
py_comment_free = lambda text: re.sub(r"#[^\n]*", "", text)  # noqa: E731
broken = (scan(c_files, C_LEGACY, comment_free) + scan(py_files, PY_LEGACY, py_comment_free)
          + scan(integration_files, INTEGRATION_LEGACY, py_comment_free))
for line in broken:
    print("uses a deprecated method factory or an ABI copy of its own (use sdtrain.trainer/1, in integrations/ through the binding):", line)
print("%d C files, %d binding and %d integration Python files checked"
      % (len(c_files), len(py_files), len(integration_files)))
sys.exit(1 if broken else 0)
