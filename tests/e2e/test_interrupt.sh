#!/usr/bin/env bash
# Ctrl-C mid-run is the Interrupt button: the step in flight finishes, the embedding and the
# training state are saved, sdt-host exits 130 promptly, and the saved run resumes.
source "$(dirname "$0")/e2e_lib.sh"

new_embedding emb cat 2
set -m # job control: the background sdt-host gets SIGINT like a foreground program would
"$SDT_HOST" train --embedding emb/cat.safetensors --dataset "$DATASET" --template "$SDT_TEMPLATES/style.txt" \
    "${TRAIN_COMMON[@]}" --max-steps 100000 --save-every 2 --preview-every 0 --csv-every 1 --log-dir logs \
    </dev/null >out.txt 2>err.txt &
pid=$!
set +m
csv=$(run_folder logs cat)/textual_inversion_loss.csv
# Wait (up to 60 s) until a few steps are in the CSV.
for ((i = 0; i < 600; i++)); do
    csv=$(run_folder logs cat)/textual_inversion_loss.csv
    step=$(csv_last_step "$csv")
    [ -n "$step" ] && [ "$step" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -INT "$pid" 2>/dev/null || fail "sdt-host ended before Ctrl-C: $(tail -n 3 err.txt)"
# It must be gone promptly: one step and the saves (allow 30 s on a loaded machine).
for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
    fail "sdt-host is still running 30 s after Ctrl-C"
    kill -KILL "$pid"
fi
wait "$pid"
RC=$?
ERR=$WORK/err.txt
LAST_CMD="sdt-host train ... (interrupted)"
expect_rc 130 "Ctrl-C"
grep -qi "interrupt" err.txt || fail "sdt-host did not say it was interrupted"

run=$(run_folder logs cat)
state=$run/cat.state.safetensors
expect_file emb/cat.safetensors "the embedding after Ctrl-C"
expect_file "$state" "the training state after Ctrl-C"
last=$(csv_last_step "$run/textual_inversion_loss.csv")
run_host inspect --json emb/cat.safetensors
expect_rc 0 "inspect the interrupted embedding"
saved=$(json_get "$OUT" step)
[ "$(json_get "$OUT" finite)" = true ] || fail "the interrupted embedding is not finite"
[ "$saved" -ge 3 ] && [ "$saved" -lt 100000 ] || fail "the interrupted embedding's step is $saved"
[ "$saved" = "$last" ] || fail "the embedding was saved at step $saved but the CSV ends at step $last"
run_host inspect --json "$state"
expect_rc 0 "inspect the state after Ctrl-C"
[ "$(json_get "$OUT" step)" = "$saved" ] || fail "the state's step $(json_get "$OUT" step) differs from the embedding's $saved"
leftovers=$(find . -name '*.tmp-*')
[ -z "$leftovers" ] || fail "temporary files were left behind: $leftovers"

# The interrupted run resumes from its state and finishes.
run_host train --embedding emb/cat.safetensors --dataset "$DATASET" --template "$SDT_TEMPLATES/style.txt" \
    "${TRAIN_COMMON[@]}" --max-steps $((saved + 2)) --save-every 0 --preview-every 0 --csv-every 1 --log-dir logs \
    --resume "$state"
expect_rc 0 "resume after Ctrl-C"
[ "$(csv_last_step "$run/textual_inversion_loss.csv")" = $((saved + 2)) ] || fail "the resumed run did not reach step $((saved + 2))"
e2e_finish
