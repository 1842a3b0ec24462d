#!/usr/bin/env bash
# Trains a textual-inversion embedding on an SD 1.5-sized checkpoint (random weights, made
# here) on the GPU through sdt-host, once per precision and batch size, and reports the speed
# of each step and the run's peak GPU memory.
#   bench/ti_gpu/run.sh BUILD_DIR OUT_DIR [STEPS] [CONFIGS] [PLUGIN]
# STEPS (default 30) counts the 5 warm-up steps; CONFIGS is a list like "bf16:1 fp16:1 bf16:8 bf16:1:graph"
# (default: bf16 and fp16 at batch 1, 4, 8, 16, and bf16 at batch 1 and 8 with --cuda-graph on, the
# captured step beside the uncaptured one: docs/gpu-notes.md "What a captured step needs"); PLUGIN another libsdtrain.so (e.g. a folder
# holding bench/op_profile's module). Writes OUT_DIR/ti_gpu.json: per run the ms/step of every
# timed step (the run loop's clock around each step, which ends in reading the loss on the
# host: a device sync), their median/min/max, img/s at the median, and the log's GPU memory
# line (peak held by sdtrain, prepare's estimate, device memory in use). Needs a CUDA GPU.
set -euo pipefail
build=${1:?build dir}; out=${2:?out dir}; steps=${3:-30}
configs=${4:-"bf16:1 bf16:4 bf16:8 bf16:16 fp16:1 fp16:4 fp16:8 fp16:16 bf16:1:graph bf16:8:graph"}
plugin=${5:-$build/plugin/libsdtrain.so}
warm=5
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
"$build/models/tools/sdt-make-checkpoint" --config sd15 --dtype f16 --seed 1 --out "$work/model/sd15.safetensors" > /dev/null
"$build/host-sim/demo-tools/sdt-make-demo-dataset" "$work/data" --count 16 --size 512 > /dev/null
host="$build/host-sim/sdt-host"
runs=()
python3 "$here/bench_report.py" run-line
for cfg in $configs; do
  prec=${cfg%%:*}; rest=${cfg#*:}; bs=${rest%%:*}
  extra=(); tag=$prec
  if [ "${rest#"$bs"}" = ":graph" ]; then extra=(--cuda-graph on); tag=$prec-graph; fi
  log="$out/train_${tag}_b${bs}.log"
  # a fresh embedding per run: training writes the trained file back over its source
  "$host" --plugin "$plugin" create-embedding --name ring --init-text "ring" --vectors 1 \
      --model "$work/model/sd15.safetensors" --out "$work/emb_${tag}_${bs}" > /dev/null 2>&1
  t_start=$(date +%s.%N)
  if ! "$host" --plugin "$plugin" train --embedding "$work/emb_${tag}_${bs}/ring.safetensors" \
      --model "$work/model/sd15.safetensors" --dataset "$work/data" \
      --template "$build/host-sim/templates/subject_filewords.txt" --log-dir "$work/log_${tag}_${bs}" --device cuda \
      --precision "$prec" --batch-size "$bs" --width 512 --height 512 --max-steps "$steps" --save-every 0 \
      --preview-every 0 --csv-every 1 "${extra[@]}" > "$log" 2>&1; then
    echo "$tag b$bs failed: $(tail -n 2 "$log")"
    continue
  fi
  csv=$(find "$work/log_${tag}_${bs}" -name textual_inversion_loss.csv | head -n 1)
  cp "$csv" "$out/loss_${tag}_b${bs}.csv"
  wall=$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  json=$(python3 "$here/bench_report.py" run-stats "$csv" "$log" "$tag" "$bs" "$warm" "$wall")
  runs+=("$json")
  python3 "$here/bench_report.py" run-line "$json"
done
{
  echo '{"model": "SD 1.5 architecture, random f16 weights", "resolution": 512, "steps": '"$steps"', "runs": ['
  for i in "${!runs[@]}"; do [ "$i" -gt 0 ] && echo ','; echo "${runs[$i]}"; done
  echo ']}'
} > "$out/ti_gpu.json"
