#!/usr/bin/env python3
"""A chain of hypernetworks through sdtrain's applier against A1111's formula in PyTorch.

hn_chain_cli writes three hypernetworks (width 8: linear; relu with layer norm; gelu with
activate output) and what the applier (ABI 1.4) makes of random rows for K and V at strengths
0.8, -0.5, 1.7. This script rebuilds each module as A1111's HypernetworkModule does (the builder
of hn_torch_parity.py), loads it by A1111's keys, and applies A1111's apply_hypernetworks: for each
hypernetwork in order, context_k = context_k + layers_k(context_k) * multiplier (and V alike).
CPU, float32. Exits 77 (skipped) without torch.

    hn_chain_parity.py --cli path/to/hn_chain_cli [--seed N]
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not installed for", sys.executable, "- skipping")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hn_torch_parity import build_module, read_safetensors  # noqa: E402

STRENGTHS = [0.8, -0.5, 1.7]
WIDTH = 8


def read_rows(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(-1, WIDTH).clone()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--seed", type=int, default=20261126)
    args = ap.parse_args()
    print("hn_chain_parity: seed", args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([args.cli, tmp, str(args.seed)], check=True)
        x = read_rows(os.path.join(tmp, "in.f32"))
        got = {0: read_rows(os.path.join(tmp, "k.f32")), 1: read_rows(os.path.join(tmp, "v.f32"))}
        modules = []
        for i in range(len(STRENGTHS)):
            weights, meta = read_safetensors(os.path.join(tmp, f"hn{i}.safetensors"))
            pair = []
            for kind in (0, 1):
                m = build_module(meta, WIDTH, {})
                m.load_state_dict({k[len(f"{WIDTH}.{kind}."):]: v for k, v in weights.items()
                                   if k.startswith(f"{WIDTH}.{kind}.")})
                m.eval()
                pair.append(m)
            modules.append(pair)
        failed = False
        with torch.no_grad():
            for kind in (0, 1):
                ctx = x.clone()
                for pair, s in zip(modules, STRENGTHS):  # A1111's apply_hypernetworks order
                    ctx = ctx + pair[kind].linear(ctx) * s
                err = float((got[kind] - ctx).abs().max() / ctx.abs().max())
                # each member alone moves the rows: a chain that skipped one would fail
                moved = float((ctx - x).abs().max())
                print(f"kind {'KV'[kind]}: relative error {err:.2e}, the chain moved the rows by {moved:.3f}")
                if err > 1e-5 or moved < 1e-2:
                    failed = True
        print("hn_chain_parity:", "FAILED" if failed else "passed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
