#!/usr/bin/env bash
# `sdt-host train --hypernetwork` on the demo model, one case per run (the argument):
#   train      create-hypernetwork, train 3 steps: the file and its .safetensors twin hold step 3, its widths, new
#              weights; the copy at step 2 and the loss CSV
#   interrupt  Ctrl-C mid-run saves the hypernetwork and the state (exit 130); --resume continues to the end
#   joint      --hypernetwork with --embedding trains both: each file written, each at the run's last step
#   torch      the trained .pt loads with torch.load(weights_only=True) under /usr/bin/python3 with A1111's keys
source "$(dirname "$0")/e2e_lib.sh"
case_name=${1:?usage: test_hypernetwork_train.sh train|interrupt|joint|torch}

TEMPLATE=(--template "$SDT_TEMPLATES/style.txt")
QUIET=(--save-every 0 --preview-every 0 --csv-every 1 --log-dir logs)

# A hypernetwork for the demo model: cross-attention 128 wide, self-attention at 64.
run_host create-hypernetwork --name style --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork for the demo model"
keep_copy hn/style.pt

# hn_step FILE: the step inspect --json reports for a hypernetwork or embedding file.
hn_step() {
    run_host inspect --json "$1"
    json_get "$OUT" step
}

case $case_name in
train)
    run_host train --hypernetwork hn/style.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" --max-steps 3 \
        "${QUIET[@]}" --save-every 2
    expect_rc 0 "train a hypernetwork 3 steps"
    expect_file "$(run_folder logs style)/hypernetworks/style-2.pt" "the copy at step 2"
    [ "$(hn_step "$(run_folder logs style)/style.safetensors")" = 3 ] || fail "the .safetensors twin in the run folder is not at step 3"
    [ -e hn/style.safetensors ] && fail "a .safetensors twin beside the .pt (ComfyUI lists it but cannot apply it)"
    [ "$(hn_step hn/style.pt)" = 3 ] || fail "the trained hypernetwork's step is '$(json_get "$OUT" step)', expected 3"
    [ "$(json_get "$OUT" all_finite)" = true ] || fail "the trained hypernetwork is not finite"
    run_host inspect hn/style.pt
    grep -qE '^modules: +128, 64$' "$OUT" || fail "inspect: the trained file's modules are not 128, 64"
    grep -qE '^step: +3$' "$OUT" || fail "inspect: the trained file's step is not 3"
    cmp -s hn/style.pt hn/style.pt.before && fail "training left the hypernetwork's file as it was created"
    csv=$(run_folder logs style)/hypernetwork_loss.csv
    [ "$(csv_last_step "$csv")" = 3 ] || fail "hypernetwork_loss.csv does not end at step 3 ('$(csv_last_step "$csv")')"
    # The run's state through inspect: the hypernetwork it pairs with, not an embedding reader's guess.
    state=$(run_folder logs style)/style.state.safetensors
    run_host inspect "$state"
    expect_rc 0 "inspect the hypernetwork run's state"
    grep -qE '^format: +sdtrain training state' "$OUT" || fail "inspect: the state is not called a training state"
    grep -qE '^step: +3$' "$OUT" || fail "inspect: the state's step is not 3"
    run_host inspect --json "$state"
    expect_rc 0 "inspect --json the hypernetwork run's state"
    [ "$(json_get "$OUT" format)" = sdtrain-training-state ] || fail "inspect --json: the state's format"
    [ "$(json_get "$OUT" methods)" = '["hypernetwork"]' ] || fail "inspect --json: the state's methods: $(json_get "$OUT" methods)"
    [ "$(json_get "$OUT" sealed)" = true ] || fail "inspect --json: the state's seal is not reported sound"
    run_host train --hypernetwork hn/style.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" --max-steps 4 \
        "${QUIET[@]}" --log-dir logs2
    expect_rc 0 "train on from the stored step"
    [ "$(hn_step hn/style.pt)" = 4 ] || fail "max steps count from the stored step: step '$(json_get "$OUT" step)', expected 4"
    ;;
