#!/usr/bin/env bash
# The loss, noise and LR-scheduler options (ABI 1.5) through sdt-host on the demo model: an
# embedding trained with every one of them on (Huber loss, min-SNR-gamma, noise offset with random
# strength, a timestep range, zero terminal SNR on a model trained as v-prediction, cosine with
# restarts after a warmup) trains, writes the rate it used to the loss CSV (the schedule string's
# rate times diffusers' factor), names the options in its settings file, and resumes bit for bit;
# a hypernetwork trains with them too; zero terminal SNR on the epsilon demo model is refused with
# one sentence; a bad timestep range is refused before anything loads.
source "$(dirname "$0")/e2e_lib.sh"

common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}"
        --save-every 0 --preview-every 0 --csv-every 1 --learn-rate 0.05)
loss_opts=(--loss-type huber --huber-delta 0.5 --min-snr-gamma 5 --noise-offset 0.1 --noise-offset-random-strength
           --timestep-min 100 --timestep-max 999 --zero-terminal-snr --v-prediction
           --lr-scheduler cosine_with_restarts --lr-cycles 2 --warmup-steps 2)

for d in straight split; do new_embedding "$d" cat 2; done
run_host train "${common[@]}" "${loss_opts[@]}" --embedding straight/cat.safetensors --max-steps 6 --log-dir straight/logs
expect_rc 0 "train 6 steps with every loss option on"
csv=$(run_folder straight/logs cat)/textual_inversion_loss.csv
expect_file "$csv" "the loss CSV"
# learn_rate is the rate used: 0.05 x diffusers' cosine-with-hard-restarts factor (warmup 2, 2 cycles,
# max steps 6) at the steps done before each update; every loss finite.
python3 - "$csv" <<'PY' || fail "the loss CSV's learn_rate or loss column is wrong (above)"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ok = len(rows) == 6
for r in rows:
    s = int(r["step"]) - 1
    if s < 2:
        f = s / 2
    else:
        p = (s - 2) / 4
        f = 0.0 if p >= 1 else max(0.0, 0.5 * (1 + math.cos(math.pi * ((2 * p) % 1.0))))
    rate, loss = float(r["learn_rate"]), float(r["loss"])
    if abs(rate - 0.05 * f) > 1e-9 or not math.isfinite(loss):
        print("step %s: learn_rate %s (want %.9g), loss %s" % (r["step"], r["learn_rate"], 0.05 * f, r["loss"]))
        ok = False
sys.exit(0 if ok else 1)
PY
[ "$(emb_diff straight/cat.safetensors split/cat.safetensors)" != 0 ] ||
    fail "the embedding trained with the loss options did not change"
settings=$(ls "$(run_folder straight/logs cat)"/settings-*.json 2>/dev/null | head -n 1)
for key in '"loss_type":"huber"' '"min_snr_gamma":5' '"noise_offset":0.1' '"timestep_min":100' '"zero_terminal_snr":true' \
           '"lr_scheduler":"cosine_with_restarts"'; do
    tr -d ' \n\t' <"$settings" | grep -qF "$key" || fail "the settings file $settings does not hold $key"
done

# Resume is exact with every option on: 3 steps, then --resume to 6, equals 6 straight.
run_host train "${common[@]}" "${loss_opts[@]}" --embedding split/cat.safetensors --max-steps 3 --log-dir split/logs
expect_rc 0 "train 3 steps with the loss options"
state=$(run_folder split/logs cat)/cat.state.safetensors
run_host train "${common[@]}" "${loss_opts[@]}" --embedding split/cat.safetensors --max-steps 6 --log-dir split/logs \
    --resume "$state"
expect_rc 0 "resume to 6 steps with the loss options"
cmp -s split/cat.safetensors straight/cat.safetensors || fail "the resumed embedding differs from the uninterrupted one"
cmp -s <(cut -d, -f1-6 "$csv") <(cut -d, -f1-6 "$(run_folder split/logs cat)/textual_inversion_loss.csv") ||
    fail "the loss CSVs of the straight and the resumed runs differ"

# A hypernetwork (the same engine) in fp16 with the loss scaler: L1 loss, min-SNR (epsilon form), a
# linear schedule after a warmup; every step's loss finite and its rate 0.001 x diffusers' linear factor.
run_host create-hypernetwork --name hn --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork"
keep_copy hn/hn.pt 2>/dev/null || keep_copy "$(ls hn/hn.* | head -n 1)"
hn_file=$(ls hn/hn.* | grep -v '\.before$' | head -n 1)
run_host train "${common[@]}" --hypernetwork "$hn_file" --learn-rate 0.001 --loss-type l1 --min-snr-gamma 5 \
    --noise-offset 0.05 --lr-scheduler linear --warmup-steps 1 --max-steps 3 --log-dir hnlogs --precision fp16
expect_rc 0 "train a hypernetwork 3 steps in fp16 with the loss options"
hn_csv=$(ls hnlogs/*/hn/hypernetwork_loss.csv 2>/dev/null | head -n 1)
expect_file "$hn_csv" "the hypernetwork's loss CSV"
python3 - "$hn_csv" <<'PY' || fail "the hypernetwork's loss CSV is wrong (above)"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ok = len(rows) == 3
for r in rows:
    s = int(r["step"]) - 1
    f = s / 1 if s < 1 else max(0.0, (3 - s) / 2)
    if abs(float(r["learn_rate"]) - 0.001 * f) > 1e-12 or not math.isfinite(float(r["loss"])):
        print("step %s: learn_rate %s (want %.9g), loss %s" % (r["step"], r["learn_rate"], 0.001 * f, r["loss"]))
        ok = False
sys.exit(0 if ok else 1)
PY
cmp -s "$hn_file" "$hn_file.before" && fail "the hypernetwork trained with the loss options did not change"

# The same options as panel-file keys (an embedding run: they go through its train_options).
new_embedding panel cat 1
printf '[train]\nloss-type=l1\nmin-snr-gamma=5\nnoise-offset=0.05\ntimestep-max=500\nlr-scheduler=linear\nwarmup-steps=1\n' >panel.ini
run_host train "${common[@]}" --config panel.ini --embedding panel/cat.safetensors --max-steps 2 --log-dir panel/logs
expect_rc 0 "train with the loss options from a panel file"
settings=$(ls "$(run_folder panel/logs cat)"/settings-*.json 2>/dev/null | head -n 1)
for key in '"loss_type":"l1"' '"min_snr_gamma":5' '"timestep_max":500' '"lr_scheduler":"linear"' '"warmup_steps":1'; do
    tr -d ' \n\t' <"$settings" | grep -qF "$key" || fail "the panel file's run: $settings does not hold $key"
done

# Zero terminal SNR on the epsilon demo model: one sentence naming the option, the model's
# prediction type and the fix.
new_embedding eps cat 1
run_host train "${common[@]}" --embedding eps/cat.safetensors --max-steps 2 --log-dir eps/logs --zero-terminal-snr
expect_error "--zero-terminal-snr on an epsilon model" "--zero-terminal-snr" "epsilon" "v-prediction" "turn it off"

# A timestep range whose min is above its max.
run_host train "${common[@]}" --embedding eps/cat.safetensors --max-steps 2 --log-dir eps/logs --timestep-min 500 \
    --timestep-max 100
expect_error "--timestep-min above --timestep-max" "--timestep-min" "--timestep-max" "min <= max"
e2e_finish
