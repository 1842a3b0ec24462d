#!/usr/bin/env python3
"""Feed the same random gradient streams to torch.amp.GradScaler and to the C loss
scaler (the scaler_stream driver) and require identical scale, growth-tracker and
skip sequences, and final AdamW parameters within a float tolerance.

Usage (on a host with PyTorch; CUDA is used when available, else the CPU):
    python3 tests/parity/scaler_vs_torch.py --driver build/tests/parity/scaler_stream
Options: --streams N (200), --seed S (random, printed), --device auto|cpu|cuda,
--keep DIR (write every failing stream there), --emulate (no torch: compare with
a pure-Python model of the torch rules; only checks the plumbing).
Exit status: 0 all streams match, 1 a mismatch or a driver failure, 77 torch missing.

How a stream maps onto torch: per optimizer k one fp32 parameter p_k and one AdamW;
per iteration raw values c_k (with injected inf/-inf/nan); the loss
sum_k (p_k * c_k).sum() is scaled and backpropagated, so p_k.grad = f32(S * c_k),
exactly what the driver writes. Optimizers flagged for it are unscale_()d first
(the clip-after-unscale pattern), then every optimizer is stepped and update()
is called once: torch's multi-optimizer semantics with one shared scale.
"""
import argparse
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

INF = float("inf")
NAN = float("nan")
# torch.optim.AdamW defaults, which the C optimizer's torch default matches.
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2)
UNDERFLOW_GUARD = 1e-20  # the C scaler refuses a scale whose fp32 reciprocal overflows; torch goes on to 0


