#!/usr/bin/env bash
# The CUDA module on the GPUs users have, checked on a GPU host newer than sm_80 (H100/H200: sm_90):
#   1. the op tests (gpu_cuda_ops) pass with a module built for 75-virtual only: its sm_75 PTX is
#      JIT-compiled for this card, so the code a T4 or an RTX 20xx runs is what is checked (a skip
#      counts as a failure here);
#   2. a module built for 80-real only (no PTX) is refused by the capability check at open:
#      `sdt-host train --device auto` says why and trains on the CPU; `--device cuda` is an error
#      naming the card, the module's architectures and the fix.
#
#   tests/gpu/arch_checks.sh MAIN_BUILD MODULE_75_PTX MODULE_80_REAL
#
# MAIN_BUILD: an ordinary build folder (sdt-host, demo assets, tests/gpu/gpu_cuda_ops).
# MODULE_75_PTX / MODULE_80_REAL: libsdtrain_cuda.so of build folders configured with
#   -DCMAKE_CUDA_ARCHITECTURES=75-virtual and -DCMAKE_CUDA_ARCHITECTURES=80-real (only the target
#   sdtrain_cuda is needed: cmake --build B --target sdtrain_cuda). SDT_TEST_SEED fixes the seed.
# Prints one line per check and exits non-zero when any fails. The host needs the run-time
# libraries of the plugin (GLib, cJSON, libwebp) on LD_LIBRARY_PATH.
set -u
build=${1:?MAIN_BUILD}
mod75=${2:?MODULE_75_PTX}
mod80=${3:?MODULE_80_REAL}
host=$build/host-sim/sdt-host
demo=$build/host-sim/demo
seed=${SDT_TEST_SEED:-20261126}
echo "seed $seed"
status=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; status=1; }

for f in "$host" "$build/tests/gpu/gpu_cuda_ops" "$mod75" "$mod80"; do
    [ -e "$f" ] || { echo "FAIL: $f is missing"; exit 1; }
done
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
echo "card: ${name:-unknown} (compute capability ${cap:-unknown})"
[ -n "$cap" ] || { echo "FAIL: no GPU visible (nvidia-smi)"; exit 1; }

# 1. the sm_75 PTX module runs every op test on this card.
work=$(mktemp -d "${TMPDIR:-/tmp}/sdt-arch.XXXXXX")
SDT_CUDA_MODULE=$mod75 SDT_TEST_SEED=$seed "$build/tests/gpu/gpu_cuda_ops" >"$work/ops75.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    pass "gpu_cuda_ops with the 75-virtual module: $(tail -n 1 "$work/ops75.log")"
else
    fail "gpu_cuda_ops with the 75-virtual module: rc $rc (77 = skipped: the module did not open): $(tail -n 3 "$work/ops75.log")"
fi

# 2. the 80-real module is refused on any card that is not sm_80.
if [ "$cap" = "8.0" ]; then
    echo "SKIP: this card is sm_80, which the 80-real module has code for; run check 2 on another card"
else
    cd "$work" || exit 1
    # The plugin opens the CUDA module beside itself: a plugin folder whose module is the 80-real one.
    mkdir -p plugin80
    cp -L "$build/plugin/libsdtrain.so" plugin80/libsdtrain.so
    cp -L "$mod80" plugin80/libsdtrain_cuda.so
    "$host" create-embedding --name archcheck --init-text photo --vectors 1 --model "$demo/model" --out emb \
        >/dev/null 2>&1 || fail "create-embedding on the demo model"
    train80() { # device log-dir: a fresh copy of the embedding per run (training writes the file it is given)
        mkdir -p "run-$1" && cp emb/archcheck.safetensors "run-$1/"
        SDTRAIN_PLUGIN=$PWD/plugin80/libsdtrain.so "$host" train --embedding "run-$1/archcheck.safetensors" \
            --dataset "$demo/dataset" --model "$demo/model" --width 64 --height 64 --max-steps 2 --save-every 0 \
            --preview-every 0 --seed "$seed" --device "$1" --log-dir "log-$1" >"$1.out" 2>"$1.err"
    }
    train80 auto
    rc=$?
    if [ $rc -eq 0 ] && grep -q "no code for this GPU" auto.out auto.err && grep -q "80-real" auto.out auto.err; then
        pass "--device auto with the 80-real module: $(grep -h "no code for this GPU" auto.out auto.err | head -n 1)"
    else
        fail "--device auto with the 80-real module: rc $rc; $(tail -n 3 auto.err)"
    fi
    train80 cuda
    rc=$?
    if [ $rc -eq 1 ] && grep -q "no code for this GPU" cuda.err && grep -q "CMAKE_CUDA_ARCHITECTURES" cuda.err; then
        pass "--device cuda with the 80-real module is an error: $(head -n 1 cuda.err)"
    else
        fail "--device cuda with the 80-real module: rc $rc (expected 1); $(tail -n 3 cuda.err)"
    fi
    cd - >/dev/null || exit 1
fi
[ $status -eq 0 ] && rm -rf "$work" || echo "work folder kept: $work"
exit $status
