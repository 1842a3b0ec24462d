#!/usr/bin/env bash
# The T5 cache (plugin/train/t5_cache.h, issue 30): an SD3.5 embedding run whose t5xxl table does not train
# (--encoders clip_l,clip_g) computes T5's output for every prompt once at prepare and lets T5's weights go. On the
# tiny SD3.5 all-in-one file (sdt-make-checkpoint --config tiny-sd3) the same run is trained twice through the test
# plugin, with the cache and with SDTRAIN_TEXT_CACHE_OFF=1 (T5 runs every step, the path that was there before), and
# the embedding, its training state, the loss CSV (validation loss included) and the previews must agree bit for
# bit: T5 runs each prompt as its own sequence and the CPU's linears are one GEMM per sequence, so computing a prompt
# at prepare in another group than a step's batch changes nothing. The run has the placeholder in T5's sequence
# (its frozen t5xxl rows), caption drop-out (the empty prompt), validation images, a negative prompt and previews.
# The log says T5's weights left the CPU (the bytes parking let go of). A cached run resumed from its state equals
# the run straight; an fp16 run with a NaN pixel switches to fp32, computes T5's output again and still equals the
# uncached run. Tag shuffle, tag drop-out and a t5xxl table that trains keep T5, and the log says why. A tiny
# Flux.1 dev run training CLIP-L alone caches T5's output too and equals the run without the cache.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer data val
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' 1000 rows fit the demo's vocabulary
flow_t5_tokenizer models/t5_tokenizer
for i in 000 001 002; do cp "$DATASET/demo_$i.png" "$DATASET/demo_$i.txt" data/; done
cp "$DATASET/demo_003.png" "$DATASET/demo_003.txt" val/

run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out fresh
expect_rc 0 "create an SD3.5 embedding"

COMMON=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model models/sd35.safetensors
        --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --csv-every 1 --learn-rate 0.05
        --preview-steps 3)

# log_has TEXT: the last run's log (stdout or stderr) holds TEXT.
log_has() { grep -qF -- "$1" "$OUT" "$ERR"; }

# the same run with the T5 cache (on) and without (off)
for mode in on off; do
    mkdir -p $mode && cp fresh/star.safetensors $mode/
    if [ $mode = on ]; then
        SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN run_host train "${COMMON[@]}" --embedding $mode/star.safetensors \
            --log-dir $mode/logs --encoders clip_l,clip_g --max-steps 4 --batch-size 2 --caption-dropout 0.3 \
            --validation-dir val --validate-every 1 --preview-every 2 --preview-negative-prompt "gray"
    else
        SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_TEXT_CACHE_OFF=1 run_host train "${COMMON[@]}" \
            --embedding $mode/star.safetensors --log-dir $mode/logs --encoders clip_l,clip_g --max-steps 4 \
            --batch-size 2 --caption-dropout 0.3 --validation-dir val --validate-every 1 --preview-every 2 \
            --preview-negative-prompt "gray"
    fi
    expect_rc 0 "train with the T5 cache $mode"
    cat "$OUT" "$ERR" >$mode.log
    if [ $mode = on ]; then
        log_has "T5: its output for every prompt of the run" || fail "the log does not say T5's output was cached"
        # the bytes sd_runtime_part_park found on the backend under T5's keys and let go of (0.3 MiB for the tiny T5)
        freed=$(grep -ohE "T5's weights \([0-9.]+ MiB\) leave the CPU" "$OUT" "$ERR" | head -n 1 | sed -E 's/.*\(([0-9.]+) MiB.*/\1/')
        awk -v f="${freed:-0}" 'BEGIN { exit !(f > 0) }' ||
            fail "the log does not say T5's weights left the CPU (freed: '${freed:-}' MiB)"
    else
        log_has "T5: kept on the CPU and run every step (the text cache is off" ||
            fail "the log does not say T5 was kept with the cache off"
    fi
done
cmp -s fresh/star.safetensors on/star.safetensors && fail "training left the embedding as it was created"
cmp -s on/star.safetensors off/star.safetensors || fail "the embedding trained with the T5 cache differs"
on=$(run_folder on/logs star)
off=$(run_folder off/logs star)
# the states: every tensor and every metadata value but the embedding's path (on/ or off/) and the hash over it
python3 - "$on/star.state.safetensors" "$off/star.state.safetensors" <<'PY' || fail "the training states differ"
import json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    meta = {k: v for k, v in head.pop("__metadata__", {}).items() if k not in ("embedding_file", "sdtrain_sha256")}
    return meta, {k: raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] for k, v in head.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
sys.exit(0 if a == b and a[1] else 1)
PY
# every column but images_per_s, the one that is a time
diff <(cut -d, -f1-9 "$on/textual_inversion_loss.csv") <(cut -d, -f1-9 "$off/textual_inversion_loss.csv") >/dev/null ||
    fail "the loss CSVs differ"
