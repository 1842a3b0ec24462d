#!/usr/bin/env bash
# The panel's two tabs from the terminal: create-embedding with every option, then train with
# the Train-tab options, in each precision.
source "$(dirname "$0")/e2e_lib.sh"

VECTORS=$((1 + SEED % 4))
run_host create-embedding --name "my cat" --init-text "a photo of a cat" --vectors "$VECTORS" --model "$MODEL" --out emb
expect_rc 0 "create-embedding"
emb="emb/my cat.safetensors"
expect_file "$emb" "created embedding"
grep -qF "Created: $emb" "$OUT" || fail "create-embedding does not print 'Created: $emb'"
run_host inspect --json "$emb"
[ "$(json_get "$OUT" vectors)" = "$VECTORS" ] || fail "the new embedding does not have $VECTORS vectors"
[ "$(json_get "$OUT" step)" = 0 ] || fail "the new embedding's step is not 0"
[ "$(json_get "$OUT" init_text)" = "a photo of a cat" ] || fail "the init text is not recorded"
[ "$(json_get "$OUT" finite)" = true ] || fail "the new embedding is not finite"

# --overwrite replaces it; an empty init text gives zero vectors.
run_host create-embedding --name "my cat" --init-text "" --vectors 3 --model "$MODEL" --out emb --overwrite
expect_rc 0 "create-embedding --overwrite"
run_host inspect --json "$emb"
[ "$(json_get "$OUT" vectors)" = 3 ] || fail "--overwrite did not replace the embedding"
[ "$(json_get "$OUT" norms)" = "[0,0,0]" ] || fail "empty init text: norms are $(json_get "$OUT" norms), expected zeros"
# --out defaults to ./embeddings, created when missing.
run_host create-embedding --name dog --model "$MODEL"
expect_rc 0 "create-embedding without --out"
expect_file embeddings/dog.safetensors "create-embedding default folder"

# Train each precision for a few steps with batches and accumulation.
for precision in fp32 fp16 bf16; do
    name=cat_$precision
    new_embedding "emb_$precision" "$name" 2
    e=emb_$precision/$name.safetensors
    run_host train --embedding "$e" --dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" \
        "${TRAIN_COMMON[@]}" --learn-rate "0.01:2, 0.002" --batch-size 2 --grad-accum 2 --max-steps 4 \
        --log-dir "logs_$precision" --precision "$precision" --save-every 2 --preview-every 0 --csv-every 1
    expect_rc 0 "train --precision $precision"
    run=$(run_folder "logs_$precision" "$name")
    csv=$run/textual_inversion_loss.csv
    [ "$(csv_last_step "$csv")" = 4 ] || fail "$precision: the CSV does not end at step 4"
    lrs=$(tail -n +2 "$csv" | cut -d, -f5 | tr '\n' ' ')
    [ "$lrs" = "0.01 0.01 0.002 0.002 " ] || fail "$precision: the learning rates per step are '$lrs'"
    cut -d, -f8 "$csv" | tail -n +2 | grep -qv "^$precision\$" && [ "$precision" != fp32 ] &&
        echo "note: $precision switched precision during the run (the fallback fired)"
    expect_file "$run/embeddings/$name-2.safetensors" "$precision snapshot at step 2"
    [ ! -e "$run/images/$name-2.png" ] || fail "$precision: --preview-every 0 still wrote a preview"
    settings=("$run"/settings-*.json)
    [ "$(json_get "${settings[0]}" batch_size)" = 2 ] || fail "$precision: settings batch_size"
    [ "$(json_get "${settings[0]}" gradient_step)" = 2 ] || fail "$precision: settings gradient_step"
    [ "$(json_get "${settings[0]}" precision)" = "$precision" ] || fail "$precision: settings precision"
    run_host inspect --json "$e"
    [ "$(json_get "$OUT" step)" = 4 ] || fail "$precision: the trained embedding's step is not 4"
    [ "$(json_get "$OUT" finite)" = true ] || fail "$precision: the trained embedding is not finite"
    [ -n "$(json_get "$OUT" sd_checkpoint)" ] || fail "$precision: no checkpoint hash in the trained embedding"
done
# The trained vectors moved away from the created ones.
cmp -s emb_fp32/cat_fp32.safetensors "$(run_folder logs_fp32 cat_fp32)/embeddings/cat_fp32-2.safetensors" &&
    fail "fp32: the step-4 embedding equals the step-2 snapshot"
e2e_finish
