#!/usr/bin/env bash
# Resume is exact: training 6 steps equals training 3, then `train --resume STATE` to 6, bit for
# bit on the CPU with the same seed, with batches, accumulation, a schedule that changes rate
# after the resume point, tag shuffling and random latent sampling in play.
source "$(dirname "$0")/e2e_lib.sh"

for d in straight split; do new_embedding "$d" cat 2; done
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}"
        --learn-rate "0.01:4, 0.003" --batch-size 2 --grad-accum 2 --shuffle-tags --tag-dropout 0.1
        --latent-sampling random --save-every 0 --preview-every 0 --csv-every 1)
run_host train "${common[@]}" --embedding straight/cat.safetensors --max-steps 6 --log-dir straight/logs
expect_rc 0 "train 6 steps"
run_host train "${common[@]}" --embedding split/cat.safetensors --max-steps 3 --log-dir split/logs
expect_rc 0 "train 3 steps"
state=$(run_folder split/logs cat)/cat.state.safetensors
expect_file "$state" "the state after 3 steps"
run_host train "${common[@]}" --embedding split/cat.safetensors --max-steps 6 --log-dir split/logs --resume "$state"
expect_rc 0 "resume to 6 steps"

if ! cmp split/cat.safetensors straight/cat.safetensors; then
    fail "the resumed embedding differs from the uninterrupted one"
    diff <(tail -n +2 "$(run_folder straight/logs cat)/textual_inversion_loss.csv") \
         <(tail -n +2 "$(run_folder split/logs cat)/textual_inversion_loss.csv") >&2
fi
# The resumed run's CSV continues the first one: steps 1..6 once each, with the straight run's
# epochs, losses, rates and gradient norms (columns 1-6; timing columns may differ).
cmp -s <(cut -d, -f1-6 "$(run_folder straight/logs cat)/textual_inversion_loss.csv") \
       <(cut -d, -f1-6 "$(run_folder split/logs cat)/textual_inversion_loss.csv") ||
    fail "the loss CSVs of the straight and the resumed runs differ"

# A state from another embedding is refused, naming the state file.
new_embedding other dog 2
run_host train "${common[@]}" --embedding other/dog.safetensors --max-steps 6 --log-dir other/logs --resume "$state"
expect_error "resume with another embedding's state" cat.state.safetensors
e2e_finish