[ "$(csv_last_step "$on/textual_inversion_loss.csv")" = 4 ] || fail "the cached run did not reach step 4"
grep -q "validation loss" on.log || fail "the validation loss was not measured"
diff <(grep -oE 'step [0-9]+: validation loss [0-9.e+-]+' on.log) \
    <(grep -oE 'step [0-9]+: validation loss [0-9.e+-]+' off.log) >/dev/null || fail "the validation losses differ"
previews=0
for f in "$off"/images/*.png; do
    [ -e "$f" ] || continue
    previews=$((previews + 1))
    cmp -s "$f" "$on/images/$(basename "$f")" || fail "the preview $(basename "$f") differs with the T5 cache"
done
[ "$previews" -ge 2 ] || fail "$previews previews written, expected 2"

# resume with the cache: 2 steps, then --resume to 4, equals the 4 steps straight (on/)
mkdir -p split && cp fresh/star.safetensors split/
split=(--encoders clip_l,clip_g --batch-size 2 --caption-dropout 0.3 --preview-every 0)
SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN run_host train "${COMMON[@]}" --embedding split/star.safetensors --log-dir split/logs \
    "${split[@]}" --max-steps 2
expect_rc 0 "train 2 steps with the T5 cache"
SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN run_host train "${COMMON[@]}" --embedding split/star.safetensors --log-dir split/logs \
    "${split[@]}" --max-steps 4 --resume "$(run_folder split/logs star)/star.state.safetensors"
expect_rc 0 "resume to 4 steps with the T5 cache"
log_has "T5: its output for every prompt of the run" || fail "the resumed run does not cache T5's output"
cmp -s split/star.safetensors on/star.safetensors || fail "the resumed run with the T5 cache differs from 4 steps straight"

# the fp32 fallback: a NaN pixel gives a NaN loss in fp16 (bf16 here: an fp16 run on SD3.5 trains in bf16 where the
# device has it), the run switches to fp32 and computes T5's output again
for mode in on off; do
    mkdir -p fb$mode && cp fresh/star.safetensors fb$mode/
    env SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_NAN_PIXEL=demo_001.png $([ $mode = off ] && echo SDTRAIN_TEXT_CACHE_OFF=1) \
        "$SDT_HOST" train "${COMMON[@]}" --embedding fb$mode/star.safetensors --log-dir fb$mode/logs \
        --encoders clip_l,clip_g --max-steps 3 --batch-size 2 --preview-every 0 --precision fp16 \
        </dev/null >fb$mode.log 2>&1 || fail "the fp32 fallback run with the T5 cache $mode failed"
done
grep -qF "T5: the run's prompts were computed again in f32 for the fp32 fallback" fbon.log ||
    fail "the switch to fp32 did not compute T5's output again"
cmp -s fbon/star.safetensors fboff/star.safetensors || fail "after the fp32 fallback the T5 cache's run differs"

# keep: KIND WHY ARGS...: a run that keeps T5, and the log's reason.
keep() {
    local kind=$1 why=$2
    shift 2
    mkdir -p "$kind" && cp fresh/star.safetensors "$kind/"
    run_host train "${COMMON[@]}" --embedding "$kind/star.safetensors" --log-dir "$kind/logs" --max-steps 1 \
        --preview-every 0 "$@"
    expect_rc 0 "train with $kind"
    log_has "T5: kept on the CPU and run every step ($why" || { fail "with $kind the log does not say why T5 is kept"; show_stderr; }
    log_has "T5: its output for every prompt" && fail "with $kind the log says T5's output was cached"
}
keep shuffle "tag shuffle" --encoders clip_l,clip_g --shuffle-tags
keep dropout "tag drop-out" --encoders clip_l,clip_g --tag-dropout 0.2
keep t5trains "the embedding's t5xxl table trains" --encoders clip_l,t5xxl

# Flux.1 (dev, tiny): CLIP-L alone trains, T5's output is cached, the run equals T5 run every step
"$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --out models/flux.safetensors >/dev/null || fail "tiny-flux-dev"
run_host create-embedding --name fstar --vectors 2 --init-text "a cat" --model models/flux.safetensors --out ffresh
expect_rc 0 "create a Flux.1 embedding"
for mode in on off; do
    mkdir -p flux$mode && cp ffresh/fstar.safetensors flux$mode/
    env SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN $([ $mode = off ] && echo SDTRAIN_TEXT_CACHE_OFF=1) "$SDT_HOST" train \
        "${COMMON[@]}" --model models/flux.safetensors --embedding flux$mode/fstar.safetensors \
        --log-dir flux$mode/logs --encoders clip_l --max-steps 3 --batch-size 2 --caption-dropout 0.3 \
        --preview-every 0 </dev/null >flux$mode.log 2>&1 || fail "the Flux.1 run with the T5 cache $mode failed"
done
grep -qF "T5: its output for every prompt of the run" fluxon.log || fail "the Flux.1 run did not cache T5's output"
cmp -s ffresh/fstar.safetensors fluxon/fstar.safetensors && fail "the Flux.1 run left the embedding as it was"
cmp -s fluxon/fstar.safetensors fluxoff/fstar.safetensors || fail "the Flux.1 embedding trained with the T5 cache differs"

e2e_finish
