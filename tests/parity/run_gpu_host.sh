#!/usr/bin/env bash
# Runs every PyTorch parity check and the GPU op test on a GPU host with torch,
# transformers and safetensors, from a build made elsewhere (carried with the tree).
#   tests/parity/run_gpu_host.sh BUILD_DIR LOG_DIR [TOKENIZER_DIR] [DIFFUSERS_SRC] [CHECKS]
# CHECKS: an extended regular expression of the check names to run (default: all), e.g.
# 'hn_step_parity|hn_step_sdxl|diffusers_opens_sdxl' for what fits one call: cuda_ops scaler_vs_torch
# tokenizer_vs_hf unet_parity hn_step_parity hn_step_sdxl clip_vae_parity diffusers_opens diffusers_opens_sdxl
# library_parity.
# DIFFUSERS_SRC: a diffusers src/ folder, for a host where diffusers is not installed (the check that
# diffusers opens the folders sdtrain writes runs when diffusers is importable either way; library_parity imports
# it from there too).
# Each check's full output goes to LOG_DIR/<name>.log; one line per check to stdout: ok, FAIL or skip, the
# exit status, the seconds, and the log's last line (for a FAIL also the log's own FAIL lines, indented).
# The models made for the checks (SD 1.5 and SDXL folders and single files, ~20 GB) live in a temporary
# folder that is removed at the end.
set -u
build=${1:?build dir}
logs=${2:?log dir}
tok=${3:-}
diffusers_src=${4:-}
only=${5:-.*}
mkdir -p "$logs"
here=$(cd "$(dirname "$0")" && pwd)
models=$(mktemp -d "${TMPDIR:-/tmp}/sdt-gpu-host-models.XXXXXX") || exit 1
trap 'rm -rf "$models"' EXIT
status=0
wanted() { [[ $1 =~ ^($only)$ ]]; }
run() {
  local name=$1; shift
  wanted "$name" || return 0
  local t0=$(date +%s)
  "$@" > "$logs/$name.log" 2>&1
  local rc=$? verdict=ok
  [ $rc -eq 0 ] || { verdict=FAIL; status=1; }
  [ $rc -eq 77 ] && verdict=skip # a library missing on the GPU host: still a failed run of this script
  printf '%-4s %-22s rc=%-3s %4ss  %s\n' "$verdict" "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -n 1 "$logs/$name.log")"
  [ $rc -eq 0 ] || grep -E '^FAIL' "$logs/$name.log" | head -n 20 | sed 's/^/       /'
}
# make NAME SDT-MAKE-CHECKPOINT-ARGS...: a model for a check, its log in LOG_DIR/make-NAME.log; a FAIL line if it fails.
make_model() {
  local name=$1; shift
  "$build/models/tools/sdt-make-checkpoint" "$@" >> "$logs/make-$name.log" 2>&1 && return 0
  local why
  why=$(grep -m 1 '^sdt-make-checkpoint:' "$logs/make-$name.log" || tail -n 1 "$logs/make-$name.log")
  printf '%-4s %-22s %s\n' FAIL "make-$name" "$why"
  status=1
  return 1
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
    --sizes tiny,tiny-linear,tiny-sdxl,sd15 --sd-latent 32
# SDXL at full size (UNet 2.6 billion weights, context 2048, modules 2048/640/1280, y 2816) on its own line: the
# C side runs on the CPU, so a small latent; the reference in float64 on the GPU (~21 GB)
run hn_step_sdxl python3 "$here/../hn/hn_step_parity.py" --cli "$build/tests/hn/hn_step_cli" --sizes sdxl --sd-latent 32
run clip_vae_parity python3 "$here/clip_vae_parity.py" --build "$build" --sizes tiny,sd15,sd2 --record "$logs/clip_vae_notes.md"
# The C MMDiT, Flux and T5 against diffusers' and transformers' own classes strict-loading the generators' files:
# tiny, then full width at reduced depth (SD3.5 Medium 2 blocks, Flux.1 dev 1 + 1, T5-XXL 2 layers; ~3 GB of
# files in the script's temporary folder, both sides on the CPU)
run library_parity python3 "$here/library_parity.py" --build "$build" --sizes tiny,full \
    ${diffusers_src:+--lib-path "$diffusers_src"}
if ! wanted diffusers_opens && ! wanted diffusers_opens_sdxl; then
  : # not asked for
elif PYTHONPATH="${diffusers_src}${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import diffusers" 2> /dev/null; then
  # Each model in both layouts from one seed (the generator draws the same weights in both): the folder as
  # diffusers loads it, the single file as A1111/ComfyUI and diffusers' from_single_file load it.
  specs=()
  wanted diffusers_opens && specs+=("sd15 2")
  wanted diffusers_opens_sdxl && specs+=("tiny-sdxl 3" "sdxl 4")
  for spec in "${specs[@]}"; do
    read -r config seed <<< "$spec"
    make_model "$config" --config "$config" --layout diffusers --dtype f16 --seed "$seed" --out "$models/$config" &&
      make_model "$config" --config "$config" --layout ldm --dtype f16 --seed "$seed" --out "$models/$config.safetensors"
  done
  # sdt-make-checkpoint writes no tokenizer; the SDXL folders get the tiny BPE as tokenizer/ and tokenizer_2/ (its
  # 1000 ids fit both encoders of both sizes), so that transformers' CLIPTokenizer is checked on them too
  if "$build/models/tools/sdt-make-tokenizer" --out "$models/tokenizer" --for-config tiny >> "$logs/make-tokenizer.log" 2>&1; then
    for config in tiny-sdxl sdxl; do
      [ -d "$models/$config" ] && cp -r "$models/tokenizer" "$models/$config/tokenizer" &&
        cp -r "$models/tokenizer" "$models/$config/tokenizer_2"
    done
  else
    printf '%-4s %-22s %s\n' FAIL make-tokenizer "$(tail -n 1 "$logs/make-tokenizer.log")"
    status=1
  fi
  run diffusers_opens python3 "$here/diffusers_opens_folder.py" ${diffusers_src:+--diffusers-src "$diffusers_src"} \
      "$build/host-sim/demo/model" --single-file "$models/sd15" "$models/sd15.safetensors"
  run diffusers_opens_sdxl python3 "$here/diffusers_opens_folder.py" ${diffusers_src:+--diffusers-src "$diffusers_src"} \
      --single-file "$models/tiny-sdxl" "$models/tiny-sdxl.safetensors" --single-file "$models/sdxl" "$models/sdxl.safetensors"
else
  printf '%-4s %-22s %s\n' skip diffusers_opens "diffusers is not importable (give its src/ folder as DIFFUSERS_SRC)"
fi
exit $status
