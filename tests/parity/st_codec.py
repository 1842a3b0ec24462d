"""st_codec.py - a small safetensors reader and writer (F32 only) for the parity scripts.

The scripts need only torch: Debian's python3-torch has no `safetensors` package, and
the checkpoints they exchange with the C side are float32 (sdt-make-checkpoint --dtype f32).
"""
import json
import struct

import torch


def st_write(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def st_read(path, mapped=False):
    """{name: float32 tensor}; mapped: views of a copy-on-write map of the file (a multi-GB file read once, by
    whoever copies the tensors, instead of into memory twice)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = None if mapped else f.read()
    if mapped:
        import numpy as np
        mm = np.memmap(path, dtype=np.uint8, mode="c")
        return {name: torch.from_numpy(mm[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
                                       .view(np.float32).reshape(e["shape"]))
                for name, e in header.items() if name != "__metadata__" and _f32(path, name, e)}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        _f32(path, name, e)
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32).reshape(e["shape"])
    return out


def _f32(path, name, entry):
    if entry["dtype"] != "F32":
        raise SystemExit(f"{path}: {name} is {entry['dtype']}, expected F32")
    return True


def st_shapes(path):
    """{name: shape} from the header alone (a multi-GB file's config without reading its data)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {name: tuple(e["shape"]) for name, e in header.items() if name != "__metadata__"}
