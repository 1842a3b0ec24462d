#!/usr/bin/env bash
# PyTorch files as users have them: a .ckpt single-file checkpoint (with a tokenizer/ folder beside it) and an
# A1111 .pt embedding, both written by the project's torch writer (e2e_torch). inspect reads the .pt; training
# it on the .ckpt writes the result as .safetensors beside the .pt, says so, leaves the .pt as it was, and gives
# the same losses, bit for bit, as the same run from the safetensors files.
source "$(dirname "$0")/e2e_lib.sh"

mkdir -p ckpt && cp -r "$MODEL/tokenizer" ckpt/tokenizer
"$E2E_TORCH" checkpoint "$MODEL" ckpt/model.ckpt || fail "e2e_torch checkpoint"
new_embedding emb cat 2
mkdir -p pt && "$E2E_TORCH" a1111-embedding emb/cat.safetensors pt/cat.pt || fail "e2e_torch a1111-embedding"

run_host inspect --json pt/cat.pt
expect_rc 0 "inspect a .pt"
[ "$(json_get "$OUT" format)" = a1111-pt ] || fail "inspect: format is '$(json_get "$OUT" format)'"
[ "$(json_get "$OUT" vectors)" = 2 ] || fail "inspect: the .pt does not have 2 vectors"

before=$(sha256sum pt/cat.pt)
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" --width 64 --height 64 --device cpu
        --seed "$SEED" --learn-rate 0.01 --max-steps 3 --save-every 0 --preview-every 0 --csv-every 1)
run_host train --embedding pt/cat.pt --model ckpt/model.ckpt --log-dir logs_pt "${common[@]}"
expect_rc 0 "train a .pt on a .ckpt"
grep -qF "pt/cat.pt is a PyTorch file: the trained embedding is written as pt/cat.safetensors" "$ERR" ||
    fail "training a .pt does not say where the result goes"
expect_file pt/cat.safetensors "the trained embedding beside the .pt"
[ "$before" = "$(sha256sum pt/cat.pt)" ] || fail "training changed the .pt"
run_host inspect --json pt/cat.safetensors
[ "$(json_get "$OUT" step)" = 3 ] || fail "the trained embedding's step is not 3"

run_host train --embedding emb/cat.safetensors --model "$MODEL" --log-dir logs_st "${common[@]}"
expect_rc 0 "train the safetensors twin"
loss_pt=$(tail -n +2 "$(run_folder logs_pt cat)/textual_inversion_loss.csv" | cut -d, -f1-5)
loss_st=$(tail -n +2 "$(run_folder logs_st cat)/textual_inversion_loss.csv" | cut -d, -f1-5)
[ -n "$loss_pt" ] && [ "$loss_pt" = "$loss_st" ] || fail "losses differ: .pt on .ckpt '$loss_pt', safetensors '$loss_st'"
e2e_finish
