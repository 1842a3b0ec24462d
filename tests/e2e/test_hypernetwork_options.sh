#!/usr/bin/env bash
# `sdt-host train --hypernetwork`: its options on the command line and in a panel file, before any
# training. An option of the other method, a bad value or a missing required option is one
# sentence naming the option (or the file and key) and the fix; nothing is written but the logs'
# folders, and the hypernetwork and embedding files stay as they were.
source "$(dirname "$0")/e2e_lib.sh"

run_host create-hypernetwork --name hn --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork for the demo model"
new_embedding emb cat 1
keep_copy hn/hn.pt
keep_copy emb/cat.safetensors
HN_RUN=(train --hypernetwork hn/hn.pt --dataset "$DATASET" "${TRAIN_COMMON[@]}" --max-steps 1 --log-dir logs)

# Hypernetwork options without --hypernetwork, embedding-only options with it: usage errors naming both.
for opt in "--weight-decay 0.1" "--strength 0.5" "--embedding-learn-rate 0.01" "--preview-strength 2" \
           "--preview-hypernetworks hn/hn.pt:0.5"; do
    # shellcheck disable=SC2086 # option and value are separate words on purpose
    run_host train --embedding emb/cat.safetensors --dataset "$DATASET" "${TRAIN_COMMON[@]}" $opt
    expect_usage "$opt without --hypernetwork" "${opt%% *}" "--hypernetwork"
done
# ABI 1.4: the state's time interval and the joint embedding's cards and clipping are both methods'.
run_host "${HN_RUN[@]}" --save-state-every -1
expect_error "--save-state-every -1 with --hypernetwork" "--save-state-every"
run_host "${HN_RUN[@]}" --embedding emb/cat.safetensors --embedding-clip-mode norm
expect_error "--embedding-clip-mode without --embedding-clip-value" "--embedding-clip-mode" "--embedding-clip-value"
run_host "${HN_RUN[@]}" --embedding emb/cat.safetensors --embedding-clip-mode norm --embedding-clip-value "0.1:x"
expect_error "a bad --embedding-clip-value" "--embedding-clip-value:" "0.1:x"
# The preview chain (ABI 1.4): a file that does not exist and a strength out of range, each named.
run_host "${HN_RUN[@]}" --preview-every 1 --preview-hypernetworks "missing.pt:0.5"
expect_error "a missing --preview-hypernetworks file" "--preview-hypernetworks" "missing.pt"
run_host "${HN_RUN[@]}" --preview-every 1 --preview-strength 11
expect_error "--preview-strength 11" "--preview-strength"
for opt in "--embedding-clip-mode norm" "--embedding-clip-value 0.1"; do
    # shellcheck disable=SC2086 # option and value are separate words on purpose
    run_host train --embedding emb/cat.safetensors --dataset "$DATASET" "${TRAIN_COMMON[@]}" $opt
    expect_usage "$opt without --hypernetwork" "${opt%% *}" "--hypernetwork"
done

# Values: not a number is the host's sentence, out of range the plugin's, both naming the option.
run_host "${HN_RUN[@]}" --strength strong
expect_usage "--strength that is not a number" "--strength" "strong"
run_host "${HN_RUN[@]}" --weight-decay 2
expect_error "--weight-decay out of range" "--weight-decay" "0.01"
run_host "${HN_RUN[@]}" --strength 0
expect_error "--strength 0" "--strength"
run_host "${HN_RUN[@]}" --embedding emb/cat.safetensors --embedding-learn-rate ""
expect_error "joint training with an empty --embedding-learn-rate" "--embedding-learn-rate"
# The options both methods share are checked for a hypernetwork run too (train/train_options.c):
# one sentence naming the option; --preview-steps 0 with previews on is refused, never a crash.
for bad in "--tag-dropout 3" "--grad-accum 0" "--clip-skip 0" "--save-every -1" "--csv-every -5" \
    "--preview-cfg -1" "--preview-width 13" "--preview-sampler euler" "--batch-size 0"; do
    # shellcheck disable=SC2086 # option and value are separate words on purpose
    run_host "${HN_RUN[@]}" $bad
    expect_error "$bad with --hypernetwork" "${bad%% *}"
done
run_host "${HN_RUN[@]}" --preview-steps 0 --preview-every 1
expect_error "--preview-steps 0 with previews on" "--preview-steps" "1..1000"
# A bad schedule is named by its option, not as a learning rate schedule.
run_host "${HN_RUN[@]}" --clip-mode norm --clip-value "0.1:x"
expect_error "a bad --clip-value" "--clip-value:" "0.1:x"
grep -q "learning rate schedule" "$ERR" && fail "a bad --clip-value is called a learning rate schedule"
run_host "${HN_RUN[@]}" --embedding emb/cat.safetensors --embedding-learn-rate "0.005:3, fast"
expect_error "a bad --embedding-learn-rate" "--embedding-learn-rate:" "fast"
run_host train --hypernetwork hn/hn.pt "${TRAIN_COMMON[@]}"
expect_usage "--hypernetwork without --dataset" "--dataset"

# The panel file takes the same keys; a hypernetwork key picks the method, a wrong one names file and key.
cat >hn.ini <<INI
[train]
hypernetwork=hn/hn.pt
dataset=$DATASET
weight-decay=0.5x
INI
run_host train --config hn.ini "${TRAIN_COMMON[@]}"
expect_error "a bad weight-decay in the panel file" hn.ini weight-decay 0.5x
printf '[train]\nembedding=emb/cat.safetensors\nstrength=0.5\n' >emb.ini
run_host train --config emb.ini --dataset "$DATASET" "${TRAIN_COMMON[@]}"
expect_error "strength= in an embedding's panel file" emb.ini strength "--hypernetwork"
printf '[train]\nhypernetwork=\n' >empty.ini
run_host train --config empty.ini --dataset "$DATASET" "${TRAIN_COMMON[@]}"
expect_usage "an empty hypernetwork= in the panel file" "--hypernetwork FILE is required"

expect_untouched hn/hn.pt "refused hypernetwork runs"
expect_untouched emb/cat.safetensors "refused hypernetwork runs"
written=$(find . -name '*.tmp-*' -o -name '*.state.safetensors' -o -name '*.csv')
[ -z "$written" ] || fail "refused runs wrote files: $written"
e2e_finish