interrupt)
    set -m # job control: the background sdt-host gets SIGINT as a foreground program would
    "$SDT_HOST" train --hypernetwork hn/style.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
        --max-steps 100000 --save-every 2 --preview-every 0 --csv-every 1 --log-dir logs </dev/null >run.out 2>run.err &
    pid=$!
    set +m
    for ((i = 0; i < 600; i++)); do
        step=$(csv_last_step "$(run_folder logs style)/hypernetwork_loss.csv")
        [ -n "$step" ] && [ "$step" -ge 3 ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if ! kill -INT "$pid" 2>/dev/null; then
        wait "$pid"
        fail "sdt-host ended before Ctrl-C (exit $?): $(tail -n 3 run.err)"
        e2e_finish
    fi
    for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { fail "sdt-host still runs 30 s after Ctrl-C"; kill -KILL "$pid"; }
    wait "$pid"
    RC=$?
    ERR=$WORK/run.err
    LAST_CMD="sdt-host train --hypernetwork ... (interrupted)"
    expect_rc 130 "Ctrl-C during hypernetwork training"
    grep -qi "interrupt" run.err || fail "sdt-host did not say it was interrupted"
    saved=$(hn_step hn/style.pt)
    last=$(csv_last_step "$(run_folder logs style)/hypernetwork_loss.csv")
    [ -n "$saved" ] && [ "$saved" -ge 3 ] && [ "$saved" -lt 100000 ] || fail "the interrupted hypernetwork's step is '$saved'"
    [ "$saved" = "$last" ] || fail "the hypernetwork was saved at step $saved but the CSV ends at step $last"
    states=$(find logs -name '*.state.safetensors' | head -n 1)
    [ -n "$states" ] || fail "Ctrl-C left no training state in logs/"
    leftovers=$(find . -name '*.tmp-*')
    [ -z "$leftovers" ] || fail "temporary files were left behind: $leftovers"
    run_host train --hypernetwork hn/style.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
        --max-steps $((saved + 2)) --save-every 0 --preview-every 0 --csv-every 1 --log-dir logs --resume logs
    expect_rc 0 "--resume after Ctrl-C"
    [ "$(hn_step hn/style.pt)" = $((saved + 2)) ] || fail "the resumed run did not reach step $((saved + 2))"
    [ "$(csv_last_step "$(run_folder logs style)/hypernetwork_loss.csv")" = $((saved + 2)) ] ||
        fail "the resumed run's CSV does not end at step $((saved + 2))"
    ;;
joint)
    new_embedding emb cat 1
    keep_copy emb/cat.safetensors
    run_host train --hypernetwork hn/style.pt --embedding emb/cat.safetensors --embedding-learn-rate 0.01 \
        --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" --max-steps 2 "${QUIET[@]}"
    expect_rc 0 "joint training"
    [ "$(hn_step hn/style.pt)" = 2 ] || fail "joint training: the hypernetwork's step is '$(json_get "$OUT" step)', expected 2"
    [ "$(hn_step emb/cat.safetensors)" = 2 ] || fail "joint training: the embedding's step is '$(json_get "$OUT" step)', expected 2"
    cmp -s hn/style.pt hn/style.pt.before && fail "joint training left the hypernetwork as it was"
    cmp -s emb/cat.safetensors emb/cat.safetensors.before && fail "joint training left the embedding as it was"
    run_host inspect --json "$(run_folder logs style)/style.state.safetensors"
    expect_rc 0 "inspect --json a joint run's state"
    [ "$(json_get "$OUT" methods)" = '["hypernetwork","embedding"]' ] ||
        fail "inspect --json: a joint state's methods: $(json_get "$OUT" methods)"
    # The state holds the embedding's trained vectors: inspect shows their mean norm, as for the file.
    run_host inspect "$(run_folder logs style)/style.state.safetensors"
    state_norm=$(grep '^mean norm:' "$OUT")
    run_host inspect emb/cat.safetensors
    embedding_norm=$(grep '^mean norm:' "$OUT")
    [ -n "$embedding_norm" ] && [ "$state_norm" = "$embedding_norm" ] ||
        fail "inspect: the joint state's '$state_norm' is not the trained embedding's '$embedding_norm'"
    ;;
torch)
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)"
        exit 77
    fi
    run_host train --hypernetwork hn/style.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" --max-steps 1 \
        "${QUIET[@]}"
    expect_rc 0 "train one step"
    /usr/bin/python3 - hn/style.pt <<'PY' || fail "the trained .pt does not load in torch as A1111's hypernetwork"
import math, sys, torch
path = sys.argv[1]
try:
    d = torch.load(path, weights_only=True)
    how = "weights_only=True"
except Exception as e:
    # torch 1.13's weights_only unpickler lacks BINFLOAT ('G', 71), which every A1111 file has
    # (layer_structure); torch >= 2 has it. Only that refusal is forgiven, and only before 2.
    if int(torch.__version__.split(".")[0]) >= 2 or "Unsupported operand 71" not in str(e):
        raise
    d = torch.load(path)
    how = "the full unpickler (torch %s's weights_only has no BINFLOAT)" % torch.__version__
want = ["step", "name", "layer_structure", "activation_func", "is_layer_norm", "weight_initialization",
        "sd_checkpoint", "sd_checkpoint_name", "activate_output", "use_dropout", "dropout_structure",
        "last_layer_dropout", "optional_info"]
keys = [k for k in d if not isinstance(k, int)]
assert keys == want, "A1111's keys in its order: %s" % keys
assert sorted(k for k in d if isinstance(k, int)) == [64, 128], [k for k in d if isinstance(k, int)]
assert d["step"] == 1 and d["name"] == "style", (d["step"], d["name"])
for width in (64, 128):
    k, v = d[width]
    for sd in (k, v):
        assert list(sd.keys()) == ["linear.0.weight", "linear.0.bias", "linear.1.weight", "linear.1.bias"], list(sd)
        assert tuple(sd["linear.0.weight"].shape) == (2 * width, width), sd["linear.0.weight"].shape
        assert all(math.isfinite(float(t.abs().max())) for t in sd.values())
print("torch", torch.__version__, "loads the trained .pt with", how, "and A1111's keys")
PY
    ;;
*)
    fail "unknown case '$case_name'"
    ;;
esac
e2e_finish
