#!/usr/bin/env bash
# PyTorch's SD3.5/Flux embedding step (pytorch_transformer_ti_baseline.py) on a GPU host, from a carried folder.
#   bash bench/transformer_ti/device_run.sh [CARRY_DIR] [baseline options...]
# CARRY_DIR (default .carry/transformer_ti) holds diffusers/ (src/diffusers of huggingface/diffusers, see
# fetch_sources.md) and, only where the host's Python has no transformers, transformers/ (its src/transformers).
# Options go to the baseline unchanged; the default is every model, batch 1, without and with checkpointing.
# Writes $OUT/transformer_ti.json and $OUT/transformer_ti.log ($OUT: the device call's output folder; else ./out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
carry=${1:-.carry/transformer_ti}
[ $# -gt 0 ] && shift
out=${OUT:-out}
mkdir -p "$out"
carry=$(cd "$carry" 2>/dev/null && pwd) || { echo "device_run.sh: no folder '${1:-.carry/transformer_ti}': prepare it as fetch_sources.md says" >&2; exit 2; }
[ -d "$carry/diffusers" ] || { echo "device_run.sh: $carry has no diffusers/ (fetch_sources.md step 1)" >&2; exit 2; }
path=$carry
if ! python3 -c "import transformers" 2>/dev/null; then
  [ -d "$carry/transformers" ] || { echo "device_run.sh: this Python has no transformers and $carry has no transformers/ (fetch_sources.md step 2)" >&2; exit 2; }
fi
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--models sd35m,sd35l,flux-dev --batches 1 --checkpointing both)
# the card (the baseline's first line gives torch, diffusers and transformers versions)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -n 4 \
    | tee "$out/transformer_ti.log"
PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" python3 "$here/pytorch_transformer_ti_baseline.py" "${args[@]}" \
    --json "$out/transformer_ti.json" 2>&1 | tee -a "$out/transformer_ti.log" | grep -v "^\[" | tail -n 40
rc=${PIPESTATUS[0]}
echo "device_run.sh: exit $rc; $out/transformer_ti.json"
exit "$rc"
