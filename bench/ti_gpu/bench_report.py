#!/usr/bin/env python3
"""Numbers and tables of the one-run GPU benchmark (bench/ti_gpu/one_run.sh).

  bench_report.py run-stats CSV LOG PRECISION BATCH WARMUP [WALL_S]   one sdtrain run -> JSON on stdout
  bench_report.py run-line [JSON]                             a table line (no JSON: the header)
  bench_report.py merge OUT_JSON TORCH_JSON...                 PyTorch result files as one
  bench_report.py compare OUT_DIR SDTRAIN_JSON TORCH_MAIN_JSON [TORCH_COMPILE_JSON] [OP_PROFILE_JSON...]
      -> OUT_DIR/bench.json and OUT_DIR/bench.md: sdtrain against PyTorch eager and torch.compile
         at each precision and batch, with TFLOP/s against the bf16 matmul peak measured in the
         same run (PyTorch's FLOP count of the same step), peak memory and the ratios.

sdtrain's ms/step is the run loop's host clock around each step; every step ends by reading the
loss on the host (a device sync), so it is the time of one synchronised step, as PyTorch's CUDA
events around each synchronised step are. Standard library only.
"""
import csv
import json
import os
import re
import statistics
import sys

MEM_LINE = re.compile(
    r"GPU memory: peak (\d+) MiB held by sdtrain during the run; prepare estimated (\d+) MiB \(([-+0-9.]+)%\)\. "
    r"(?:At the end the kernels' scratch held (\d+) MiB, (\d+) MiB of it cuDNN's convolution workspace\. )?"
    r"The device had (\d+) MiB in use when the run started and (\d+) MiB at its end, of (\d+) MiB")
TI_GFLOP_PER_IMAGE = 1748.6   # PyTorch's FlopCounterMode count of this step (used when no PyTorch run gives one)
TORCH_EAGER = {"bf16": "b:bf16w+ac-bf16", "fp16": "a:fp16w+ac16+GS"}
TORCH_COMPILE = {"bf16": "d:b+compile"}


def run_stats(csv_path, log_path, precision, batch, warm, wall_s=None):
    batch, warm = int(batch), int(warm)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    ms = [1000.0 * batch / float(r["images_per_s"]) for r in rows[warm:] if float(r["images_per_s"] or 0) > 0]
    out = dict(precision=precision, batch=batch, warmup_steps=warm, timed_steps=len(ms))
    if wall_s is not None:
        out["process_wall_s"] = float(wall_s)   # the whole sdt-host train: loading, preparing, steps, saves
    if ms:
        med = statistics.median(ms)
        out.update(ms_median=med, ms_min=min(ms), ms_max=max(ms), images_per_s=1000.0 * batch / med,
                   ms_all=[round(x, 3) for x in ms])
    with open(log_path, errors="replace") as f:
        m = None
        for line in f:
            m = MEM_LINE.search(line) or m
    if m:
        out.update(peak_mib=int(m.group(1)), estimate_mib=int(m.group(2)), estimate_error_pct=float(m.group(3)),
                   device_used_mib_start=int(m.group(6)), device_used_mib_end=int(m.group(7)),
                   device_total_mib=int(m.group(8)))
        if m.group(4) is not None:
            out.update(scratch_mib=int(m.group(4)), conv_workspace_mib=int(m.group(5)))
    return out


def run_line(r=None):
    if r is None:
        return "%-9s %-5s %10s %10s %10s %8s %10s %12s %8s" % ("precision", "batch", "ms median", "min", "max", "img/s",
                                                                "peak MiB", "estimate MiB", "wall s")
    return "%-9s %-5d %10.2f %10.2f %10.2f %8.1f %10s %12s %8s" % (
        r["precision"], r["batch"], r.get("ms_median", float("nan")), r.get("ms_min", float("nan")),
        r.get("ms_max", float("nan")), r.get("images_per_s", 0.0), r.get("peak_mib", "?"), r.get("estimate_mib", "?"),
        r.get("process_wall_s", "?"))


