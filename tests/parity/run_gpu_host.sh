#!/usr/bin/env bash
# Runs every PyTorch parity check and the GPU op test on a GPU host with torch,
# transformers and safetensors, from a build made elsewhere (carried with the tree).
#   tests/parity/run_gpu_host.sh BUILD_DIR LOG_DIR [TOKENIZER_DIR] [DIFFUSERS_SRC]
# DIFFUSERS_SRC: a diffusers src/ folder, for a host where diffusers is not installed (the check that
# diffusers opens the folders sdtrain writes runs when diffusers is importable either way).
# Each check's full output goes to LOG_DIR/<name>.log; a summary line per check to stdout.
set -u
build=${1:?build dir}
logs=${2:?log dir}
tok=${3:-}
diffusers_src=${4:-}
mkdir -p "$logs"
here=$(cd "$(dirname "$0")" && pwd)
status=0
run() {
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  printf '%-22s rc=%-3s %4ss  %s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -n 1 "$logs/$name.log")"
  [ $rc -eq 0 ] || status=1
}
export PYTHONUNBUFFERED=1
run cuda_ops env SDT_CUDA_MODULE="$build/plugin/libsdtrain_cuda.so" "$build/tests/gpu/gpu_cuda_ops"
run scaler_vs_torch python3 "$here/scaler_vs_torch.py" --driver "$build/tests/parity/scaler_stream" --streams 300
if [ -n "$tok" ]; then
  run tokenizer_vs_hf python3 "$here/tokenizer_vs_hf.py" --tokenizer "$tok" --cli "$build/tests/parity/tokenize_cli" \
      --n 400 --reference hf --notes "$logs/tokenizer_notes.md"
fi
run unet_parity python3 "$here/unet_parity.py" --cli "$build/tests/parity/sdt-unet-cli" --sizes tiny,tiny-linear,tiny-sdxl,sd15,sd2 \
    --notes "$logs/unet_notes.md"
run hn_step_parity python3 "$here/../hn/hn_step_parity.py" --cli "$build/tests/hn/hn_step_cli" \
    --sizes tiny,tiny-linear,sd15 --sd-latent 32
run clip_vae_parity python3 "$here/clip_vae_parity.py" --build "$build" --sizes tiny,sd15,sd2 --record "$logs/clip_vae_notes.md"
if PYTHONPATH="${diffusers_src}${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import diffusers" 2> /dev/null; then
  "$build/models/tools/sdt-make-checkpoint" --config sd15 --layout diffusers --dtype f16 --seed 2 \
      --out "$logs/sd15-diffusers" > /dev/null
  run diffusers_opens python3 "$here/diffusers_opens_folder.py" ${diffusers_src:+--diffusers-src "$diffusers_src"} \
      "$build/host-sim/demo/model" "$logs/sd15-diffusers"
else
  echo "diffusers_opens        skipped: diffusers is not importable (give its src/ folder as DIFFUSERS_SRC)"
fi
exit $status
