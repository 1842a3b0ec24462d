#!/usr/bin/env bash
# SDXL's embedding and hypernetwork steps (issue 16's speed section) in one device call: sdtrain
# through bench/hn_gpu/run.sh on a full-size random SDXL checkpoint (sdt-make-checkpoint --config
# sdxl, f16 file, trained in bf16) at 1024x1024, batch 1 and 4, without and with gradient
# checkpointing; then PyTorch's same steps (shared/bench/pytorch_sdxl_baseline.py: diffusers'
# UNet, transformers' two encoders) in the same sitting.
#   bench/sdxl_gpu/run.sh BUILD_DIR OUT_DIR [TORCH_SCRIPT DIFFUSERS_SRC] [STEPS] [BATCHES] [MODES] [MODEL]
# STEPS (default 12) counts bench/hn_gpu's 5 warm-up steps; BATCHES default "1 4"; MODES "plain
# checkpointing" (either or both; "none": PyTorch only); MODEL an SDXL checkpoint already made (kept;
# one made here, ~2 minutes, is removed at the end). Writes
# OUT_DIR/plain/hn_gpu.json, OUT_DIR/checkpointing/hn_gpu.json and OUT_DIR/torch.json.
set -uo pipefail
build=${1:?build dir}; out=${2:?out dir}; torch_script=${3:-}; diffusers=${4:-}; steps=${5:-12}
batches=${6:-"1 4"}; modes=${7:-"plain checkpointing"}; given_model=${8:-}
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)
mkdir -p "$out"
configs=""; for b in $batches; do configs+="bf16:$b "; done
export SDT_BENCH_IMAGES=8
if [ "$modes" != none ]; then
  model=$given_model
  if [ -z "$model" ]; then
    model=$(mktemp -d)/sdxl.safetensors
    echo "== [$(( $(date +%s) - t0 )) s] a random SDXL checkpoint"
    "$build/models/tools/sdt-make-checkpoint" --config sdxl --dtype f16 --seed 1 --out "$model" > /dev/null || exit 1
  fi
  ls -la "$model"
  for mode in $modes; do
    echo "== [$(( $(date +%s) - t0 )) s] sdtrain, $mode"
    flag=""; [ "$mode" = checkpointing ] && flag=--gradient-checkpointing
    bash "$here/../hn_gpu/run.sh" "$build" "$out/$mode" "$steps" "$configs" cuda 1024 "$model" 2048,640,1280 $flag
  done
  [ -n "$given_model" ] || rm -f "$model"
fi
if [ -n "$torch_script" ]; then
  list=$(echo $batches | tr ' ' ',')
  echo "== [$(( $(date +%s) - t0 )) s] PyTorch eager, without and with checkpointing"
  PYTHONPATH="$diffusers:$(dirname "$torch_script")${PYTHONPATH:+:$PYTHONPATH}" python3 "$torch_script" --batches "$list" \
      --checkpointing --out "$out/torch.json" 2>&1 | grep -v "^\[" | tail -n 12
fi
echo "== [$(( $(date +%s) - t0 )) s] done"
