#!/usr/bin/env bash
# `--template NAME`: a bare file name that is not a file here is looked up among the templates
# installed beside sdt-host (as the Train tab's dropdown lists them); a path always wins, and
# an unknown name is a clear error that names the folders searched.
source "$(dirname "$0")/e2e_lib.sh"

new_embedding emb cat 1
common=(--embedding emb/cat.safetensors --dataset "$DATASET" "${TRAIN_COMMON[@]}" --max-steps 2
        --save-every 0 --preview-every 0)
run_host train "${common[@]}" --template style_filewords.txt --log-dir logs
expect_rc 0 "--template style_filewords.txt (bare name)"
settings=("$(run_folder logs cat)"/settings-*.json)
used=$(json_get "${settings[0]}" template_file)
[ "$(basename "$used")" = style_filewords.txt ] && [ -f "$used" ] ||
    fail "the run's template_file is '$used', not the installed style_filewords.txt"

# A file of that name in the current folder wins over the installed one.
printf 'a drawing of [name]\n' >style_filewords.txt
run_host train "${common[@]}" --max-steps 4 --template style_filewords.txt --log-dir logs_local
expect_rc 0 "--template with a local file of that name"
settings=("$(run_folder logs_local cat)"/settings-*.json)
[ "$(json_get "${settings[0]}" template_file)" = style_filewords.txt ] ||
    fail "the local style_filewords.txt did not win: $(json_get "${settings[0]}" template_file)"

keep_copy emb/cat.safetensors
run_host train "${common[@]}" --max-steps 6 --template no_such_template.txt --log-dir logs_bad
expect_error "unknown template name" no_such_template.txt templates
expect_untouched emb/cat.safetensors "unknown template name"
e2e_finish
