#!/usr/bin/env bash
# Validation, the average and the loss plot through sdt-host on the demo model (ABI 1.5):
#  - an embedding with --validation-dir, --ema, --metrics: the log names the lowest validation loss
#    and its step, whose copy exists (--save-every 0); the CSV has the validation_loss column;
#    metrics.jsonl has one line per step; loss.png is a PNG; cat-ema.safetensors is beside the result;
#  - the same options from a panel file give the same validation losses;
#  - a hypernetwork with --validation-split (the held-out files named) and --ema: style-ema.pt;
#  - --ema-result: the result is the state's average and --resume pairs with it;
#  - the demo with --validation names the best step and draws loss.png;
#  - the loss plot by default: metrics.jsonl and loss.png without --metrics, none with --no-metrics or metrics=false;
#  - bad values are refused with one sentence naming the option: a split outside (0, 1), a folder
#    and a split together, a validation folder without images, --validate-every without data.
source "$(dirname "$0")/e2e_lib.sh"

QUIET=(--preview-every 0 --csv-every 1)
mkdir -p val empty
cp "$DATASET"/demo_001.* "$DATASET"/demo_007.* val/
new_embedding a cat 1
run_host train --embedding a/cat.safetensors --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" \
    "${TRAIN_COMMON[@]}" "${QUIET[@]}" --save-every 0 --max-steps 6 --log-dir logs-a \
    --validation-dir val --validate-every 2 --ema 0.8 --metrics
expect_rc 0 "train with validation, ema and metrics"
folder=$(run_folder logs-a cat)
best=$(grep -oE 'the lowest validation loss was [0-9.]+ at step [0-9]+' "$ERR" | grep -oE '[0-9]+$')
[ -n "$best" ] || { fail "the log does not name the lowest validation loss"; show_stderr; }
[ -n "$best" ] && expect_file "$folder/embeddings/cat-$best.safetensors" "the copy of the best step $best"
head -n 1 "$folder/textual_inversion_loss.csv" | grep -q ',images_per_s,validation_loss$' ||
    fail "the loss CSV has no validation_loss column"
[ "$(grep -c '"validation_loss"' "$folder/metrics.jsonl")" = 3 ] || fail "metrics.jsonl does not hold 3 validation losses"
[ "$(wc -l <"$folder/metrics.jsonl")" = 6 ] || fail "metrics.jsonl does not have 6 lines"
head -c 8 "$folder/loss.png" | grep -q PNG || fail "loss.png is not a PNG"
expect_file a/cat-ema.safetensors "the average beside the embedding"
cmp -s a/cat.safetensors a/cat-ema.safetensors && fail "the average's file equals the trained embedding"

# The same run from a panel file: the same validation losses.
new_embedding b cat 1
cat >panel.ini <<INI
[train]
validation-dir=val
validate-every=2
metrics=true
INI
run_host train --config panel.ini --embedding b/cat.safetensors --dataset "$DATASET" \
    --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" "${QUIET[@]}" --save-every 0 --max-steps 6 \
    --log-dir logs-b
expect_rc 0 "train with validation from a panel file"
vals() { grep -oE '"validation_loss":[^,]+' "$(run_folder "$1" cat)/metrics.jsonl" | tr '\n' ' '; }
[ -n "$(vals logs-a)" ] && [ "$(vals logs-a)" = "$(vals logs-b)" ] ||
    fail "two runs measured different validation losses: '$(vals logs-a)' vs '$(vals logs-b)'"

# A hypernetwork, a split of the dataset, the average.
run_host create-hypernetwork --name style --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork for the demo model"
run_host train --hypernetwork hn/style.pt --dataset "$DATASET" --template "$SDT_TEMPLATES/style.txt" "${TRAIN_COMMON[@]}" \
    "${QUIET[@]}" --save-every 0 --max-steps 4 --log-dir logs-hn --validation-split 0.25 --validate-every 2 --ema 0.9 \
    --stop-after-no-improvement 3
expect_rc 0 "train a hypernetwork with a validation split and ema"
grep -q 'validation: 3 of 12 images held out of the training set (chosen by seed' "$ERR" ||
    { fail "the held-out images are not named"; show_stderr; }
expect_file hn/style-ema.pt "the average beside the hypernetwork"
grep -q 'step 4: validation loss' "$ERR" || fail "no validation loss at step 4"

