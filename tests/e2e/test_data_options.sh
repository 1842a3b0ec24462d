#!/usr/bin/env bash
# The data options --flip, --caption-dropout and --keep-tokens on the demo model: resume stays bit
# exact with all of them on (their draws are functions of the seed and the sample's use); --flip
# changes what is learned; --caption-dropout 1 trains every sample on the empty prompt, which has no
# [name] in it, so the embedding gets no gradient and stays exactly as created; bad values are one
# sentence naming the option.
source "$(dirname "$0")/e2e_lib.sh"

for d in straight split noflip dropped; do new_embedding "$d" cat 2; done
cp dropped/cat.safetensors initial.safetensors
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}"
        --learn-rate "0.01:4, 0.003" --batch-size 2 --grad-accum 2 --shuffle-tags --keep-tokens 1 --tag-dropout 0.1
        --caption-dropout 0.3 --latent-sampling random --save-every 0 --preview-every 0 --csv-every 1)
run_host train "${common[@]}" --flip --embedding straight/cat.safetensors --max-steps 6 --log-dir straight/logs
expect_rc 0 "train 6 steps with the data options"
run_host train "${common[@]}" --flip --embedding split/cat.safetensors --max-steps 3 --log-dir split/logs
expect_rc 0 "train 3 steps"
state=$(run_folder split/logs cat)/cat.state.safetensors
run_host train "${common[@]}" --flip --embedding split/cat.safetensors --max-steps 6 --log-dir split/logs --resume "$state"
expect_rc 0 "resume to 6 steps"
settings=$(ls "$(run_folder straight/logs cat)"/settings-*.json | head -n 1)
[ "$(json_get "$settings" flip)" = "true" ] && [ "$(json_get "$settings" keep_tokens)" = "1" ] &&
    [ "$(json_get "$settings" caption_dropout)" = "0.29999999999999999" ] ||
    fail "the settings file does not name the data options: $(cat "$settings")"
cmp -s split/cat.safetensors straight/cat.safetensors ||
    fail "with --flip, --caption-dropout and --keep-tokens the resumed embedding differs from the uninterrupted one"
cmp -s <(cut -d, -f1-6 "$(run_folder straight/logs cat)/textual_inversion_loss.csv") \
       <(cut -d, -f1-6 "$(run_folder split/logs cat)/textual_inversion_loss.csv") ||
    fail "the loss CSVs of the straight and the resumed runs differ"

run_host train "${common[@]}" --embedding noflip/cat.safetensors --max-steps 6 --log-dir noflip/logs
expect_rc 0 "train 6 steps without --flip"
[ "$(emb_diff noflip/cat.safetensors straight/cat.safetensors)" = "0" ] && fail "--flip changed nothing"

run_host train "${common[@]}" --caption-dropout 1 --embedding dropped/cat.safetensors --max-steps 3 --log-dir dropped/logs
expect_rc 0 "train with --caption-dropout 1"
d=$(emb_diff dropped/cat.safetensors initial.safetensors)
[ "$d" = "0" ] || fail "--caption-dropout 1 (every prompt empty, no [name]) still moved the embedding by $d"

run_host train "${common[@]}" --caption-dropout 1.5 --embedding noflip/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--caption-dropout 1.5" "--caption-dropout" "between 0 and 1"
run_host train "${common[@]}" --keep-tokens 5000 --embedding noflip/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--keep-tokens 5000" "--keep-tokens"
[ -e bad/logs ] && fail "a refused run wrote into its log folder"
e2e_finish