def f32(x):
    """x rounded to float32; struct refuses only values that round to infinity."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def fmt(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "%.9g" % x


class Stream:
    def __init__(self, rng):
        self.n = rng.choice([1, 1, 2, 3])
        self.size = rng.randint(1, 12)
        self.init_scale = rng.choice([65536.0, 4.0, 128.0, 1000.0, 3.0, 0.5, 2.0**24, 2.0**126])
        self.growth_factor = rng.choice([2.0, 3.0, 1.5, 4.0, 16.0])
        self.backoff_factor = rng.choice([0.5, 0.25, 0.3, 0.125])
        self.growth_interval = rng.choice([1, 2, 3, 5, 2000])
        p_bad = rng.choice([0.0, 0.05, 0.2, 0.5])
        p_unscale = rng.choice([0.0, 0.3, 1.0])
        self.params = [[f32(rng.gauss(0, 1)) for _ in range(self.size)] for _ in range(self.n)]
        self.iters = []
        for _ in range(rng.randint(10, 120)):
            row = []
            for _ in range(self.n):
                vals = [f32(rng.gauss(0, 1)) for _ in range(self.size)]
                while any(v == 0.0 for v in vals):  # an all-zero grad is the C no-gradient-flow error
                    vals = [f32(rng.gauss(0, 1)) for _ in range(self.size)]
                if rng.random() < p_bad:
                    vals[rng.randrange(self.size)] = rng.choice([INF, -INF, NAN])
                row.append((rng.random() < p_unscale, vals))
            self.iters.append(row)

    def text(self):
        out = ["sdt-scaler-stream 1",
               "scaler %s %s %s %d" % (fmt(self.init_scale), fmt(self.growth_factor), fmt(self.backoff_factor),
                                       self.growth_interval),
               "adamw %s %s %s %s %s" % tuple(fmt(ADAMW[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay")),
               "optimizers %d %d" % (self.n, self.size)]
        for k, p in enumerate(self.params):
            out.append("param %d %s" % (k, " ".join(fmt(v) for v in p)))
        out.append("iters %d" % len(self.iters))
        for row in self.iters:
            for k, (u, vals) in enumerate(row):
                out.append("g %d %d %s" % (k, int(u), " ".join(fmt(v) for v in vals)))
        return "\n".join(out) + "\n"

    def describe(self):
        return ("%d optimizer(s) x %d, %d iterations, init %g, growth %g, backoff %g, interval %d"
                % (self.n, self.size, len(self.iters), self.init_scale, self.growth_factor, self.backoff_factor,
                   self.growth_interval))


def run_torch(stream, device):
    """Returns ([(scale, tracker, [stepped per optimizer])], [final params per optimizer])."""
    import torch

    params = [torch.tensor(p, dtype=torch.float32, device=device, requires_grad=True) for p in stream.params]
    opts = [torch.optim.AdamW([p], lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"],
                              weight_decay=ADAMW["weight_decay"]) for p in params]
    scaler = torch.amp.GradScaler(device.type, init_scale=stream.init_scale, growth_factor=stream.growth_factor,
                                  backoff_factor=stream.backoff_factor, growth_interval=stream.growth_interval)

    def adam_steps(opt, p):
        s = opt.state.get(p, {}).get("step")
        return 0 if s is None else int(s.item() if torch.is_tensor(s) else s)

    seq = []
    for row in stream.iters:
        for o in opts:
            o.zero_grad(set_to_none=True)
        cs = [torch.tensor(vals, dtype=torch.float32, device=device) for _, vals in row]
        loss = sum((p * c).sum() for p, c in zip(params, cs))
        scaler.scale(loss).backward()
        before = [adam_steps(o, p) for o, p in zip(opts, params)]
        for k, (unscale_first, _) in enumerate(row):
            if unscale_first:
                scaler.unscale_(opts[k])
        for o in opts:
            scaler.step(o)
        scaler.update()
        after = [adam_steps(o, p) for o, p in zip(opts, params)]
        seq.append((f32(scaler.get_scale()), int(scaler._get_growth_tracker()),
                    [int(a != b) for a, b in zip(after, before)]))
    return seq, [p.detach().cpu().tolist() for p in params]


def run_emulation(stream):
    """The torch rules in plain Python (fp32 rounding via struct), AdamW in float64:
    only for checking this script and the driver on a machine without torch."""
    scale, tracker = f32(stream.init_scale), 0
    params = [list(p) for p in stream.params]
    m = [[0.0] * stream.size for _ in range(stream.n)]
    v = [[0.0] * stream.size for _ in range(stream.n)]
    steps = [0] * stream.n
    seq = []
    for row in stream.iters:
        inv = f32(1.0 / scale) if scale else INF
        found = []
        grads = []
        for _, vals in row:
            g = [f32(f32(scale * c) * inv) for c in vals]
            found.append(any(not math.isfinite(f32(scale * c)) for c in vals))
            grads.append(g)
        stepped = []
        for k in range(stream.n):
            if found[k]:
                stepped.append(0)
                continue
            steps[k] += 1
            a = ADAMW
            bc1, bc2 = 1 - a["beta1"] ** steps[k], 1 - a["beta2"] ** steps[k]
            for j in range(stream.size):
                params[k][j] *= 1 - a["lr"] * a["weight_decay"]
                m[k][j] += (1 - a["beta1"]) * (grads[k][j] - m[k][j])
                v[k][j] = v[k][j] * a["beta2"] + (1 - a["beta2"]) * grads[k][j] ** 2
                params[k][j] -= a["lr"] / bc1 * m[k][j] / (math.sqrt(v[k][j]) / math.sqrt(bc2) + a["eps"])
            stepped.append(1)
        if any(found):
            scale, tracker = f32(scale * stream.backoff_factor), 0
        elif tracker + 1 == stream.growth_interval:
            grown = f32(scale * stream.growth_factor)
            if math.isfinite(grown):
                scale = grown
            tracker = 0
        else:
            tracker += 1
        seq.append((scale, tracker, stepped))
    return seq, params


def run_driver(driver, path):
    proc = subprocess.run([driver, path], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, None, proc.stderr.strip() or "exit status %d" % proc.returncode
    seq, finals = [], []
    for line in proc.stdout.splitlines():
        w = line.split()
        if w and w[0] == "iter":
            seq.append((f32(float(w[3])), int(w[5]), [int(x) for x in w[7:]]))
        elif w and w[0] == "final":
            finals.append([float(x) for x in w[2:]])
    return seq, finals, None


def first_mismatch(want, got):
    if len(want) != len(got):
        return "the driver reported %d iterations, the reference %d" % (len(got), len(want))
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return ("iteration %d: reference (scale %.9g, tracker %d, stepped %s) vs C (scale %.9g, tracker %d, stepped %s)"
                    % (i, a[0], a[1], a[2], b[0], b[1], b[2]))
    return None


def params_mismatch(want, got, rtol=1e-4, atol=1e-5):
    for k, (pw, pg) in enumerate(zip(want, got)):
        for j, (a, b) in enumerate(zip(pw, pg)):
            if not (abs(a - b) <= atol + rtol * abs(a)) and not (math.isnan(a) and math.isnan(b)):
                return "optimizer %d element %d: reference %.9g vs C %.9g" % (k, j, a, b)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--driver", required=True, help="path to the scaler_stream executable")
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--keep", default=None, help="directory to write failing streams to")
    ap.add_argument("--emulate", action="store_true", help="no torch: compare with a Python model of the rules")
    args = ap.parse_args()

    if not os.access(args.driver, os.X_OK):
        print("scaler_vs_torch: driver %s is not an executable; build the scaler_stream target" % args.driver)
        return 1
    device = None
    if not args.emulate:
        try:
            import torch
        except ImportError:
            print("scaler_vs_torch: PyTorch is not installed here; run on a host with torch (or --emulate)")
            return 77
        want_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        if want_cuda and not torch.cuda.is_available():
            print("scaler_vs_torch: --device cuda but CUDA is not available")
            return 1
        device = torch.device("cuda" if want_cuda else "cpu")
        print("scaler_vs_torch: torch %s on %s" % (torch.__version__, device))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print("scaler_vs_torch: seed %d (pass --seed %d to replay)" % (seed, seed))
    rng = random.Random(seed)
    failures = 0
    skips = 0
    steps_total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.streams):
            stream = Stream(rng)
            reference = (lambda s: run_emulation(s)) if args.emulate else (lambda s: run_torch(s, device))
            want, want_params = reference(stream)
            # torch lets a collapsing scale reach 0; the C scaler refuses that, so stop the stream before.
            cut = next((j for j, r in enumerate(want) if r[0] < UNDERFLOW_GUARD), None)
            if cut is not None:
                stream.iters = stream.iters[:cut]
                want, want_params = reference(stream)
            path = os.path.join(tmp, "stream%d.txt" % i)
            with open(path, "w") as f:
                f.write(stream.text())
            got, got_params, error = run_driver(args.driver, path)
            problem = error and "driver failed: " + error
            problem = problem or first_mismatch(want, got) or params_mismatch(want_params, got_params)
            steps_total += len(want)
            skips += sum(len(r[2]) - sum(r[2]) for r in want)
            if problem:
                failures += 1
                print("MISMATCH stream %d (%s): %s" % (i, stream.describe(), problem))
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    kept = os.path.join(args.keep, "stream%d.txt" % i)
                    with open(kept, "w") as f:
                        f.write(stream.text())
                    print("  stream written to %s" % kept)
    print("scaler_vs_torch: %d of %d streams match (%d iterations, %d skipped optimizer steps)"
          % (args.streams - failures, args.streams, steps_total, skips))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
