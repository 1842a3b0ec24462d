#!/usr/bin/env python3
"""The include arrows of docs/DESIGN.md section 1 that point one way only.

Each rule names a source folder and the folders (or headers) it must never include; a file breaking one
is printed with the line and the rule, and the check fails. Includes inside plugin/ are relative to
plugin/ ("api/handle.h"), so a folder there is matched by the include's first path part; models/ folders
are on the include path by name, so a header there is matched by its file name.
Usage: check_include_layers.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)


def plugin_rule(folder, banned):
    """plugin/folder includes no header of the plugin folders in banned."""
    def broken(include):
        return include.split("/")[0] in banned
    return "plugin/" + folder, broken, "plugin/%s includes nothing from plugin/{%s}/" % (folder, ",".join(sorted(banned)))


def headers_of(folder):
    return {p.name for p in (root / folder).rglob("*.h")}


def models_rule(folder, banned_folder):
    names = headers_of(banned_folder)
    def broken(include):
        return pathlib.PurePath(include).name in names
    return folder, broken, "%s includes nothing from %s/" % (folder, banned_folder)


RULES = [
    # the training engine and the data layer sit below the ABI side (the host edge is plugin/host/)
    plugin_rule("train", {"api", "compose", "ti", "hn"}),
    plugin_rule("data", {"api", "compose", "train", "ti", "hn"}),
    plugin_rule("host", {"api", "compose", "train", "ti", "hn"}),
    # no method knows another: what combines them (joint runs, generate with an embedding) is compose/'s,
    # and the ABI side (api/) sits above both
    plugin_rule("ti", {"api", "compose", "hn"}),
    plugin_rule("hn", {"api", "compose", "ti"}),
    plugin_rule("compose", {"api"}),
    # config detection lives with the checkpoint layouts: checkpoints/ includes networks/, never the reverse,
    # and both read weights/ (the canonical key space), which includes neither
    models_rule("models/networks", "models/checkpoints"),
    models_rule("models/weights", "models/checkpoints"),
    models_rule("models/weights", "models/networks"),
]

failures = 0
for folder, broken, message in RULES:
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".c", ".h", ".cu", ".cuh"):
            continue
        text = path.read_text(encoding="utf-8")
        for match in INCLUDE.finditer(text):
            if broken(match.group(1)):
                line = text.count("\n", 0, match.start()) + 1
                print("%s:%d: #include \"%s\": %s" % (path.relative_to(root), line, match.group(1), message))
                failures += 1
if failures:
    print("%d include(s) point against the layering of docs/DESIGN.md section 1" % failures)
    sys.exit(1)
print("include layering: every rule holds")
