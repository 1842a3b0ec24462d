#!/usr/bin/env python3
"""Forge's textual-inversion loading, as its code does it, in the standard library (no torch).

Mirrors lllyasviel/stable-diffusion-webui-forge (main, 2025-06):
  backend/text_processing/textual_inversion.py  EmbeddingDatabase.load_from_dir / load_from_file
      (os.walk with followlinks, empty files skipped, the name is the file's stem, one failing file
      printed as "Error loading embedding" and skipped) and create_embedding_from_data (its three
      branches: string_to_param; a dict with clip_g and clip_l, as wide as both; any other dict of
      tensors, which must hold exactly one: "embedding file has multiple terms in it"), then the
      expected-shape filter (registered, or skipped_embeddings);
  backend/text_processing/classic_engine.py  CLIPEmbeddingForTextualInversion.forward: the rows an
      engine puts in the prompt, embedding.vec[key] for a dict, else the one tensor;
  backend/diffusion_engine/flux.py, sd35.py  the engines: Flux one CLIP-L engine (clip_l, 768),
      SD3.5 a CLIP-L (clip_l, 768) and a CLIP-G engine (clip_g, 1280), each with its own database
      over the same folder; T5TextProcessingEngine has no embedding database.

Only .safetensors files are read here (what sdtrain writes); other extensions are ignored as Forge
ignores what it cannot load only after trying, which the tests do not need.

usage: forge_embedding_loader.py DIR KEY=WIDTH [KEY=WIDTH ...]
  one KEY=WIDTH per engine (Forge: clip_l=768, clip_g=1280; the tests' tiny models have other widths).
Prints JSON: {"errors": [files], "engines": {KEY: {"loaded": {name: [[row], ...]}, "skipped": [names]}}}.
"""
import json
import os
import struct
import sys


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    tensors = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        b0, b1 = entry["data_offsets"]
        chunk = body[b0:b1]
        dtype = entry["dtype"]
        if dtype == "F32":
            values = list(struct.unpack("<%df" % (len(chunk) // 4), chunk))
        elif dtype == "F16":
            values = list(struct.unpack("<%de" % (len(chunk) // 2), chunk))
        elif dtype == "BF16":
            halves = struct.unpack("<%dH" % (len(chunk) // 2), chunk)
            values = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        else:
            raise ValueError("dtype %s" % dtype)
        shape = entry["shape"]
        if len(shape) == 1:
            rows = [values]
        else:
            cols = shape[-1]
            rows = [values[i * cols:(i + 1) * cols] for i in range(len(values) // cols)]
        tensors[key] = {"shape": shape, "rows": rows}
    return tensors


def create_embedding_from_data(data, filename):
    """(vec, shape, vectors) as Forge's function computes them; raises as it raises."""
    if "string_to_param" in data:
        raise AssertionError("string_to_param files are not written by sdtrain's tables")
    if "clip_g" in data and "clip_l" in data:  # SDXL embedding
        vec = {k: v["rows"] for k, v in data.items()}
        return vec, data["clip_g"]["shape"][-1] + data["clip_l"]["shape"][-1], data["clip_g"]["shape"][0]
    if data:  # diffuser concepts
        assert len(data.keys()) == 1, "embedding file has multiple terms in it"
        emb = next(iter(data.values()))
        shape = emb["shape"] if len(emb["shape"]) == 2 else [1] + emb["shape"]
        return emb["rows"], shape[-1], shape[0]
    raise Exception("Couldn't identify %s as neither textual inversion embedding nor diffuser concept." % filename)


def main():
    folder = sys.argv[1]
    engines = {}
    for arg in sys.argv[2:]:
        key, width = arg.split("=")
        engines[key] = {"expected": int(width), "loaded": {}, "skipped": []}
    errors = []
    for key, engine in engines.items():  # each engine walks the folder with its own database
        for root, _, files in os.walk(folder, followlinks=True):
            for fn in files:
                full = os.path.join(root, fn)
                if os.stat(full).st_size == 0:
                    continue
                name, ext = os.path.splitext(fn)
                if ext.upper() != ".SAFETENSORS":
                    continue
                try:
                    vec, shape, _vectors = create_embedding_from_data(read_safetensors(full), fn)
                except Exception:  # Forge: print(f"Error loading embedding {fn}"); continue
                    if full not in errors:
                        errors.append(full)
                    continue
                if engine["expected"] == -1 or engine["expected"] == shape:
                    engine["loaded"][name] = vec[key] if isinstance(vec, dict) else vec
                else:
                    engine["skipped"].append(name)
    print(json.dumps({"errors": sorted(errors),
                      "engines": {k: {"loaded": e["loaded"], "skipped": sorted(e["skipped"])}
                                  for k, e in engines.items()}}))


if __name__ == "__main__":
    main()
