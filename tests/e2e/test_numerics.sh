#!/usr/bin/env bash
# The numerical faults a user can meet, through sdt-host: a learning rate that blows the
# embedding up (a clear stop that blames the optimisation, the embedding file still the last
# good one), a NaN in the data under fp16 (the one-shot fp32 fallback, said on stderr and in
# the CSV, training goes on), and fp16 with a huge initial loss scale (overflow skips and
# backoffs, then training with a finite embedding).
# shellcheck source=e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"

common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" "${TRAIN_COMMON[@]}"
        --save-every 0 --preview-every 0 --csv-every 1)

# A learning rate of 1e6: stop at the first step, blame the learning rate, keep the vectors.
new_embedding "$WORK/lr" blowup
cp "$WORK/lr/blowup.safetensors" "$WORK/lr.before.safetensors"
run_host train --embedding "$WORK/lr/blowup.safetensors" --log-dir "$WORK/log-lr" --learn-rate 1e6 --max-steps 5 "${common[@]}"
expect_rc 1 "learning rate 1e6"
grep -qi "learning rate" "$ERR" || { fail "the divergence error does not mention the learning rate"; show_stderr; }
run_host inspect "$WORK/lr/blowup.safetensors"
grep -q "finite:      yes" "$OUT" || fail "after the divergence stop the embedding is not finite"
[ "$(emb_diff "$WORK/lr.before.safetensors" "$WORK/lr/blowup.safetensors")" = 0 ] ||
    fail "the diverged step was not undone (the saved vectors moved)"

# A NaN in one training image under fp16: skip, switch to fp32 once, keep training.
new_embedding "$WORK/nan" nanpixel
SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_NAN_PIXEL=demo_005.png run_host train --embedding "$WORK/nan/nanpixel.safetensors" --log-dir "$WORK/log-nan" \
    --precision fp16 --batch-size 12 --max-steps 4 "${common[@]}"
expect_rc 0 "fp16 training with a NaN pixel"
grep -q "switches to fp32" "$ERR" || { fail "the fp32 fallback was not announced"; show_stderr; }
csv=$(run_folder "$WORK/log-nan" nanpixel)/textual_inversion_loss.csv
grep -q ",fp32," "$csv" || fail "the CSV does not record the switch to fp32"
run_host inspect "$WORK/nan/nanpixel.safetensors"
grep -q "finite:      yes" "$OUT" || fail "the embedding trained after the fallback is not finite"

# fp16 with an initial loss scale of 2^40: overflow skips, the scale halves each time, training goes on.
new_embedding "$WORK/scale" bigscale
run_host train --embedding "$WORK/scale/bigscale.safetensors" --log-dir "$WORK/log-scale" --precision fp16 \
    --loss-scale-init 1099511627776 --max-steps 24 "${common[@]}"
expect_rc 0 "fp16 with loss scale 2^40"
csv=$(run_folder "$WORK/log-scale" bigscale)/textual_inversion_loss.csv
first=$(sed -n 2p "$csv" | cut -d, -f7)
last=$(tail -n 1 "$csv" | cut -d, -f7)
skipped=$(tail -n 1 "$csv" | cut -d, -f9)
awk -v f="$first" -v l="$last" 'BEGIN { exit !(f + 0 < 1099511627776 && l + 0 < f + 0) }' ||
    fail "the loss scale did not back off (first $first, last $last)"
[ "${skipped:-0}" -gt 0 ] || fail "no step was skipped for overflow at a 2^40 loss scale"
run_host inspect "$WORK/scale/bigscale.safetensors"
grep -q "finite:      yes" "$OUT" || fail "the embedding is not finite after the overflowing steps"
e2e_finish
