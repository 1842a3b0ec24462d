#!/usr/bin/env bash
# SD3.5/Flux embedding step (issue 30's speed section) in one device call: sdtrain through sdt-host on full-size
# random checkpoints (sdt-make-checkpoint: the transformer, T5-XXL, CLIP-L/G from SDXL's text encoders in
# transformers' names, the tiny 16-channel VAE: its latents are cached before the step) at 1024x1024, without and
# with gradient checkpointing; then PyTorch's same step (pytorch_transformer_ti_baseline.py) in the same sitting.
#   bench/transformer_ti/run.sh BUILD_DIR OUT_DIR [CARRY_DIR] [STEPS] [MODELS] [MODES] [ENCODERS] [TORCH_EXTRA]
# CARRY_DIR: diffusers' source as fetch_sources.md prepares it ("" = sdtrain only); STEPS (default 12) counts
# 5 warm-up steps; MODELS default "sd35m sd35l flux-dev"; MODES "plain checkpointing" ("none": PyTorch only);
# ENCODERS "all" (or "clip", "t5": which encoders' rows train, as the baseline's --train-encoders); TORCH_EXTRA:
# more baseline options (a check of the script without a GPU: "none" modes and "--device cpu --tiny").
# Writes OUT_DIR/MODEL_MODE.{log,csv}, OUT_DIR/sdtrain.json and OUT_DIR/transformer_ti.json (PyTorch).
# Until sdt-host trains these families (its train has no --t5xxl), the sdtrain half prints "not wired yet".
set -uo pipefail
build=${1:?build dir}; out=${2:?out dir}; carry=${3:-}; steps=${4:-12}
models=${5:-"sd35m sd35l flux-dev"}; modes=${6:-"plain checkpointing"}; encoders=${7:-all}; torch_extra=${8:-}
here=$(cd "$(dirname "$0")" && pwd)
report="$here/../ti_gpu/bench_report.py"
host="$build/host-sim/sdt-host"; make="$build/models/tools/sdt-make-checkpoint"
warm=5; res=1024
t0=$(date +%s)
mkdir -p "$out"
say() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
case $encoders in all) enc_opt="";; clip) enc_opt=clip;; t5) enc_opt=t5xxl;;
  *) echo "run.sh: ENCODERS must be all, clip or t5, not '$encoders'" >&2; exit 2;; esac

if [ "$modes" != none ] && ! "$host" train --help 2>&1 | grep -q -- "--t5xxl"; then
  say "sdtrain: not wired yet ($host train has no --t5xxl: the SD3.5/Flux embedding step is not in the trainer)"
  modes=none
fi
if [ "$modes" != none ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  say "random parts: T5-XXL, CLIP-L/G (SDXL's text encoders, transformers' names), the 16-channel VAE, the dataset"
  "$make" --config t5xxl --dtype bf16 --seed 1 --out "$work/t5xxl.safetensors" > /dev/null || exit 1
  "$make" --config sdxl --text-only --layout diffusers --dtype f16 --seed 1 --out "$work/sdxl_text" > /dev/null || exit 1
  "$make" --config tiny-vae16 --seed 1 --out "$work/vae.safetensors" > /dev/null || exit 1
  "$build/host-sim/demo-tools/sdt-make-demo-dataset" "$work/data" --count 8 --size "$res" > /dev/null || exit 1
  clip_l=$work/sdxl_text/text_encoder/model.safetensors; clip_g=$work/sdxl_text/text_encoder_2/model.safetensors
  entries=()
  for name in $models; do
    case $name in
      sd35m) config=sd35-medium-mmdit; parts=(--clip-l "$clip_l" --clip-g "$clip_g");;
      sd35l) config=sd35-large-mmdit; parts=(--clip-l "$clip_l" --clip-g "$clip_g");;
      flux-dev) config=flux-dev; parts=(--clip-l "$clip_l");;
      *) echo "run.sh: unknown model '$name' (sd35m, sd35l, flux-dev)" >&2; continue;;
    esac
    parts+=(--t5xxl "$work/t5xxl.safetensors" --vae "$work/vae.safetensors")
    model=$work/$name.safetensors
    say "$name: a random $config transformer (bf16)"
    "$make" --config "$config" --dtype bf16 --seed 1 --out "$model" > /dev/null || { echo "$name: no checkpoint"; continue; }
    for mode in $modes; do
      dir="$work/${name}_$mode"; log="$out/${name}_$mode.log"
      mkdir -p "$dir"
      flag=(); [ "$mode" = checkpointing ] && flag=(--gradient-checkpointing)
      [ -n "$enc_opt" ] && flag+=(--encoders "$enc_opt")
      say "sdtrain $name, $mode"
      if ! "$host" create-embedding --name ring --init-text ring --vectors 1 --model "$model" "${parts[@]}" \
          --out "$dir" > "$log" 2>&1 ||
         ! "$host" train --embedding "$dir/ring.safetensors" --template "$build/host-sim/templates/subject_filewords.txt" \
          --model "$model" "${parts[@]}" --dataset "$work/data" --device cuda --width "$res" --height "$res" \
          --max-steps "$steps" --save-every 0 --preview-every 0 --csv-every 1 --precision bf16 --batch-size 1 \
          "${flag[@]}" --log-dir "$dir/log" >> "$log" 2>&1; then
        echo "$name $mode failed: $(tail -n 2 "$log")"; continue
      fi
      csv=$(find "$dir/log" -name textual_inversion_loss.csv | head -n 1)
      cp "$csv" "$out/${name}_$mode.csv"
      json=$(python3 "$report" run-stats "$csv" "$log" bf16 1 "$warm" 0)
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%-9s %-13s %10.1f ms  %6.3f img/s  peak %s MiB" % (sys.argv[2], sys.argv[3], r.get("ms_median", float("nan")), r.get("images_per_s", 0), r.get("peak_mib", "?")))' "$json" "$name" "$mode"
      entries+=("{\"model\": \"$name\", \"mode\": \"$mode\", \"encoders\": \"$encoders\", \"run\": $json}")
    done
    rm -f "$model"
  done
  {
    echo '{"resolution": '"$res"', "steps": '"$steps"', "warmup": '"$warm"', "entries": ['
    for i in "${!entries[@]}"; do [ "$i" -gt 0 ] && echo ','; echo "${entries[$i]}"; done
    echo ']}'
  } > "$out/sdtrain.json"
fi
if [ -n "$carry" ]; then
  list=$(echo $models | tr ' ' ',')
  say "PyTorch eager, without and with checkpointing"
  OUT=$out bash "$here/device_run.sh" "$carry" --models "$list" --batches 1 --checkpointing both \
      --train-encoders "$encoders" --steps $(( steps - warm > 0 ? steps - warm : 1 )) --warmup "$warm" $torch_extra
fi
say "done"
