#!/usr/bin/env bash
# Ctrl-C mid-run is the Interrupt button: the step in flight finishes, the embedding and the
# training state are saved, sdt-host exits 130 promptly, and the saved run resumes. SIGTERM and
# SIGHUP do the same (exit 143 and 129). Two SIGINTs in the same instant are one request; a
# second Ctrl-C a moment later quits at once, and the embedding file is still whole (saves are atomic).
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

# SIGTERM (docker stop, systemd, kill) and SIGHUP (a closed terminal) are the Interrupt button too: the step
# finishes, everything is saved, and the exit status is 128 + the signal, as a shell reports it.
for sig in TERM:143 HUP:129; do
    name=${sig%%:*} want=${sig#*:}
    new_embedding emb "sig$name" 2
    start_training "sig$name"
    wait_for_step "sig$name" 2 || fail "the SIG$name run did not reach step 2: $(tail -n 3 "sig$name.err")"
    kill "-$name" "$pid" 2>/dev/null || fail "sdt-host ended before SIG$name"
    wait_gone "SIG$name"
    ERR=$WORK/sig$name.err
    LAST_CMD="sdt-host train ... (SIG$name)"
    expect_rc "$want" "SIG$name"
    grep -q "SIG$name: interrupting" "sig$name.err" || fail "SIG$name: sdt-host did not say it was interrupting"
    grep -q "the training state was saved" "sig$name.err" || fail "SIG$name: the run did not say its state was saved"
    expect_file "$(run_folder logs "sig$name")/sig$name.state.safetensors" "the training state after SIG$name"
    run_host inspect --json "emb/sig$name.safetensors"
    [ "$(json_get "$OUT" step)" -ge 2 ] 2>/dev/null || fail "SIG$name: the embedding was not saved at the step reached"
done

# Steps made slow (the test build's SDTRAIN_TEST_STEP_DELAY_MS), so signals arrive while one is in flight.
start_slow_training() {
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_TEST_STEP_DELAY_MS=$2 start_training "$1"
}

# Two SIGINTs in the same instant (a process-group signal from `timeout` or a supervisor reaches the process
# twice) are one request: the step finishes and everything is saved.
new_embedding emb pair 2
start_slow_training pair 1500
wait_for_step pair 1 || fail "the slow run did not reach step 1: $(tail -n 3 pair.err)"
kill -INT "$pid" 2>/dev/null
kill -INT "$pid" 2>/dev/null
wait_gone "two SIGINTs at once"
ERR=$WORK/pair.err
LAST_CMD="sdt-host train ... (two SIGINTs at once)"
expect_rc 130 "two SIGINTs at once"
grep -q "Quit at once" pair.err && fail "two SIGINTs in the same instant quit at once instead of saving"
grep -q "the training state was saved" pair.err || fail "two SIGINTs at once: the run did not say its state was saved"

# Ctrl-C, and again a moment later while the step is still in flight: sdt-host quits at once; the embedding
# file is the old one or a new one, whole.
new_embedding emb dog 2
start_slow_training dog 4000
wait_for_step dog 1 || fail "the slow run did not reach step 1: $(tail -n 3 dog.err)"
kill -INT "$pid" 2>/dev/null
sleep 1
kill -INT "$pid" 2>/dev/null
wait_gone "Ctrl-C twice"
ERR=$WORK/dog.err
[ "$RC" = 130 ] || fail "Ctrl-C twice: exit status $RC, expected 130"
grep -q "Quit at once" dog.err || { fail "Ctrl-C pressed again a moment later did not quit at once"; show_stderr; }
run_host inspect --json emb/dog.safetensors
expect_rc 0 "inspect the embedding after Ctrl-C twice"
[ "$(json_get "$OUT" finite)" = true ] || fail "the embedding is not finite after Ctrl-C twice"
e2e_finish
