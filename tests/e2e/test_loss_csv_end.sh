#!/usr/bin/env bash
# Every run ends with its last step's row in the loss CSV, whatever --csv-every says: a short run
# under the default (500) still writes one row, a run whose last step was already written has no
# duplicate, and Ctrl-C writes the step it stopped at.
source "$(dirname "$0")/e2e_lib.sh"

common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}"
        --save-every 0 --preview-every 0)
csv_steps() { tail -n +2 "$1" 2>/dev/null | cut -d, -f1 | tr '\n' ' '; }

# A short run with the default --csv-every.
new_embedding short cat 1
run_host train "${common[@]}" --embedding short/cat.safetensors --max-steps 3 --log-dir short/logs
expect_rc 0 "train 3 steps with the default --csv-every"
steps=$(csv_steps "$(run_folder short/logs cat)/textual_inversion_loss.csv")
[ "$steps" = "3 " ] || fail "a 3-step run's loss CSV holds the steps '$steps', not '3 '"

# The last step on the interval is written once; one off the interval is added at the end.
new_embedding even cat 1
run_host train "${common[@]}" --embedding even/cat.safetensors --max-steps 4 --csv-every 2 --log-dir even/logs
expect_rc 0 "train 4 steps, a row every 2"
steps=$(csv_steps "$(run_folder even/logs cat)/textual_inversion_loss.csv")
[ "$steps" = "2 4 " ] || fail "4 steps with --csv-every 2 wrote the steps '$steps', not '2 4 '"
new_embedding odd cat 1
run_host train "${common[@]}" --embedding odd/cat.safetensors --max-steps 5 --csv-every 2 --log-dir odd/logs
expect_rc 0 "train 5 steps, a row every 2"
steps=$(csv_steps "$(run_folder odd/logs cat)/textual_inversion_loss.csv")
[ "$steps" = "2 4 5 " ] || fail "5 steps with --csv-every 2 wrote the steps '$steps', not '2 4 5 '"

# Ctrl-C: the step the run stopped at is the CSV's last row. Progress is watched through the
# copies (--save-every 1), as the CSV is not written before the end.
new_embedding stop cat 1
set -m # job control: the background sdt-host gets SIGINT like a foreground program would
"$SDT_HOST" train "${common[@]}" --embedding stop/cat.safetensors --max-steps 100000 --csv-every 1000 \
    --save-every 1 --log-dir stop/logs </dev/null >stop.out 2>stop.err &
pid=$!
set +m
for ((i = 0; i < 600; i++)); do
    [ -n "$(find stop/logs -name 'cat-2.*' 2>/dev/null)" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -INT "$pid" 2>/dev/null || fail "sdt-host ended before Ctrl-C: $(tail -n 3 stop.err)"
for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { fail "sdt-host still runs 30 s after Ctrl-C"; kill -KILL "$pid"; }
wait "$pid"
[ $? = 130 ] || fail "Ctrl-C did not end the run with exit status 130: $(tail -n 3 stop.err)"
run_host inspect --json stop/cat.safetensors
saved=$(json_get "$OUT" step)
steps=$(csv_steps "$(run_folder stop/logs cat)/textual_inversion_loss.csv")
[ -n "$saved" ] && [ "$steps" = "$saved " ] ||
    fail "the interrupted run (saved at step '$saved') wrote the CSV steps '$steps', not its last step once"
e2e_finish
