"""torch_files.py - the torch side of test_torch_python.c (run by Debian's /usr/bin/python3 with python3-torch).

  make DIR    torch.save's a tree of every kind into DIR/zip.ckpt (zip layout) and DIR/legacy.pt (legacy layout),
              A1111 and diffusers embeddings (DIR/a1111.pt, DIR/a1111_old.pt, DIR/learned_embeds.bin) and a tiny
              checkpoint with its twin (DIR/tiny.ckpt: a state_dict wrapper, EMA keys, non-contiguous and offset
              views), and writes the description of each as DIR/<file>.json.
  check FILE...  torch.load(FILE, weights_only=True), runs pickletools.dis over its data.pkl, and prints
              the descriptions of what it loaded, one JSON line per file.

A description is JSON: null, true/false, {"int": n}, {"float": x}, "str", {"list": [...]}, {"tuple": [...]},
{"dict": [[k, v], ...], "ordered": bool}, {"tensor": "F32", "shape": [...], "values": [...], "param": bool}.
"""
import collections
import io
import json
import pickletools
import sys
import zipfile

import torch

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}


def describe(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"int": v}
    if isinstance(v, float):
        return {"float": v}
    if isinstance(v, str):
        return v
    if isinstance(v, torch.Tensor):
        flat = v.detach().reshape(-1)
        values = flat.to(torch.float64).tolist() if v.dtype.is_floating_point else flat.to(torch.int64).tolist()
        return {"tensor": DTYPES[v.dtype], "shape": list(v.shape), "values": values,
                "param": isinstance(v, torch.nn.Parameter)}
    if isinstance(v, list):
        return {"list": [describe(x) for x in v]}
    if isinstance(v, tuple):
        return {"tuple": [describe(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[describe(k), describe(x)] for k, x in v.items()],
                "ordered": isinstance(v, collections.OrderedDict)}
    raise TypeError(type(v))


def tree():
    g = torch.Generator().manual_seed(1234)
    base = torch.randn(4, 6, generator=g)
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(2, 3, generator=g)
    sd["f16"] = torch.randn(3, generator=g).half()
    sd["bf16"] = torch.randn(2, 2, generator=g).bfloat16()
    sd["f64"] = torch.randn(2, generator=g).double()
    sd["i64"] = torch.arange(-3, 3)
    sd["bool"] = torch.tensor([True, False, True])
    sd["u8"] = torch.tensor([0, 7, 255], dtype=torch.uint8)
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 4)
    sd["transposed"] = base.t()            # non-contiguous view of base's storage
    sd["row_slice"] = base[1:3]            # storage offset 6, shares base's storage
    sd["column"] = base[:, 2]              # strided
    return {"state_dict": sd, "global_step": 12345, "big": 2**40, "neg": -70000, "pi": 3.141592653589793,
            "name": "emb-é", "flag": True, "nothing": None, "layers": [1.0, 2.0, 1.0], "pair": (sd["f32"], 3),
            768: (collections.OrderedDict(w=torch.ones(2)), {}), "param": torch.nn.Parameter(torch.randn(2, generator=g))}


def tiny_checkpoint():
    g = torch.Generator().manual_seed(99)
    sd = collections.OrderedDict()
    sd["model.diffusion_model.out.2.weight"] = torch.randn(4, 3, generator=g).t()  # transposed on purpose
    sd["model.diffusion_model.out.2.bias"] = torch.randn(8, generator=g)[2:5]       # offset view
    sd["cond_stage_model.transformer.text_model.final_layer_norm.weight"] = torch.randn(5, generator=g).half()
    sd["first_stage_model.decoder.conv_out.bias"] = torch.randn(3, generator=g)
    sd["model_ema.diffusion_modelout2weight"] = torch.randn(3, 4, generator=g)
    sd["model_ema.num_updates"] = torch.tensor(7, dtype=torch.int32)
    return {"state_dict": sd, "global_step": 470000, "epoch": 3}


def make(d):
    outputs = {
        "zip.ckpt": (tree(), True),
        "legacy.pt": (tree(), False),
        "tiny.ckpt": (tiny_checkpoint(), True),
        "a1111.pt": ({"string_to_token": {"*": 265}, "string_to_param": {"*": torch.nn.Parameter(torch.randn(3, 8))},
                      "name": "my-style", "step": 499, "sd_checkpoint": "abcdef1234", "sd_checkpoint_name": "tiny"}, True),
        "a1111_old.pt": ({"string_to_token": {"*": 265}, "string_to_param": {"*": torch.randn(2, 8)},
                          "name": "old", "step": 0, "sd_checkpoint": None, "sd_checkpoint_name": None}, False),
        "learned_embeds.bin": ({"<cat-toy>": torch.randn(8)}, True),
    }
    # A1111's oldest form: string_to_param a ParameterDict (a pickled Module): read by the embedding loader only.
    pd = torch.nn.ParameterDict({"*": torch.nn.Parameter(torch.randn(2, 8))})
    torch.save({"string_to_token": {"*": 265}, "string_to_param": pd, "name": "pd", "step": 5}, f"{d}/paramdict.pt")
    with open(f"{d}/paramdict.pt.json", "w") as f:
        json.dump(describe(pd["*"]), f)
    for name, (obj, zipped) in outputs.items():
        torch.save(obj, f"{d}/{name}", _use_new_zipfile_serialization=zipped)
        with open(f"{d}/{name}.json", "w") as f:
            json.dump(describe(obj), f)


def check_one(path):
    with zipfile.ZipFile(path) as z:
        pkl = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
    pickletools.dis(pkl, out=io.StringIO())  # raises on a malformed opcode stream
    # torch < 2.0's weights_only unpickler lacks BINFLOAT, which CPython's own pickler (so torch.save too)
    # writes for every float: there, a file holding floats is loaded without weights_only after checking that
    # its opcodes are otherwise all ones that unpickler accepts.
    has_float = any(op.name == "BINFLOAT" for op, _, _ in pickletools.genops(pkl))
    if has_float and int(torch.__version__.split(".")[0]) < 2:
        allowed = {"PROTO", "STOP", "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM",
                   "SETITEMS", "MARK", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE",
                   "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "BININT", "BININT1", "BININT2", "BINUNICODE",
                   "BINPERSID", "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT", "LONG1", "BINFLOAT"}
        bad = {op.name for op, _, _ in pickletools.genops(pkl)} - allowed
        if bad:
            raise SystemExit(f"opcodes outside torch's weights_only set: {bad}")
        obj = torch.load(path)
    else:
        obj = torch.load(path, weights_only=True)
    print(json.dumps(describe(obj)))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        for p in sys.argv[2:]:
            check_one(p)
