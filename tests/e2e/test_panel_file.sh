#!/usr/bin/env bash
# `sdt-host train --config panel.ini`: the panel file sets the options, the command line
# overrides them; a bad key or value in the file is a clear error naming the file and key.
source "$(dirname "$0")/e2e_lib.sh"

new_embedding emb cat 2
cat >panel.ini <<INI
# A saved Train tab
[train]
embedding=emb/cat.safetensors
dataset=$DATASET
template=$SDT_TEMPLATES/style_filewords.txt
model=$MODEL
learn-rate=0.004
batch-size=2
max-steps=50
log-dir=from_file
width=64
height=64
device=cpu
seed=$SEED
save-every=0
preview-every=0
csv-every=1
INI
keep_copy emb/cat.safetensors
# Overrides: fewer steps, another log folder, another rate.
run_host train --config panel.ini --max-steps 3 --log-dir from_cli --learn-rate 0.02
expect_rc 0 "train --config with overrides"
[ ! -e from_file ] || fail "the panel file's log-dir was used although --log-dir overrode it"
csv=$(run_folder from_cli cat)/textual_inversion_loss.csv
[ "$(csv_last_step "$csv")" = 3 ] || fail "--max-steps 3 did not override max-steps=50 (last step '$(csv_last_step "$csv")')"
[ "$(tail -n 1 "$csv" | cut -d, -f5)" = 0.02 ] || fail "--learn-rate did not override the panel file"
[ "$(grep -c . "$csv")" = 4 ] || fail "batch-size/csv-every from the file: expected 3 rows"
settings=("$(run_folder from_cli cat)"/settings-*.json)
[ "$(json_get "${settings[0]}" batch_size)" = 2 ] || fail "batch-size=2 from the panel file was not used"
run_host inspect --json emb/cat.safetensors
[ "$(json_get "$OUT" step)" = 3 ] || fail "the embedding was not trained to step 3"

# Errors in the file name the file and the key (exit 1); the embedding stays as it was.
keep_copy emb/cat.safetensors
printf '[train]\nmax-steps=ten\n' >bad_value.ini
run_host train --config bad_value.ini
expect_error "bad value in the panel file" bad_value.ini max-steps
printf '[train]\nmax-stepz=10\n' >bad_key.ini
run_host train --config bad_key.ini
expect_error "unknown key in the panel file" bad_key.ini max-stepz
printf 'max-steps=10\n' >no_group.ini
run_host train --config no_group.ini
expect_error "panel file without [train]" no_group.ini "[train]"
run_host train --config missing.ini
expect_error "missing panel file" missing.ini
expect_untouched emb/cat.safetensors "panel file errors"
e2e_finish
