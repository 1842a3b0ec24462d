#!/usr/bin/env bash
# The text cache (plugin/train/text_cache.h): a hypernetwork-only run without tag shuffle or tag
# drop-out encodes every prompt once at prepare and lets the text encoders go. On a tiny SD and a
# tiny SDXL checkpoint the same run is trained twice through the test plugin, with the cache and with
# SDTRAIN_TEXT_CACHE_OFF=1 (the encoders run every step, the path that was there before), and the
# hypernetwork files, its twin, the loss CSV (validation loss included) and the previews must agree
# bit for bit: the CPU encoder computes each 77-token chunk on its own, and its linears run one GEMM
# per chunk (the pooled projection one per row), so encoding a chunk at prepare in another group
# than a step's batch changes nothing, whatever kernels OpenBLAS picks for the CPU (ctest runs this
# again under OPENBLAS_CORETYPE Zen and Sandybridge: e2e_text_cache_Zen, ..._Sandybridge). The dataset mixes one- and two-chunk captions in a batch (the short
# prompt's padding chunk), caption drop-out adds the empty prompt, a validation split adds the
# validation prompts, a negative prompt and previews the preview prompts; an fp16 run with a NaN
# pixel switches to fp32 mid-run, which encodes the cache again. Tag shuffle and joint training
# keep the encoders, and the log says why.
source "$(dirname "$0")/e2e_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }
"$SDT_MAKE_CHECKPOINT" --config tiny --out sd.safetensors >/dev/null || fail "sdt-make-checkpoint tiny"
"$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --out sdxl.safetensors >/dev/null || fail "sdt-make-checkpoint tiny-sdxl"

mkdir ds
for i in 000 001 002 003 004 005; do cp "$DATASET/demo_$i.png" "$DATASET/demo_$i.txt" ds/; done
# one caption of 127 tokens: two 75-token chunks, batched with one-chunk prompts
python3 -c "print(', '.join(['black background, top left, gray circle'] * 12))" > ds/demo_003.txt

COMMON=(--dataset ds --template "$SDT_TEMPLATES/style_filewords.txt" --tokenizer "$MODEL/tokenizer" --width 64 --height 64
        --device cpu --seed "$SEED" --save-every 0 --csv-every 1 --preview-steps 4)

# log_has TEXT: the last run's log (stdout or stderr) holds TEXT.
log_has() { grep -qF -- "$1" "$OUT" "$ERR"; }

# both NAME MODEL SIZES ARGS...: trains NAME/on (the cache) and NAME/off (SDTRAIN_TEXT_CACHE_OFF=1) from one
# created hypernetwork and compares what they wrote.
both() {
    local name=$1 model=$2 sizes=$3 mode
    shift 3
    run_host create-hypernetwork --name style --sizes "$sizes" --out "$name/made"
    expect_rc 0 "$name: create-hypernetwork"
    for mode in on off; do
        mkdir -p "$name/$mode" && cp "$name/made/style.pt" "$name/$mode/"
        if [ $mode = on ]; then
            SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN run_host train --hypernetwork "$name/$mode/style.pt" --model "$model" \
                "${COMMON[@]}" --log-dir "$name/$mode/logs" "$@"
        else
            SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_TEXT_CACHE_OFF=1 run_host train --hypernetwork "$name/$mode/style.pt" \
                --model "$model" "${COMMON[@]}" --log-dir "$name/$mode/logs" "$@"
        fi
        expect_rc 0 "$name: train with the text cache $mode"
        cat "$OUT" "$ERR" > "$name/$mode.log"
        if [ $mode = on ]; then
            log_has "text encoders: every prompt of the run" || fail "$name: the log does not say the prompts were encoded once"
        else
            log_has "text encoders: kept on the CPU" || fail "$name: the log does not say the encoders were kept"
        fi
    done
    cmp -s "$name/made/style.pt" "$name/on/style.pt" && fail "$name: training left the hypernetwork as it was created"
    cmp -s "$name/on/style.pt" "$name/off/style.pt" || fail "$name: the hypernetwork trained with the text cache differs"
    local on off f
    on=$(run_folder "$name/on/logs" style)
    off=$(run_folder "$name/off/logs" style)
    cmp -s "$on/style.safetensors" "$off/style.safetensors" || fail "$name: the .safetensors twins differ"
    # every column but images_per_s, the one that is a time
    diff <(cut -d, -f1-9 "$on/hypernetwork_loss.csv") <(cut -d, -f1-9 "$off/hypernetwork_loss.csv") >/dev/null ||
        fail "$name: the loss CSVs differ"
    [ "$(csv_last_step "$on/hypernetwork_loss.csv")" = "$(csv_last_step "$off/hypernetwork_loss.csv")" ] ||
        fail "$name: the runs did not both reach their last step"
    local previews=0
    for f in "$off"/images/*.png; do
        [ -e "$f" ] || continue
        previews=$((previews + 1))
        cmp -s "$f" "$on/images/$(basename "$f")" || fail "$name: the preview $(basename "$f") differs with the text cache"
    done
    [ "$previews" -ge 2 ] || fail "$name: $previews previews written, expected 2"
}

both sd sd.safetensors 32,64 --max-steps 4 --batch-size 3 --preview-every 2 --caption-dropout 0.3 \
    --preview-negative-prompt "gray" --validation-split 0.34 --validate-every 2
grep -q "validation loss" sd/on.log || fail "sd: the validation loss was not measured"
both sdxl sdxl.safetensors 80,64 --max-steps 4 --batch-size 2 --preview-every 2 --caption-dropout 0.3
# the fp32 fallback: the image with a NaN pixel gives a NaN loss in fp16, the run switches to fp32 and encodes again
SDTRAIN_FAULT_NAN_PIXEL=demo_002.png both fallback sd.safetensors 32,64 --max-steps 3 --batch-size 2 --preview-every 1 \
    --precision fp16
grep -qF "encoded again in f32 for the fp32 fallback" fallback/on.log ||
    fail "fallback: the switch to fp32 did not encode the text cache again"

# tag shuffle changes the captions every step: the encoders stay, and the log says why
run_host create-hypernetwork --name style --sizes 32,64 --out shuffle
run_host train --hypernetwork shuffle/style.pt --model sd.safetensors "${COMMON[@]}" --log-dir shuffle/logs --max-steps 1 \
    --preview-every 0 --shuffle-tags
expect_rc 0 "train with tag shuffle"
log_has "text encoders: kept on the CPU and run every step (tag shuffle" ||
    fail "with tag shuffle the log does not say the text encoders are kept"
log_has "text encoders: every prompt" && fail "with tag shuffle the log says the prompts were cached"

# joint training: the embedding's vectors go through the encoders
run_host create-embedding --name sxl --init-text "a cat" --vectors 1 --model sd.safetensors --tokenizer "$MODEL/tokenizer" \
    --out joint
expect_rc 0 "create-embedding for the joint run"
run_host create-hypernetwork --name style --sizes 32,64 --out joint
run_host train --hypernetwork joint/style.pt --embedding joint/sxl.safetensors --embedding-learn-rate 0.01 \
    --model sd.safetensors "${COMMON[@]}" --template "$SDT_TEMPLATES/style.txt" --log-dir joint/logs --max-steps 1 \
    --preview-every 0
expect_rc 0 "joint training"
log_has "text encoders: kept on the CPU and run every step (an embedding trains through them)" ||
    fail "a joint run does not say it keeps the text encoders"

e2e_finish
