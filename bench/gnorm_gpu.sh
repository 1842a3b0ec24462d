#!/usr/bin/env bash
# One device call for the GroupNorm kernels (issue 32, bench/NOTES.md run 32), from the repository root with a
# prebuilt CUDA build folder (gpu_cuda_ops and gnorm_cuda built): the GroupNorm GPU checks against the CPU
# (NCHW and channels-last, f32/f16/bf16, with and without SiLU, the SD 1.5 and SDXL levels, replayed bit for
# bit), then bench/gnorm_cuda (old vs new module in one process) for bf16, f16 and f32. JSON and logs go to OUT.
#   bash bench/gnorm_gpu.sh [BUILD (build-cuda)] [BASE_MODULE.so (BUILD/base-plugin/libsdtrain_cuda.so, else
#        the new module alone)] [OUT ($OUT)] [DTYPES ("bf16 f16 f32"; ~1 min each, f32 the longest)]
# BASE_MODULE: main's libsdtrain_cuda.so from before the merge (the old kernels), e.g. a copy of
# /work/main/build/plugin/libsdtrain_cuda.so. BUILD/device-libs, when there, joins LD_LIBRARY_PATH (the CPU
# reference's OpenBLAS on a bare device; bench/ti_gpu/pack_device.sh makes it).
set -uo pipefail
build=${1:-build-cuda}
base=${2:-$build/base-plugin/libsdtrain_cuda.so}
out=${3:-${OUT:?give OUT as the third argument or the environment}}
dtypes=${4:-bf16 f16 f32}
[ -f "$base" ] || { echo "no base module at $base: timing the new module alone"; base=-; }
mkdir -p "$out"
[ -d "$build/device-libs" ] && export LD_LIBRARY_PATH="$build/device-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
echo "== [$(elapsed) s] gpu_cuda_ops groupnorm"
SDT_TEST_SEED=20261207 timeout 240 "$build/tests/gpu/gpu_cuda_ops" groupnorm > "$out/gnorm_tests.log" 2>&1
echo "gpu_cuda_ops groupnorm rc=$?"
grep -iE "fail|differ|error" "$out/gnorm_tests.log" | head -n 20
tail -n 3 "$out/gnorm_tests.log"
for dt in $dtypes; do
    echo "== [$(elapsed) s] gnorm_cuda $dt"
    timeout 200 "$build/bench/gnorm_cuda/gnorm_cuda" "$out/gnorm_cuda-$dt.json" "$base" \
        "$build/plugin/libsdtrain_cuda.so" "$dt" 2>&1 | tee "$out/gnorm_cuda-$dt.txt"
    echo "gnorm_cuda $dt rc=${PIPESTATUS[0]}"
done
echo "== [$(elapsed) s] done"
