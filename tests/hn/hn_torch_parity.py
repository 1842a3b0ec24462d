#!/usr/bin/env python3
"""Hypernetwork module parity with PyTorch, built the way A1111 builds it.

For every activation A1111 accepts (that sdtrain supports), with and without layer
norm and dropout, hn_cli writes a hypernetwork (.safetensors) and one module's
forward/backward; this script rebuilds that module as A1111's HypernetworkModule
does (torch.nn.Sequential of Linear, activation, LayerNorm, Dropout, with A1111's
activation table), loads the state dict by A1111's keys from the file (so the
Sequential positions must agree), replaces each Dropout by the C side's mask
(torch's own RNG cannot be matched) and compares the output, d(input) and every
weight gradient. CPU, float32. Exits 77 (skipped) without torch.

    hn_torch_parity.py --cli path/to/hn_cli [--seed N]
"""
import argparse
import inspect
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not installed for", sys.executable, "- skipping")
    sys.exit(77)

ACTIVATIONS = ["linear", "relu", "leakyrelu", "elu", "swish", "tanh", "sigmoid", "hardswish", "gelu", "silu",
               "mish", "softplus", "softsign", "tanhshrink", "hardtanh", "relu6", "hardsigmoid", "selu", "celu",
               "logsigmoid", "hardshrink", "softshrink"]

# A1111's HypernetworkModule.activation_dict (modules/hypernetworks/hypernetwork.py)
ACTIVATION_DICT = {
    "linear": torch.nn.Identity, "relu": torch.nn.ReLU, "leakyrelu": torch.nn.LeakyReLU, "elu": torch.nn.ELU,
    "swish": torch.nn.Hardswish, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid,
}
ACTIVATION_DICT.update({name.lower(): cls for name, cls in inspect.getmembers(torch.nn.modules.activation)
                        if inspect.isclass(cls) and cls.__module__ == "torch.nn.modules.activation"})


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (path, name, info["dtype"])
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=torch.float32)
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


class Mask(torch.nn.Module):
    """Stands where A1111 has Dropout: multiplies by the C side's mask."""

    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def forward(self, x):
        return x * self.mask.reshape(x.shape)


def build_module(meta, dim, masks):
    """A1111's HypernetworkModule.__init__ layer loop, with Dropout replaced by masks."""
    layer_structure = json.loads(meta["layer_structure"])
    dropout_structure = json.loads(meta["dropout_structure"])
    activation_func = meta["activation_func"]
    add_layer_norm = meta["is_layer_norm"] == "true"
    activate_output = meta["activate_output"] == "true"
    linears = []
    for i in range(len(layer_structure) - 1):
        linears.append(torch.nn.Linear(int(dim * layer_structure[i]), int(dim * layer_structure[i + 1])))
        if activation_func == "linear" or activation_func is None or (
                i >= len(layer_structure) - 2 and not activate_output):
            pass
        else:
            linears.append(ACTIVATION_DICT[activation_func]())
        if add_layer_norm:
            linears.append(torch.nn.LayerNorm(int(dim * layer_structure[i + 1])))
        if dropout_structure[i + 1] > 0:
            linears.append(Mask(masks[len(linears)]))
    module = torch.nn.Module()
    module.linear = torch.nn.Sequential(*linears)  # A1111's attribute name: keys read "linear.<i>.weight"
    return module


def rel_err(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-12))


def run_case(cli, tmp, activation, layer_norm, dropout, activate_output, kind, seed):
    subprocess.run([cli, tmp, activation, str(int(layer_norm)), str(int(dropout)), str(int(activate_output)), kind,
                    str(seed)], check=True)
    weights, meta = read_safetensors(os.path.join(tmp, "hn.safetensors"))
    io, io_meta = read_safetensors(os.path.join(tmp, "io.safetensors"))
    dim, k = int(io_meta["width"]), int(io_meta["kind"])
    strength = float(io_meta["strength"])
    masks = {int(name.split(".")[1]): t for name, t in io.items() if name.startswith("mask.")}
    seq = build_module(meta, dim, masks)
    prefix = f"{dim}.{k}."
    state = {name[len(prefix):]: t for name, t in weights.items() if name.startswith(prefix)}
    seq.load_state_dict(state)  # strict: every A1111 key must exist at the same position
    x = io["x"].clone().requires_grad_(True)
    out = x + seq.linear(x) * strength
    out.backward(io["d_out"])
    label = f"{activation} norm={int(layer_norm)} dropout={int(dropout)} activate_output={int(activate_output)} {kind}"
    errors = {"forward": rel_err(io["out"], out.detach()), "d_in": rel_err(io["d_in"], x.grad)}
    for name, p in seq.named_parameters():
        errors["grad " + name] = rel_err(io["grad." + prefix + name], p.grad)
    worst = max(errors, key=errors.get)
    limit = 1e-5 if worst == "forward" else 1e-4
    ok = all(v < (1e-5 if key == "forward" else 1e-4) for key, v in errors.items())
    print(f"{'ok  ' if ok else 'FAIL'} {label}: worst {worst} rel err {errors[worst]:.2e} (limit {limit:g})")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, seed {args.seed}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sdt-hn-parity-") as tmp:
        for a, activation in enumerate(ACTIVATIONS):
            for variant in range(4):
                layer_norm, dropout = bool(variant & 1), bool(variant & 2)
                kind = "v" if (a + variant) % 2 else "k"
                if not run_case(args.cli, tmp, activation, layer_norm, dropout, variant in (1, 2), kind,
                                args.seed + 10 * a + variant):
                    failures += 1
    print(f"hn_torch_parity: {failures} of {4 * len(ACTIVATIONS)} cases failed" if failures else
          f"hn_torch_parity: all {4 * len(ACTIVATIONS)} cases match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
