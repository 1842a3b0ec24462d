"""parity_cli.py - what the parity scripts that drive a model CLI (t5, mmdit, flux, sd3_text) share: the skip
(77) where torch is not installed, their command line (--cli, --seed), the raw little-endian files exchanged
with the C CLI in a scratch folder, the relative error they judge by, and the closing verdict."""
import argparse
import contextlib
import os
import sys
import tempfile

SKIP = 77


def torch_or_skip(script):
    """torch, or exit 77 (ctest's skip) where it is not installed (CI)."""
    try:
        import torch
    except ImportError as e:
        print(f"{script}: skipped ({e})")
        sys.exit(SKIP)
    return torch


def cli_args():
    """--cli (the C CLI's path) and --seed (default 1); torch's generator seeded with it."""
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    return args


class RawFiles:
    """Raw little-endian row-major files in one folder, by name: what the C CLIs read and write."""

    def __init__(self, folder):
        self.folder = folder

    @classmethod
    @contextlib.contextmanager
    def temporary(cls):
        """RawFiles in a temporary folder, removed on leaving the with block."""
        with tempfile.TemporaryDirectory() as tmp:
            yield cls(tmp)

    def path(self, name):
        return os.path.join(self.folder, name)

    def write(self, name, t, dtype=None):
        """t as dtype (default float32); returns the file's path."""
        import torch
        t.detach().to(dtype or torch.float32).contiguous().numpy().tofile(self.path(name))
        return self.path(name)

    def read(self, name, shape, dtype=None):
        """A float32 (default) or int32 tensor of shape."""
        import numpy as np
        import torch
        np_dtype = {torch.float32: np.float32, torch.int32: np.int32}[dtype or torch.float32]
        return torch.from_numpy(np.fromfile(self.path(name), dtype=np_dtype)).reshape(shape)

    def read64(self, name, shape):
        """A float32 file as a float64 tensor (what the float64 references compare against)."""
        import torch
        return self.read(name, shape).to(torch.float64)


def rel_err(a, b):
    """max |a - b| / max |b|."""
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)


def finish(script, failures):
    """Prints the verdict; returns the exit status (1 when any case failed)."""
    print(f"{script}: " + ("all passed" if failures == 0 else f"{failures} failed"))
    return 1 if failures else 0
