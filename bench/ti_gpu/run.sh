#!/usr/bin/env bash
# Trains a textual-inversion embedding on an SD 1.5-sized checkpoint (random weights, made
# here) on the GPU through sdt-host, in each precision, and reports the training speed.
#   bench/ti_gpu/run.sh BUILD_DIR TOKENIZER_DIR OUT_DIR [STEPS]
# Prints a table and writes OUT_DIR/ti_gpu.json. Needs a CUDA GPU; the tokenizer is CLIP's
# vocab.json + merges.txt (not shipped with sdtrain).
set -euo pipefail
build=${1:?build dir}; tok=${2:?tokenizer dir}; out=${3:?out dir}; steps=${4:-30}
work=$(mktemp -d)
mkdir -p "$out" "$work/model/tokenizer"
cp "$tok/vocab.json" "$tok/merges.txt" "$work/model/tokenizer/"
"$build/models/tools/sdt-make-checkpoint" --config sd15 --dtype f16 --seed 1 --out "$work/model/sd15.safetensors" > /dev/null
"$build/host-sim/demo-tools/sdt-make-demo-dataset" "$work/data" --count 8 --size 512 > /dev/null
host="$build/host-sim/sdt-host"
echo '{"runs": [' > "$out/ti_gpu.json"
printf '%-6s %-5s %10s %10s %10s\n' precision batch "img/s" "ms/step" "total s"
first=1
for cfg in "bf16 1" "fp16 1" "fp32 1" "bf16 4" "bf16 8"; do
  set -- $cfg
  prec=$1; bs=$2
  log="$out/train_${prec}_b${bs}.log"
  # a fresh embedding per run: training writes the trained file back over its source
  "$host" create-embedding --name ring --init-text "ring" --vectors 1 --model "$work/model/sd15.safetensors" \
      --out "$work/emb_${prec}_${bs}" > /dev/null
  t0=$(date +%s.%N)
  "$host" train --embedding "$work/emb_${prec}_${bs}/ring.safetensors" --model "$work/model/sd15.safetensors" --dataset "$work/data" \
      --template "$build/host-sim/templates/subject_filewords.txt" --log-dir "$work/log_${prec}_${bs}" --device cuda \
      --precision "$prec" --batch-size "$bs" --width 512 --height 512 --max-steps "$steps" --save-every 0 \
      --preview-every 0 --csv-every 1 > "$log" 2>&1 || { echo "$prec b$bs failed: $(tail -n 2 "$log")"; continue; }
  t1=$(date +%s.%N)
  ips=$(grep -o '[0-9.]* img/s' "$log" | tail -n 1 | cut -d' ' -f1)
  ms=$(awk -v i="$ips" -v b="$bs" 'BEGIN { if (i > 0) printf "%.1f", 1000 * b / i; else print "nan" }')
  total=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  printf '%-9s %-5s %10s %10s %10s\n' "$prec" "$bs" "$ips" "$ms" "$total"
  [ $first -eq 1 ] || echo ',' >> "$out/ti_gpu.json"
  first=0
  printf '{"precision": "%s", "batch": %s, "images_per_s": %s, "ms_per_step": %s, "wall_s": %s, "steps": %s}' \
      "$prec" "$bs" "${ips:-0}" "$ms" "$total" "$steps" >> "$out/ti_gpu.json"
done
echo '], "model": "SD 1.5 architecture, random f16 weights", "resolution": 512}' >> "$out/ti_gpu.json"
rm -rf "$work"
