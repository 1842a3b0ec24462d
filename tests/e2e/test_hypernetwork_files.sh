#!/usr/bin/env bash
# Hypernetwork files from the command line: create-hypernetwork writes <out>/<name>.pt as A1111's Create tab
# does, inspect shows it and a .safetensors one (text and JSON) through the plugin's hypernetwork factory, an
# existing file is kept unless --overwrite, and a bad field is one sentence naming it. Where /usr/bin/python3
# has torch, the .pt loads with torch.load and holds A1111's keys and state-dict names.
source "$(dirname "$0")/e2e_lib.sh"

run_host create-hypernetwork --name style --out hn
expect_rc 0 "create-hypernetwork with A1111's defaults"
grep -qF "Created: hn/style.pt" "$OUT" || fail "create-hypernetwork does not print the new path"
expect_file hn/style.pt "the new hypernetwork"

run_host inspect hn/style.pt
expect_rc 0 "inspect a hypernetwork"
grep -qE '^kind: +hypernetwork' "$OUT" || fail "inspect does not call it a hypernetwork"
grep -qE '^modules: +768, 320, 640, 1280$' "$OUT" || fail "inspect: modules are not 768, 320, 640, 1280"
grep -qE '^structure: +1, 2, 1 \(2 Linear layers\)' "$OUT" || fail "inspect: structure is not 1, 2, 1"
# 2 modules (K, V) per width of Linear(w, 2w) + Linear(2w, w): 2 * (4w^2 + 3w)
want_params=0
for w in 768 320 640 1280; do want_params=$((want_params + 2 * (4 * w * w + 3 * w))); done
grep -qE "^parameters: +$want_params\$" "$OUT" || fail "inspect: parameter count is not $want_params"

run_host create-hypernetwork --name shaped --sizes 1024,320 --layer-structure 1,1.5,1 --activation relu --init XavierNormal \
    --layer-norm --dropout --dropout-structure 0,0.1,0 --activate-output --out hn
expect_rc 0 "create-hypernetwork with every option"
run_host inspect --json hn/shaped.pt
expect_rc 0 "inspect --json"
[ "$(json_get "$OUT" kind)" = hypernetwork ] || fail "JSON kind is '$(json_get "$OUT" kind)'"
[ "$(json_get "$OUT" activation)" = relu ] || fail "JSON activation is '$(json_get "$OUT" activation)'"
[ "$(json_get "$OUT" weight_initialization)" = XavierNormal ] || fail "JSON init is not XavierNormal"
[ "$(json_get "$OUT" layer_norm)" = true ] || fail "JSON layer_norm is not true"
[ "$(json_get "$OUT" activate_output)" = true ] || fail "JSON activate_output is not true"
[ "$(json_get "$OUT" layers)" = 2 ] || fail "JSON layers is not 2"

keep_copy hn/style.pt
run_host create-hypernetwork --name style --activation relu --out hn
expect_error "an existing hypernetwork without --overwrite" "hn/style.pt" "already exists" "--overwrite"
expect_untouched hn/style.pt "an existing hypernetwork without --overwrite"
run_host create-hypernetwork --name style --activation relu --overwrite --out hn
expect_rc 0 "--overwrite replaces it"
run_host inspect --json hn/style.pt
[ "$(json_get "$OUT" activation)" = relu ] || fail "--overwrite did not replace the file"

run_host create-hypernetwork --name bad --activation foo --out hn
expect_error "an unknown activation" "activation" "foo" "relu"
[ ! -e hn/bad.pt ] || fail "a refused create left hn/bad.pt"
run_host create-hypernetwork --name bad --layer-structure 2,2,1 --out hn
expect_error "a layer structure not starting at 1" "layer structure"
run_host create-hypernetwork --name bad --dropout-structure 0,0.1,0 --out hn
expect_usage "--dropout-structure without --dropout" "--dropout"
run_host create-hypernetwork --out hn
expect_usage "no --name" "--name"

# A .safetensors hypernetwork and its .pt twin (tests/hn's hn_cli writes both): inspect reads either the same way.
if [ -n "${HN_CLI:-}" ] && [ -x "$HN_CLI" ]; then
    mkdir -p twin && "$HN_CLI" twin relu 1 1 0 k "$SEED" >/dev/null || fail "hn_cli did not write the twin files"
    run_host inspect --json twin/hn.safetensors
    expect_rc 0 "inspect a .safetensors hypernetwork"
    [ "$(json_get "$OUT" format)" = safetensors ] || fail "the .safetensors' JSON format is '$(json_get "$OUT" format)'"
    [ "$(json_get "$OUT" layers)" = 3 ] || fail "the .safetensors' layers are not 3 (structure 1, 2, 1.5, 1)"
    st_params=$(json_get "$OUT" parameter_count)
    run_host inspect --json twin/hn.pt
    [ "$(json_get "$OUT" format)" = a1111-pt ] || fail "the .pt twin's JSON format is '$(json_get "$OUT" format)'"
    [ -n "$st_params" ] && [ "$(json_get "$OUT" parameter_count)" = "$st_params" ] ||
        fail "the twins' parameter counts differ: '$st_params' and '$(json_get "$OUT" parameter_count)'"
    run_host inspect twin/hn.safetensors
    grep -qE '^modules: +8, 12$' "$OUT" || fail "inspect: the twin's modules are not 8, 12"
else
    echo "no hn_cli: the .safetensors inspect is skipped"
fi

if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 - hn/shaped.pt <<'PY' || fail "the .pt does not load in torch as A1111's hypernetwork"
import sys, torch
d = torch.load(sys.argv[1])
want = ["step", "name", "layer_structure", "activation_func", "is_layer_norm", "weight_initialization",
        "sd_checkpoint", "sd_checkpoint_name", "activate_output", "use_dropout", "dropout_structure",
        "last_layer_dropout"]
missing = [k for k in want if k not in d]
assert not missing, "missing keys %s" % missing
assert sorted(k for k in d if isinstance(k, int)) == [320, 1024], [k for k in d if isinstance(k, int)]
assert d["name"] == "shaped" and d["activation_func"] == "relu" and d["is_layer_norm"] is True, d
assert [float(x) for x in d["layer_structure"]] == [1.0, 1.5, 1.0], d["layer_structure"]
k, v = d[1024]
# Linear, relu, LayerNorm, Dropout, Linear, relu (activate_output), LayerNorm: positions 0, 2, 4, 5, 6
assert list(k.keys()) == ["linear.0.weight", "linear.0.bias", "linear.2.weight", "linear.2.bias", "linear.4.weight",
                          "linear.4.bias", "linear.6.weight", "linear.6.bias"], list(k.keys())
assert tuple(k["linear.0.weight"].shape) == (1536, 1024) and tuple(v["linear.4.weight"].shape) == (1024, 1536)
print("torch", torch.__version__, "loads the .pt with A1111's keys")
PY
else
    echo "no torch for /usr/bin/python3: the torch.load check is skipped"
fi
e2e_finish
