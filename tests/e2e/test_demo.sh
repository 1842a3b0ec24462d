#!/usr/bin/env bash
# The README's first command, small: `sdt-host --out DIR --max-steps N --seed S` trains the demo
# embedding, writes every output users know, and `sdt-host inspect` reads back each embedding
# file it wrote (the final one, snapshots, PNG cards, the training state), as text and as JSON.
source "$(dirname "$0")/e2e_lib.sh"

STEPS=$((4 + SEED % 5)) # 4..8
run_host --out demo --max-steps "$STEPS" --seed "$SEED" --grid-seeds 0
expect_rc 0 "demo --max-steps $STEPS"
grep -qF "demo" "$OUT" || fail "the demo does not say where its outputs are"

final=demo/embeddings/sdtrain-demo.safetensors
expect_file "$final" "final embedding"
run=$(run_folder demo/textual_inversion sdtrain-demo)
csv=$run/textual_inversion_loss.csv
expect_file "$csv" "loss CSV"
header=$(head -n 1 "$csv")
case "$header" in
    step,epoch,epoch_step,loss,learn_rate,*grad_norm*) ;;
    *) fail "the CSV header is not A1111's plus health columns: $header" ;;
esac
[ "$(csv_last_step "$csv")" = "$STEPS" ] || fail "the CSV's last step is '$(csv_last_step "$csv")', expected $STEPS"
rows=$(($(wc -l <"$csv") - 1))
[ "$rows" = "$STEPS" ] || fail "the CSV has $rows rows, expected one per step ($STEPS)"
# Every loss and learning rate is a finite number.
awk -F, 'NR > 1 && ($4 !~ /^[0-9.eE+-]+$/ || $5 !~ /^[0-9.eE+-]+$/) { bad = 1 } END { exit bad }' "$csv" ||
    fail "the CSV holds a loss or learning rate that is not a finite number"

snapshots=("$run"/embeddings/sdtrain-demo-*.safetensors)
cards=("$run"/image_embeddings/sdtrain-demo-*.png)
previews=("$run"/images/sdtrain-demo-*.png)
settings=("$run"/settings-*.json)
state=$run/sdtrain-demo.state.safetensors
for f in "${snapshots[0]}" "${cards[0]}" "${previews[0]}" "${settings[0]}" "$state"; do expect_file "$f" "demo output"; done
[ "${#snapshots[@]}" -ge 2 ] || fail "expected several snapshots, found ${#snapshots[@]}"
expect_file "$run/images/sdtrain-demo-$STEPS.png" "the last preview"
expect_file "$run/embeddings/sdtrain-demo-$STEPS.safetensors" "the last snapshot"
head -c 8 "${previews[0]}" | od -An -c | grep -q 'P   N   G' || fail "${previews[0]} is not a PNG"
expect_json_file "${settings[0]}" "settings"
[ "$(json_get "${settings[0]}" seed)" = "$SEED" ] || fail "the settings JSON does not record seed $SEED"
[ "$(json_get "${settings[0]}" steps)" = "$STEPS" ] || fail "the settings JSON does not record $STEPS steps"

# inspect FILE STEP FORMAT_WORDS: text and JSON agree on name, vectors, step; finite values.
inspect_case() {
    local file=$1 step=$2 format=$3
    run_host inspect "$file"
    expect_rc 0 "inspect $file"
    grep -q "^name: *sdtrain-demo" "$OUT" || fail "inspect $file: no name line"
    grep -q "^vectors: *2 x " "$OUT" || fail "inspect $file: not 2 vectors"
    grep -q "^step: *$step\$" "$OUT" || fail "inspect $file: step is not $step: $(grep '^step' "$OUT")"
    grep -q "^finite: *yes" "$OUT" || fail "inspect $file: not finite"
    grep -qi "^format: *$format" "$OUT" || fail "inspect $file: format is not $format: $(grep '^format' "$OUT")"
    run_host inspect --json "$file"
    expect_rc 0 "inspect --json $file"
    expect_json_file "$OUT" "inspect --json $file"
    [ "$(json_get "$OUT" name)" = sdtrain-demo ] || fail "inspect --json $file: name"
    [ "$(json_get "$OUT" vectors)" = 2 ] || fail "inspect --json $file: vectors"
    [ "$(json_get "$OUT" step)" = "$step" ] || fail "inspect --json $file: step"
    [ "$(json_get "$OUT" finite)" = true ] || fail "inspect --json $file: finite"
}
inspect_case "$final" "$STEPS" safetensors
for s in "${snapshots[@]}"; do
    n=${s##*-}
    inspect_case "$s" "${n%.safetensors}" safetensors
done
for c in "${cards[@]}"; do
    n=${c##*-}
    inspect_case "$c" "${n%.png}" "PNG card"
done
inspect_case "$state" "$STEPS" "sdtrain training state"
[ "$(json_get "$OUT" format)" != safetensors ] || fail "inspect --json calls the training state plain 'safetensors'"

# The final embedding, the last snapshot and the state hold the same vectors.
run_host inspect --json "$final"
final_norms=$(json_get "$OUT" norms)
run_host inspect --json "$run/embeddings/sdtrain-demo-$STEPS.safetensors"
[ "$(json_get "$OUT" norms)" = "$final_norms" ] || fail "the last snapshot differs from the final embedding"
run_host inspect --json "$state"
[ "$(json_get "$OUT" norms)" = "$final_norms" ] || fail "the training state's embedding differs from the final one"

# The other files the run wrote: previews, the settings and the loss CSV.
other_case() { # FILE FORMAT
    run_host inspect "$1"
    expect_rc 0 "inspect $1"
    grep -q "^file: *$1" "$OUT" || fail "inspect $1: no file line"
    run_host inspect --json "$1"
    expect_rc 0 "inspect --json $1"
    expect_json_file "$OUT" "inspect --json $1"
    [ "$(json_get "$OUT" format)" = "$2" ] || fail "inspect --json $1: format is '$(json_get "$OUT" format)', not $2"
}
for p in "${previews[@]}"; do
    other_case "$p" png-image
    [ "$(json_get "$OUT" width)" = 64 ] || fail "inspect $p: the preview is not 64 pixels wide"
    json_get "$OUT" parameters | grep -qF sdtrain-demo || fail "inspect $p: the preview's prompt lacks the embedding name"
done
other_case "${settings[0]}" training-settings
other_case "$csv" loss-csv
[ "$(json_get "$OUT" rows)" = "$STEPS" ] || fail "inspect $csv: rows is not $STEPS"
[ "$(json_get "$OUT" last_step)" = "$STEPS" ] || fail "inspect $csv: last_step is not $STEPS"
# Anything else is one clear sentence, exit 1.
run_host inspect demo/demo_template.txt
expect_error "inspect a template" demo_template.txt "not an embedding file"
printf 'garbage' >demo/broken.safetensors
run_host inspect demo/broken.safetensors
expect_error "inspect a broken safetensors file" broken.safetensors
e2e_finish
