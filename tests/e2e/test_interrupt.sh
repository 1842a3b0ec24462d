#!/usr/bin/env bash
# Ctrl-C mid-run is the Interrupt button: the step in flight finishes, the embedding and the
# training state are saved, sdt-host exits 130 promptly, and the saved run resumes. A second
# Ctrl-C quits at once, and the embedding file is still whole (saves are atomic).
source "$(dirname "$0")/e2e_lib.sh"

# start_training NAME: a long run of emb/NAME.safetensors in the background (PID in $pid).
start_training() {
    set -m # job control: the background sdt-host gets SIGINT like a foreground program would
    "$SDT_HOST" train --embedding "emb/$1.safetensors" --dataset "$DATASET" --template "$SDT_TEMPLATES/style.txt" \
        "${TRAIN_COMMON[@]}" --max-steps 100000 --save-every 2 --preview-every 0 --csv-every 1 --log-dir logs \
        </dev/null >"$1.out" 2>"$1.err" &
    pid=$!
    set +m
}
# wait_for_step NAME N: until the run's CSV shows step N (up to 60 s).
wait_for_step() {
    local i step
    for ((i = 0; i < 600; i++)); do
        step=$(csv_last_step "$(run_folder logs "$1")/textual_inversion_loss.csv")
        [ -n "$step" ] && [ "$step" -ge "$2" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# wait_gone WHAT: the process ends within 30 s (one step and the saves on a loaded machine); sets RC.
wait_gone() {
    local i
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "$1: sdt-host is still running 30 s after Ctrl-C"
        kill -KILL "$pid"
    fi
    wait "$pid"
    RC=$?
}

new_embedding emb cat 2
start_training cat
wait_for_step cat 3 || fail "the run did not reach step 3: $(tail -n 3 cat.err)"
kill -INT "$pid" 2>/dev/null || fail "sdt-host ended before Ctrl-C: $(tail -n 3 cat.err)"
wait_gone "Ctrl-C"
ERR=$WORK/cat.err
LAST_CMD="sdt-host train ... (interrupted)"
expect_rc 130 "Ctrl-C"
grep -qi "interrupt" cat.err || fail "sdt-host did not say it was interrupted"

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

# Ctrl-C twice: sdt-host quits at once; the embedding file is the old one or a new one, whole.
new_embedding emb dog 2
start_training dog
wait_for_step dog 2 || fail "the second run did not reach step 2: $(tail -n 3 dog.err)"
kill -INT "$pid" 2>/dev/null
sleep 0.05
kill -INT "$pid" 2>/dev/null
wait_gone "Ctrl-C twice"
[ "$RC" = 130 ] || fail "Ctrl-C twice: exit status $RC, expected 130 (killed by SIGINT or interrupted)"
run_host inspect --json emb/dog.safetensors
expect_rc 0 "inspect the embedding after Ctrl-C twice"
[ "$(json_get "$OUT" finite)" = true ] || fail "the embedding is not finite after Ctrl-C twice"
e2e_finish
