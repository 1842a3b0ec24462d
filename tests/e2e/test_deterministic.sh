#!/usr/bin/env bash
# --deterministic (ABI 1.6, sdt_train_options.deterministic) through sdt-host on the demo model:
# --help lists it; on the command line (an embedding run) and as a panel-file key (a hypernetwork
# run) it reaches the job, whose settings file then names it, and a run without it names nothing;
# the CPU is deterministic either way (both embeddings equal, byte for byte) and its log says
# nothing of attention kernels. On a usable GPU (else skipped) the model's log line says which
# attention backward runs.
source "$(dirname "$0")/e2e_lib.sh"

run_host train --help
expect_rc 0 "train --help"
grep -qF -- "--deterministic" "$OUT" || fail "train --help does not list --deterministic"

common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" --max-steps 2 --save-every 0 --preview-every 0)
for d in on off; do new_embedding "$d" cat 1; done
run_host train "${common[@]}" --embedding on/cat.safetensors --log-dir on/logs --deterministic
expect_rc 0 "train with --deterministic"
grep -q "attention backward" "$ERR" && fail "the CPU run's log speaks of attention kernels"
settings=$(ls "$(run_folder on/logs cat)"/settings-*.json 2>/dev/null | head -n 1)
[ "$(json_get "$settings" deterministic)" = "true" ] || fail "the settings file does not say deterministic: $(cat "$settings")"
run_host train "${common[@]}" --embedding off/cat.safetensors --log-dir off/logs
expect_rc 0 "train without --deterministic"
settings=$(ls "$(run_folder off/logs cat)"/settings-*.json 2>/dev/null | head -n 1)
grep -q '"deterministic"' "$settings" && fail "a run without --deterministic names it in its settings: $(cat "$settings")"
cmp -s on/cat.safetensors off/cat.safetensors || fail "on the CPU the two runs differ (it is always deterministic)"

# the panel file's key, for a hypernetwork
run_host create-hypernetwork --name hn --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork for the demo model"
printf '[train]\ndeterministic=true\n' >panel.ini
run_host train --hypernetwork hn/hn.pt --config panel.ini "${common[@]}" --log-dir hn/logs
expect_rc 0 "train a hypernetwork with deterministic=true in a panel file"
settings=$(ls "$(run_folder hn/logs hn)"/settings-*.json 2>/dev/null | head -n 1)
[ "$(json_get "$settings" deterministic)" = "true" ] || fail "the panel key did not reach the hypernetwork run: $(cat "$settings")"

# on a GPU, when one is usable: the log line that describes the model's placement names the kernels
new_embedding gpu cat 1
run_host train "${common[@]}" --device cuda --precision fp16 --embedding gpu/cat.safetensors --log-dir gpu/logs
if [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
    echo "no usable GPU: the CUDA runs are skipped"
else
    expect_rc 0 "train on the GPU"
    grep -qF "attention backward: cuDNN's fused kernels" "$ERR" || { fail "the GPU log does not name cuDNN's kernels"; show_stderr; }
    run_host train "${common[@]}" --device cuda --precision fp16 --embedding gpu/cat.safetensors --log-dir gpu/logs2 --deterministic
    expect_rc 0 "train on the GPU with --deterministic"
    grep -qF "attention backward: deterministic kernels" "$ERR" || { fail "the GPU log does not say deterministic"; show_stderr; }
fi
e2e_finish
