#!/usr/bin/env bash
# One device call for a kernel change (issue 32, session 23): unpacks a pack_device.sh tarball made
# here (the worktree and its CUDA build, absolute paths kept), runs the GPU op tests, bench/ab_cuda
# (base module vs change module in one process), then the whole training step on base and change
# (bench/hn_gpu/run.sh through SDT_BENCH_PLUGIN: BUILD/base-plugin holds libsdtrain.so with the base
# module) while the time allows.
#   bash gpu_call.sh PACK.tar.xz WORKTREE BUILD OUT [SECONDS] [STEPS]
set -uo pipefail
pack=${1:?pack}; tree=${2:?worktree}; build=${3:?build dir}; out=${4:?out}; budget=${5:-400}; steps=${6:-14}
t0=$(date +%s); elapsed() { echo $(( $(date +%s) - t0 )); }
mkdir -p "$out"
tar -xJf "$pack" -C / || exit 1
export LD_LIBRARY_PATH="$build/device-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
echo "== [$(elapsed) s] gpu_cuda_ops"
SDT_TEST_SEED=20261207 timeout 170 "$build/tests/gpu/gpu_cuda_ops" > "$out/test_cuda_ops.log" 2>&1; echo "gpu_cuda_ops rc=$?"
grep -iE "fail|passed|checks|error" "$out/test_cuda_ops.log" | head -n 20; tail -n 3 "$out/test_cuda_ops.log"
echo "== [$(elapsed) s] ab_cuda (deterministic backend)"
timeout 100 "$build/bench/ab_cuda/ab_cuda" "$out/ab_cuda.json" "$build/base-plugin/libsdtrain_cuda.so" "$build/plugin/libsdtrain_cuda.so" 2>&1
[ "$(elapsed)" -lt $(( budget - 250 )) ] && echo "== [$(elapsed) s] ab_cuda (nondeterministic: cuDNN's attention backward)" &&
timeout 100 "$build/bench/ab_cuda/ab_cuda" "$out/ab_cuda_nondet.json" "$build/base-plugin/libsdtrain_cuda.so" "$build/plugin/libsdtrain_cuda.so" \
  nondeterministic 2>&1 | grep -E "cross|op "
run_step() { # LABEL PLUGIN_DIR CONFIG RES MODEL WIDTHS
  local label=$1 plug=$2
  echo "== [$(elapsed) s] step $label"
  SDT_BENCH_IMAGES=8 SDT_BENCH_PLUGIN=$plug bash "$tree/bench/hn_gpu/run.sh" "$build" "$out/step-$label" "$steps" "$3" cuda "$4" "$5" "$6" \
    2>&1 | grep -E "^ti |^hn |^method|failed" | head -n 4
}
sd_model=/tmp/sd15.safetensors
"$build/models/tools/sdt-make-checkpoint" --config sd15 --dtype f16 --seed 1 --out "$sd_model" > /dev/null 2>&1
for label in sd15-change sd15-base; do
  [ "$(elapsed)" -lt $(( budget - 45 )) ] || { echo "skip $label: time"; continue; }
  plug="$build/plugin/libsdtrain.so"; [ "${label#*-}" = base ] && plug="$build/base-plugin/libsdtrain.so"
  run_step "$label" "$plug" "bf16:8" 512 "$sd_model" 768,320,640,1280
done
xl_model=/tmp/sdxl.safetensors
[ "$(elapsed)" -lt $(( budget - 200 )) ] || { echo "skip SDXL: time"; xl_skip=1; }
[ -n "${xl_skip:-}" ] || echo "== [$(elapsed) s] SDXL checkpoint"
[ -n "${xl_skip:-}" ] || "$build/models/tools/sdt-make-checkpoint" --config sdxl --dtype f16 --seed 1 --out "$xl_model" > /dev/null 2>&1
for label in sdxl-change sdxl-base; do
  [ -z "${xl_skip:-}" ] && [ "$(elapsed)" -lt $(( budget - 60 )) ] || { echo "skip $label: time"; continue; }
  plug="$build/plugin/libsdtrain.so"; [ "${label#*-}" = base ] && plug="$build/base-plugin/libsdtrain.so"
  run_step "$label" "$plug" "bf16:4" 1024 "$xl_model" 2048,640,1280
done
rm -f "$xl_model"
for d in "$out"/step-*; do [ -f "$d/hn_gpu.json" ] && cp "$d/hn_gpu.json" "$out/$(basename "$d").json"; done
rm -rf "$out"/step-*
echo "== [$(elapsed) s] done"
