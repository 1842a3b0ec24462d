#!/usr/bin/env bash
# sdtrain's textual-inversion step on the CPU at the demo model's size: the same step as
# torch_ti_cpu.py (this folder), through sdt-host train on the demo assets the build makes.
#   bench/ti_cpu/sdtrain_ti_cpu.sh BUILD_DIR BATCH THREADS STEPS [WARMUP] [PLUGIN]
# Prints the median, min and max ms of the timed steps (the run loop's clock around each step,
# from the loss CSV; the first WARMUP steps, default 5, left out) and the whole run's wall time.
# PLUGIN: another libsdtrain.so (e.g. a copy of the one before a change, for an A/B in one sitting).
# The trained embedding's sha256 is printed too (the same for two plugins that compute the same bits).
# sdt-host keeps OpenBLAS at one thread and runs the backend's OpenMP threads (--threads).
set -euo pipefail
build=${1:?build dir}; batch=${2:?batch}; threads=${3:?threads}; steps=${4:?steps}; warm=${5:-5}
plugin=${6:-$build/plugin/libsdtrain.so}
demo="$build/host-sim/demo"
host="$build/host-sim/sdt-host"
model="$demo/model/sdtrain-demo.safetensors"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t_start=$(date +%s.%N)
printf 'a [name] on a [filewords]\n' > "$work/template.txt"
"$host" --plugin "$plugin" create-embedding --name star --init-text "object" --vectors 1 --model "$model" --out "$work/emb" > /dev/null
"$host" --plugin "$plugin" train --embedding "$work/emb/star.safetensors" --model "$model" --dataset "$demo/dataset" \
    --template "$work/template.txt" --log-dir "$work/log" --device cpu --threads "$threads" --batch-size "$batch" \
    --width 64 --height 64 --learn-rate 0.02 --max-steps "$steps" --save-every 0 --preview-every 0 --csv-every 1 \
    --seed 1 > "$work/train.log" 2>&1 || { tail -n 5 "$work/train.log"; exit 1; }
csv=$(find "$work/log" -name textual_inversion_loss.csv | head -n 1)
sum=$(sha256sum "$work/emb/star.safetensors" | cut -c1-16)
python3 - "$csv" "$batch" "$warm" "$threads" "$t_start" "$sum" <<'PY'
import csv, statistics, sys, time
path, batch, warm, threads, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
digest = sys.argv[6]
rows = list(csv.DictReader(open(path, newline="")))
ms = [1000.0 * batch / float(r["images_per_s"]) for r in rows[warm:] if float(r["images_per_s"] or 0) > 0]
med = statistics.median(ms)
print(f"sdtrain cpu threads {threads} batch {batch}: {len(ms)} steps, ms/step median {med:.2f} min {min(ms):.2f} "
      f"max {max(ms):.2f}, {1000.0 * batch / med:.1f} img/s, last loss {float(rows[-1]['loss']):.4f}, "
      f"wall {time.time() - t0:.2f} s, embedding sha256 {digest}")
PY
