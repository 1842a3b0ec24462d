#!/usr/bin/env bash
# Issue 10's benchmark in one run on one GPU: the GPU tests, sdtrain's textual-inversion step
# (bench/ti_gpu/run.sh) at bf16 and fp16, batch 1/4/8/16, PyTorch's same step (torch.compile bf16,
# then eager bf16), the per-op GPU time of a few sdtrain runs (bench/op_profile), eager fp16 +
# GradScaler, each while the budget allows; then one table and JSON (bench_report.py compare).
#   bench/ti_gpu/one_run.sh BUILD_DIR OUT_DIR TORCH_SCRIPT DIFFUSERS_SRC [SECONDS]
# TORCH_SCRIPT: shared/bench/pytorch_ti_baseline.py ("-": sdtrain only); DIFFUSERS_SRC: a folder holding diffusers'
# src/diffusers (pipelines/ and modular_pipelines/ removed), put on PYTHONPATH. SECONDS (default
# 560) is the whole run's budget: torch.compile batch sizes that would not fit are skipped (and
# said; eager and the op profiles stop at it too). Every step's output goes to OUT_DIR; the table is
# printed last. SDT_BENCH_CONFIGS and SDT_BENCH_PROFILE change the sdtrain configurations
# ("bf16:8 fp16:1 ...") of the main runs and of the op profiles, SDT_BENCH_COMPILE the
# torch.compile batch sizes (in order).
set -uo pipefail
build=${1:?build dir}; out=${2:?out dir}; torch_script=${3:?pytorch_ti_baseline.py}; diffusers=${4:?diffusers src}
budget=${5:-560}
configs=${SDT_BENCH_CONFIGS:-"bf16:1 bf16:4 bf16:8 bf16:16 fp16:1 fp16:4 fp16:8 fp16:16"}
profile_configs=${SDT_BENCH_PROFILE:-"bf16:1 bf16:8"}
compile_batches=${SDT_BENCH_COMPILE:-8,16,1,4}
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv | tee "$out/gpu.txt"
export SDT_TEST_SEED=${SDT_TEST_SEED:-20261126}

echo "== [$(elapsed) s] GPU tests"
ctest --test-dir "$build" -R '^(gpu_cuda_ops|gpu_hn|e2e_cuda_vs_cpu|cuda_module_exports)$' --output-on-failure \
    > "$out/tests.log" 2>&1
grep -E "tests passed|tests failed|Failed|Passed|\*\*\*" "$out/tests.log" | tail -n 8
grep -h "cpu vs cuda embedding\|checks passed\|FAIL" "$build"/Testing/Temporary/LastTest.log 2>/dev/null | head -n 5

echo "== [$(elapsed) s] sdtrain"
bash "$here/run.sh" "$build" "$out/sdtrain" 30 "$configs"

prof=$(mktemp -d)
cp -L "$build/plugin/libsdtrain.so" "$prof/libsdtrain.so"
cp "$build/plugin/libsdtrain_cuda.so" "$prof/libsdtrain_cuda_real.so"
cp "$build/bench/op_profile/libsdtrain_cuda_op_profile.so" "$prof/libsdtrain_cuda.so"
profiles() { # the op profiles, while the budget allows
  for cfg in $profile_configs; do
    [ $(( budget - $(elapsed) )) -gt 45 ] || { echo "no time left for the op profile of $cfg"; break; }
    echo "== [$(elapsed) s] sdtrain op profile $cfg"
    SDT_OP_PROFILE_OUT="$out/op_profile_${cfg/:/_b}.json" bash "$here/run.sh" "$build" "$out/profile_${cfg/:/_b}" 15 "$cfg" \
        "$prof/libsdtrain.so" > /dev/null
    grep -A 14 "op profile:" "$out/profile_${cfg/:/_b}/train_${cfg%%:*}_b${cfg##*:}.log" || echo "no op profile for $cfg"
  done
}

if [ "$torch_script" = - ]; then
  profiles
else
  export PYTHONPATH="$diffusers${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  # torch.compile first (batch 8, the issue's yardstick; further batch sizes while they fit), then
  # eager bf16, the op profiles and eager fp16 + GradScaler; each part stops at the run's budget
  left=$(( budget - $(elapsed) - 20 ))
  echo "== [$(elapsed) s] torch.compile (${left} s left)"
  timeout "$left" python3 "$torch_script" --part compile --batches "$compile_batches" --budget-s "$(( left - 40 ))" \
      --out "$out/torch_compile.json" > "$out/torch_compile.log" 2>&1
  grep -E "compile \+ first|B=[0-9]+: median|skip" "$out/torch_compile.log" | cut -c1-160
  for mode in b profiles a; do
    if [ "$mode" = profiles ]; then profiles; continue; fi
    left=$(( budget - $(elapsed) - 20 ))
    echo "== [$(elapsed) s] PyTorch eager, mode $mode (${left} s left)"
    [ "$left" -gt 30 ] || break
    timeout "$left" python3 "$torch_script" --part main --modes "$mode" --batches 1,4,8,16 --hn-batches "" \
        --out "$out/torch_main_$mode.json" > "$out/torch_main_$mode.log" 2>&1
    grep -E "B=[0-9]+: median|FAILED|peak:" "$out/torch_main_$mode.log" | cut -c1-160
  done
  python3 "$here/bench_report.py" merge "$out/torch_main.json" "$out/torch_main_b.json" "$out/torch_main_a.json"
fi

echo "== [$(elapsed) s] report"
python3 "$here/bench_report.py" compare "$out" "$out/sdtrain/ti_gpu.json" "$out/torch_main.json" "$out/torch_compile.json" \
    "$out"/op_profile_*.json