def load(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def fmt(x, spec="%.1f"):
    return "—" if x is None else spec % x


def compare(out_dir, sdt_path, main_path, compile_path=None, profiles=()):
    sdt, main, comp = load(sdt_path), load(main_path), load(compile_path)
    torch_runs = main.get("configs", []) + comp.get("configs", [])
    readings = main.get("matmul_peaks") or [main.get("matmul_peak"), main.get("matmul_peak_end")]
    peaks = [p["tflops_median"] for p in readings + [comp.get("matmul_peak")] if p]
    peak = max(peaks) if peaks else None

    def torch_run(mode, batch):
        for r in torch_runs:
            if r.get("mode") == mode and r.get("kind") == "ti" and r.get("B") == batch:
                return r
        return None

    rows = []
    for r in sdt.get("runs", []):
        prec, b = r["precision"], r["batch"]
        eager = torch_run(TORCH_EAGER.get(prec), b)
        compiled = torch_run(TORCH_COMPILE.get(prec), b)
        gflop = next((t["gflop_step"] for t in (eager, compiled) if t), TI_GFLOP_PER_IMAGE * b)
        med = r.get("ms_median")
        tflops = gflop / med if med else None   # GFLOP / ms = TFLOP/s
        row = dict(precision=prec, batch=b, sdtrain=r, gflop_step=gflop, tflops=tflops,
                   pct_matmul_peak=100.0 * tflops / peak if tflops and peak else None,
                   torch_eager=eager and {k: eager[k] for k in ("ms_median", "ms_min", "ms_max", "images_per_s",
                                                               "peak_gib", "tflops", "pct_peak")},
                   torch_compile=compiled and {k: compiled[k] for k in ("ms_median", "ms_min", "ms_max", "images_per_s",
                                                                       "peak_gib", "tflops", "pct_peak", "compile_s")},
                   speedup_vs_eager=eager["ms_median"] / med if eager and med else None,
                   speedup_vs_compile=compiled["ms_median"] / med if compiled and med else None,
                   memory_vs_eager=(r["peak_mib"] / 1024.0) / eager["peak_gib"] if eager and "peak_mib" in r else None)
        rows.append(row)
    env = main.get("env") or comp.get("env") or {}
    result = dict(matmul_peak_tflops=peak, matmul_peaks=peaks, torch_env=env, rows=rows,
                  op_profiles=[load(p) | {"file": os.path.basename(p)} for p in profiles])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [
        "| precision | batch | sdtrain ms/step med (min-max) | img/s | peak GiB (estimate) | TFLOP/s (% of matmul peak) "
        "| eager ms (img/s, GiB) | compile ms (img/s, GiB) | x eager | x compile |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s, e, c = row["sdtrain"], row["torch_eager"], row["torch_compile"]
        peak_gib = s.get("peak_mib", 0) / 1024.0
        est = s.get("estimate_mib")
        lines.append("| %s | %d | %s (%s-%s) | %s | %.2f (%s) | %s (%s%%) | %s | %s | %s | %s |" % (
            row["precision"], row["batch"], fmt(s.get("ms_median")), fmt(s.get("ms_min")), fmt(s.get("ms_max")),
            fmt(s.get("images_per_s")), peak_gib, fmt(est / 1024.0 if est else None, "%.2f"), fmt(row["tflops"]),
            fmt(row["pct_matmul_peak"]),
            "%.1f (%.1f, %.2f)" % (e["ms_median"], e["images_per_s"], e["peak_gib"]) if e else "—",
            "%.1f (%.1f, %.2f)" % (c["ms_median"], c["images_per_s"], c["peak_gib"]) if c else "—",
            fmt(row["speedup_vs_eager"], "%.2f"), fmt(row["speedup_vs_compile"], "%.2f")))
    lines.append("")
    lines.append("bf16 matmul peak measured in this run (8192^3, median of 10): %s TFLOP/s; readings %s" % (
        fmt(peak), ", ".join("%.1f" % p for p in peaks)))
    if env:
        lines.append("PyTorch: torch %s, cuDNN %s, GPU %s" % (env.get("torch"), env.get("cudnn"), env.get("gpu")))
    for p in result["op_profiles"]:
        if not p.get("ops"):
            continue
        lines.append("")
        lines.append("op profile %s: %.1f ms wall, %.1f ms inside ops on the GPU" % (p["file"], p["wall_ms"], p["gpu_ms"]))
        lines.append("")
        lines.append("| op | GPU ms | share | calls |")
        lines.append("|---|---|---|---|")
        for o in p["ops"][:16]:
            lines.append("| %s | %.1f | %.1f%% | %d |" % (o["op"], o["ms"], 100.0 * o["ms"] / p["gpu_ms"], o["calls"]))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "bench.md"), "w") as f:
        f.write(text)
    print(text)


def merge(out_path, *parts):
    """PyTorch result files of separate runs of the script as one (configs concatenated, the
    matmul peak readings of all of them kept)."""
    merged = dict(configs=[], matmul_peaks=[])
    for p in parts:
        r = load(p)
        merged["configs"] += r.get("configs", [])
        for key in ("matmul_peak", "matmul_peak_end"):
            if r.get(key):
                merged["matmul_peaks"].append(r[key])
        merged.setdefault("env", r.get("env"))
    if merged["matmul_peaks"]:
        merged["matmul_peak"] = max(merged["matmul_peaks"], key=lambda m: m["tflops_median"])
    with open(out_path, "w") as f:
        json.dump(merged, f, indent=1)


def main(argv):
    if len(argv) >= 2 and argv[1] == "run-stats" and len(argv) in (7, 8):
        print(json.dumps(run_stats(*argv[2:])))
    elif len(argv) >= 2 and argv[1] == "run-line":
        print(run_line(json.loads(argv[2]) if len(argv) > 2 else None))
    elif len(argv) >= 3 and argv[1] == "merge":
        merge(argv[2], *argv[3:])
    elif len(argv) >= 5 and argv[1] == "compare":
        compare(argv[2], argv[3], argv[4], argv[5] if len(argv) > 5 else None, argv[6:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