# --ema-result: the result holds the average (the state's ema.embedding), no -ema file is written,
# and --resume pairs the state with that result.
new_embedding d cat 1
ema_run() { # MAX_STEPS [ARGS...]
    local steps=$1
    shift
    run_host train --embedding d/cat.safetensors --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" \
        "${TRAIN_COMMON[@]}" "${QUIET[@]}" --save-every 0 --max-steps "$steps" --log-dir logs-d --ema 0.8 --ema-result "$@"
}
ema_run 3
expect_rc 0 "train with --ema-result"
[ -e d/cat-ema.safetensors ] && fail "--ema-result wrote a separate -ema file"
python3 - d/cat.safetensors "$(run_folder logs-d cat)/cat.state.safetensors" <<'PY' || fail "the result is not the state's average"
import json, struct, sys
def tensor(path, name):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    b0, b1 = json.loads(raw[8:8 + n])[name]["data_offsets"]
    return raw[8 + n + b0: 8 + n + b1]
sys.exit(0 if tensor(sys.argv[1], "emb_params") == tensor(sys.argv[2], "ema.embedding")
         and tensor(sys.argv[1], "emb_params") != tensor(sys.argv[2], "emb_params") else 1)
PY
ema_run 5 --resume logs-d
expect_rc 0 "resume a run whose result holds the average"

# The demo with --validation: the step where the validation loss bottomed out, and loss.png.
run_host demo --validation --max-steps 20 --grid-seeds 0 --out demo
expect_rc 0 "demo --validation"
grep -q 'the lowest validation loss was [0-9.]* at step [0-9]*' "$ERR" || { fail "the demo does not name the best step"; show_stderr; }
expect_file "$(run_folder demo/textual_inversion sdtrain-demo)/loss.png" "the demo's loss plot"

# The loss plot is the default (the loss picture is what people look at); --no-metrics or metrics=false turns it
# off, and the CSV is written either way.
plot_run() { # LOG [ARGS...]: a new embedding LOG-e/cat trained 2 steps into LOG
    local log=$1
    shift
    new_embedding "$log-e" cat 1
    run_host train --embedding "$log-e/cat.safetensors" --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" \
        "${TRAIN_COMMON[@]}" "${QUIET[@]}" --save-every 0 --max-steps 2 --log-dir "$log" "$@"
}
plot_run logs-m1
expect_rc 0 "train with the default loss plot"
[ "$(wc -l <"$(run_folder logs-m1 cat)/metrics.jsonl" 2>/dev/null)" = 2 ] || fail "a plain run wrote no metrics.jsonl of 2 lines"
head -c 8 "$(run_folder logs-m1 cat)/loss.png" 2>/dev/null | grep -q PNG || fail "a plain run drew no loss.png"
plot_run logs-m2 --no-metrics
expect_rc 0 "train with --no-metrics"
[ -e "$(run_folder logs-m2 cat)/metrics.jsonl" ] || [ -e "$(run_folder logs-m2 cat)/loss.png" ] && fail "--no-metrics wrote the metrics"
expect_file "$(run_folder logs-m2 cat)/textual_inversion_loss.csv" "the CSV with --no-metrics"
printf '[train]\nmetrics=false\n' >no-metrics.ini
plot_run logs-m3 --config no-metrics.ini
expect_rc 0 "train with metrics=false in a panel file"
[ -e "$(run_folder logs-m3 cat)/metrics.jsonl" ] && fail "metrics=false in a panel file wrote metrics.jsonl"
plot_run logs-m4 --metrics --no-metrics
expect_usage "--metrics with --no-metrics" "--no-metrics"

# Refusals: one sentence naming the option.
new_embedding c cat 1
common=(--embedding c/cat.safetensors --dataset "$DATASET" "${TRAIN_COMMON[@]}" --max-steps 2 --log-dir logs-bad)
run_host train "${common[@]}" --validation-split 1.5 --validate-every 2
expect_error "a split outside (0, 1)" "--validation-split" "between 0 and 1"
run_host train "${common[@]}" --validation-split 0.2 --validation-dir val --validate-every 2
expect_error "a folder and a split" "--validation-dir" "--validation-split"
run_host train "${common[@]}" --validation-dir empty --validate-every 2
expect_error "a validation folder without images" "--validation-dir" "empty"
run_host train "${common[@]}" --validate-every 2
expect_error "--validate-every without data" "--validate-every"
run_host train "${common[@]}" --ema 1.5
expect_error "--ema outside [0, 1)" "--ema" "between 0 and 1"
e2e_finish
