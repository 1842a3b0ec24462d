#!/usr/bin/env bash
# Which hypernetwork sizes a model takes is told, not guessed: inspect on a model (diffusers folder
# or single file) lists them, and training a hypernetwork whose sizes match no attention of the
# model names the model's own attention widths and the sizes to create.
source "$(dirname "$0")/e2e_lib.sh"

for model in "$MODEL" "$MODEL/sdtrain-demo.safetensors"; do
    run_host inspect --json "$model"
    expect_rc 0 "inspect $model"
    [ "$(json_get "$OUT" hypernetwork_sizes)" = "[128,64]" ] ||
        fail "inspect $model: hypernetwork_sizes is '$(json_get "$OUT" hypernetwork_sizes)', not [128,64]"
    run_host inspect "$model"
    grep -qE '^hypernetwork sizes: +128, 64$' "$OUT" || fail "inspect $model (text) does not list the hypernetwork sizes"
done

run_host create-hypernetwork --name sd1 --sizes 768,320,640,1280 --out hn
expect_rc 0 "create an SD 1.x hypernetwork"
run_host train --hypernetwork hn/sd1.pt --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" \
    "${TRAIN_COMMON[@]}" --max-steps 1 --log-dir logs
expect_error "an SD 1.x hypernetwork on the demo model" "this model's attention widths are 128 (cross-attention context 128) and 64" \
    "sizes 128,64"
e2e_finish
