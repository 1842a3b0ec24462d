#!/usr/bin/env python3
"""A1111 .pt written by sdtrain, read with the standard library only (no torch):
the zip holds <top>/data.pkl, <top>/version, <top>/byteorder and one data/<i> per
tensor; pickletools disassembles data.pkl without error; the only globals are the
ones torch's weights_only loader allows (torch._utils._rebuild_tensor_v2,
collections.OrderedDict, torch.FloatStorage); the top-level dict's keys are
A1111's (int widths first, then the named keys in A1111's order).

    hn_pt_opcodes.py --cli path/to/hn_cli
"""
import argparse
import io
import os
import pickletools
import subprocess
import sys
import tempfile
import zipfile

ALLOWED = {"torch._utils _rebuild_tensor_v2", "collections OrderedDict", "torch FloatStorage"}
A1111_KEYS = ["step", "name", "layer_structure", "activation_func", "is_layer_norm", "weight_initialization",
              "sd_checkpoint", "sd_checkpoint_name", "activate_output", "use_dropout", "dropout_structure",
              "last_layer_dropout", "optional_info"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sdt-hn-pt-") as tmp:
        subprocess.run([args.cli, tmp, "swish", "1", "1", "0", "k", "5"], check=True)
        with zipfile.ZipFile(os.path.join(tmp, "hn.pt")) as z:
            names = z.namelist()
            top = names[0].split("/")[0]
            pkl = z.read(f"{top}/data.pkl")
            data = [n for n in names if n.startswith(f"{top}/data/")]
            problems = []
            for want in ("data.pkl", "version", "byteorder"):
                if f"{top}/{want}" not in names:
                    problems.append(f"missing {top}/{want}")
            out = io.StringIO()
            pickletools.dis(pkl, out=out)
            globals_seen = set()
            for line in out.getvalue().splitlines():
                if " GLOBAL " in line:
                    globals_seen.add(line.split("GLOBAL", 1)[1].strip().strip("'"))
            if not globals_seen <= ALLOWED:
                problems.append(f"globals outside the allow-list: {sorted(globals_seen - ALLOWED)}")
            # the top-level keys in order: unpickle with inert stand-ins for torch's classes
            class Stub:
                def __init__(self, *a, **k):
                    pass

            class Unpickler(__import__("pickle").Unpickler):
                def find_class(self, module, name):
                    if module == "collections" and name == "OrderedDict":
                        import collections
                        return collections.OrderedDict
                    return lambda *a, **k: Stub()

                def persistent_load(self, pid):
                    return Stub()

            root = Unpickler(io.BytesIO(pkl)).load()
            keys = list(root.keys())
            widths = [k for k in keys if isinstance(k, int)]
            named = [k for k in keys if not isinstance(k, int)]
            if keys[:len(widths)] != widths or named != A1111_KEYS:
                problems.append(f"keys {keys} are not A1111's")
            tensors = sum(len(sd) for w in widths for sd in root[w])
            if len(data) != tensors:
                problems.append(f"{len(data)} storages for {tensors} tensors")
    for p in problems:
        print("FAIL", p)
    print(f"hn_pt_opcodes: globals {sorted(globals_seen)}, {len(widths)} widths, {tensors} tensors, "
          f"{'ok' if not problems else 'FAILED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
