#!/usr/bin/env bash
# The hypernetwork step against the textual-inversion step, in one run on one GPU: both trained
# through sdt-host on the same SD 1.5-sized checkpoint (random weights, made here), same data,
# precision, batch and resolution; the hypernetwork is A1111's default (modules 768, 320, 640,
# 1280; layer structure 1, 2, 1; linear). Issue 10's target: the hypernetwork step within 10% of
# the textual-inversion step.
#   bench/hn_gpu/run.sh BUILD_DIR OUT_DIR [STEPS] [CONFIGS] [DEVICE RESOLUTION MODEL_CONFIG WIDTHS [EXTRA]]
# STEPS (default 30) counts the 5 warm-up steps; CONFIGS like "bf16:1 bf16:8" (the default); the
# rest default to cuda, 512, sd15 (sdt-make-checkpoint --config, or a model's path) and
# "768,320,640,1280" (a quick check of the script: ... 8 "fp32:1" cpu 64 BUILD_DIR/host-sim/demo/model 128,64);
# EXTRA: more train options for every run, e.g. "--gradient-checkpointing" (bench/sdxl_gpu/run.sh).
# Writes OUT_DIR/hn_gpu.json (each run's bench_report.py run-stats, and per config the ratio of
# the hypernetwork's median ms/step to the embedding's) and prints a table. Needs a CUDA GPU.
set -euo pipefail
build=${1:?build dir}; out=${2:?out dir}; steps=${3:-30}
configs=${4:-"bf16:1 bf16:8"}
device=${5:-cuda}; res=${6:-512}; model_config=${7:-sd15}; widths=${8:-768,320,640,1280}
read -r -a extra <<< "${9:-}"
warm=5
report="$(cd "$(dirname "$0")/../ti_gpu" && pwd)/bench_report.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/model"
host="$build/host-sim/sdt-host"
# SDT_BENCH_PLUGIN: another libsdtrain.so (a folder holding bench/op_profile's module);
# SDT_BENCH_PROFILE_DIR: where that module writes each run's op profile (op_profile_METHOD_PREC_bN.json)
plugin_args=(); [ -n "${SDT_BENCH_PLUGIN:-}" ] && plugin_args=(--plugin "$SDT_BENCH_PLUGIN")
model="$work/model/$model_config.safetensors"
desc="$model_config architecture (sdt-make-checkpoint), random f16 weights"
if [ -e "$model_config" ]; then model=$model_config; desc=$model_config; else
  "$build/models/tools/sdt-make-checkpoint" --config "$model_config" --dtype f16 --seed 1 --out "$model" > /dev/null
fi
"$build/host-sim/demo-tools/sdt-make-demo-dataset" "$work/data" --count "${SDT_BENCH_IMAGES:-16}" --size "$res" > /dev/null
common=(--model "$model" --dataset "$work/data" --device "$device" --width "$res" --height "$res"
        --max-steps "$steps" --save-every 0 --preview-every 0 --csv-every 1 ${extra[@]+"${extra[@]}"})
printf '%-7s %-9s %-5s %10s %10s %8s %9s %7s\n' method precision batch "ms median" "min" "img/s" "peak MiB" "wall s"
entries=()
for cfg in $configs; do
  prec=${cfg%%:*}; bs=${cfg##*:}
  declare -A med=()
  for method in ti hn; do
    dir="$work/${method}_${prec}_${bs}"; log="$out/${method}_${prec}_b${bs}.log"
    mkdir -p "$dir"
    if [ "$method" = ti ]; then
      "$host" ${plugin_args[@]+"${plugin_args[@]}"} create-embedding --name ring --init-text ring --vectors 1 --model "$model" \
          --out "$dir" > /dev/null 2>&1
      args=(--embedding "$dir/ring.safetensors" --template "$build/host-sim/templates/subject_filewords.txt")
      csv_name=textual_inversion_loss.csv
    else
      "$host" ${plugin_args[@]+"${plugin_args[@]}"} create-hypernetwork --name ring --sizes "$widths" --out "$dir" > /dev/null 2>&1
      args=(--hypernetwork "$dir/ring.pt" --template "$build/host-sim/templates/hypernetwork.txt")
      csv_name=hypernetwork_loss.csv
    fi
    t_start=$(date +%s.%N)
    if ! SDT_OP_PROFILE_OUT="${SDT_BENCH_PROFILE_DIR:+$SDT_BENCH_PROFILE_DIR/op_profile_${method}_${prec}_b${bs}.json}" \
        "$host" ${plugin_args[@]+"${plugin_args[@]}"} train "${args[@]}" "${common[@]}" --precision "$prec" --batch-size "$bs" --log-dir "$dir/log" > "$log" 2>&1; then
      echo "$method $prec b$bs failed: $(tail -n 2 "$log")"; continue
    fi
    csv=$(find "$dir/log" -name "$csv_name" | head -n 1)
    cp "$csv" "$out/${method}_${prec}_b${bs}.csv"
    wall=$(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    json=$(python3 "$report" run-stats "$csv" "$log" "$prec" "$bs" "$warm" "$wall")
    med[$method]=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("ms_median", "nan"))' "$json")
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%-7s %-9s %-5d %10.2f %10.2f %8.1f %9s %7s" % (sys.argv[2], r["precision"], r["batch"], r.get("ms_median", float("nan")), r.get("ms_min", float("nan")), r.get("images_per_s", 0), r.get("peak_mib", "?"), r.get("process_wall_s", "?")))' "$json" "$method"
    entries+=("{\"method\": \"$method\", \"run\": $json}")
  done
  ratio=$(python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print("%.3f" % (b / a))' "${med[ti]:-nan}" "${med[hn]:-nan}")
  echo "$prec b$bs: hypernetwork ms/step / embedding ms/step = $ratio"
  entries+=("{\"precision\": \"$prec\", \"batch\": $bs, \"hn_over_ti\": $ratio}")
  unset med
done
{
  echo '{"model": "'"$desc"'", "resolution": '"$res"', "device": "'"$device"'", "steps": '"$steps"', "entries": ['
  for i in "${!entries[@]}"; do [ "$i" -gt 0 ] && echo ','; echo "${entries[$i]}"; done
  echo ']}'
} > "$out/hn_gpu.json"
