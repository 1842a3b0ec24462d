#!/usr/bin/env bash
# A1111's <stem>.yaml beside a single-file checkpoint, through sdt-host: the demo model as a .ckpt
# with model.yaml beside it saying parameterization "v". inspect names the yaml and says v; a run
# logs v and names the yaml; --epsilon still wins, the log naming the yaml it overrules; a yaml with a tab is refused naming the file
# and the line, by train and by inspect.
source "$(dirname "$0")/e2e_lib.sh"

mkdir -p ckpt && cp -r "$MODEL/tokenizer" ckpt/tokenizer
"$E2E_TORCH" checkpoint "$MODEL" ckpt/model.ckpt || fail "e2e_torch checkpoint"
printf 'model:\n  target: ldm.models.diffusion.ddpm.LatentDiffusion\n  params:\n    parameterization: "v"\n' > ckpt/model.yaml

run_host inspect --json ckpt/model.ckpt
expect_rc 0 "inspect a checkpoint"
[ "$(json_get "$OUT" kind)" = "model checkpoint" ] || fail "inspect: kind is '$(json_get "$OUT" kind)'"
[ "$(json_get "$OUT" config_file)" = ckpt/model.yaml ] || fail "inspect: config_file is '$(json_get "$OUT" config_file)'"
[ "$(json_get "$OUT" prediction)" = v ] || fail "inspect: prediction is '$(json_get "$OUT" prediction)'"
run_host inspect ckpt/model.ckpt
expect_rc 0 "inspect a checkpoint (text)"
grep -qE '^prediction decided by: +ckpt/model.yaml \(model.params.parameterization: "v"\)$' "$OUT" ||
    fail "inspect's text does not name the yaml in a key: value line"
grep -q '^[{}]' "$OUT" && fail "inspect's text prints the model as raw JSON"

new_embedding emb cat 2
common=(--embedding emb/cat.safetensors --model ckpt/model.ckpt --dataset "$DATASET"
        --template "$SDT_TEMPLATES/subject_filewords.txt" --width 64 --height 64 --device cpu --seed "$SEED"
        --learn-rate 0.01 --save-every 0 --preview-every 0)
run_host train "${common[@]}" --log-dir logs_v --max-steps 1
expect_rc 0 "train with parameterization v beside the checkpoint"
grep -qF "the model predicts v (ckpt/model.yaml beside the checkpoint" "$ERR" || fail "the log does not say the yaml decided v"
run_host train "${common[@]}" --log-dir logs_eps --max-steps 2 --epsilon
expect_rc 0 "train with --epsilon over the yaml"
grep -qF "predicts the noise (epsilon) (as asked, over ckpt/model.yaml beside the checkpoint, which says v)" "$ERR" ||
    fail "--epsilon does not win over the yaml, or the log does not say so"

printf 'model:\n  params:\n\tparameterization: v\n' > ckpt/model.yaml
run_host train "${common[@]}" --log-dir logs_bad --max-steps 3
expect_error "train with a yaml that cannot be parsed" "ckpt/model.yaml: line 3: a tab indents this line" "spaces"
run_host inspect ckpt/model.ckpt
expect_error "inspect with a yaml that cannot be parsed" "ckpt/model.yaml: line 3" "tab"
e2e_finish
