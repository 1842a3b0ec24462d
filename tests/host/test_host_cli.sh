#!/bin/sh
# test_host_cli.sh SDT_HOST FAKE_SAME FAKE_NEXT REAL_PLUGIN FAKE_OLD - sdt-host's command-line contract:
# exit 0 for help, 2 for usage, 1 with one clear sentence for errors, 130 after Ctrl-C. FAKE_SAME offers
# only the trainer factory (sdt-host asks for no other); FAKE_OLD none (a plugin from before 1.7).
host="$1"; fake="$2"; fake_next="$3"; real="$4"; fake_old="$5"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0

# expect STATUS PATTERN CMD... : runs CMD, checks its exit status and that stderr+stdout match PATTERN.
expect() {
    want="$1"; pattern="$2"; shift 2
    "$@" >"$tmp/out" 2>&1; got=$?
    if [ "$got" != "$want" ] || ! grep -q -- "$pattern" "$tmp/out"; then
        echo "FAIL: '$*' exited $got (want $want), output lacks '$pattern':"; sed 's/^/    /' "$tmp/out"
        failures=$((failures + 1))
    else
        echo "ok: $* -> $got"
    fi
}

expect 0 "Commands:" "$host" --help
for cmd in demo create-embedding train inspect; do
    expect 0 "Usage:" "$host" $cmd --help
done
expect 0 "--plugin" "$host" train --help
expect 2 "unknown command" "$host" frobnicate
expect 2 "exactly one FILE" "$host" inspect
expect 2 "--name is required" "$host" create-embedding --plugin "$fake"
expect 2 "Unknown option" "$host" train --no-such-option
expect 2 "batch-size" "$host" train --plugin "$fake" --batch-size many
expect 2 "fp32|fp16|bf16" "$host" train --plugin "$fake" --precision fp8
expect 2 "1 to 75" "$host" create-embedding --name a --vectors 76

# Loading the plugin.
expect 1 "does not exist" "$host" inspect x.safetensors --plugin "$tmp/missing.so"
SDTRAIN_PLUGIN="$tmp/missing.so" expect 1 "does not exist" "$host" inspect x.safetensors
printf 'not an ELF file' > "$tmp/garbage.so"
expect 1 "Could not load the plugin" "$host" inspect x.safetensors --plugin "$tmp/garbage.so"
expect 1 "speaks ABI" "$host" inspect x.safetensors --plugin "$fake_next"
expect 0 '"fake": true' "$host" inspect x.safetensors --json --plugin "$fake"
expect 0 '"fake": true' "$host" --plugin "$fake" inspect x.safetensors --json
expect 0 "Created: $tmp/made.safetensors" "$host" create-embedding --name made --out "$tmp" --plugin "$fake"
expect 0 "Created: $tmp/made.pt" "$host" create-hypernetwork --name made --out "$tmp" --plugin "$fake"
for cmd in "inspect x.safetensors" "create-embedding --name a --out $tmp" "train --embedding x --model x --dataset x"; do
    # shellcheck disable=SC2086 # the words are separate arguments on purpose
    expect 1 "does not provide 'sdtrain.trainer/1'; use a newer plugin" "$host" $cmd --plugin "$fake_old"
done
# A T5 length for a plugin older than ABI 1.10 (the fake speaks 1.0), which would read the request without it.
expect 1 "needs a plugin of ABI 1.10 or newer, and .* speaks ABI 1.0.0" "$host" generate --model x --prompt x \
    --out "$tmp/t5.png" --t5-max-length 8 --plugin "$fake"
expect 2 "t5-max-length 600: use 1..512" "$host" generate --model x --prompt x --out "$tmp/t5.png" \
    --t5-max-length 600 --plugin "$fake"
# Found next to itself (the build tree's ../plugin) without --plugin: the real plugin answers.
env -u SDTRAIN_PLUGIN "$host" inspect "$tmp/none.safetensors" >"$tmp/out" 2>&1
if grep -q "Could not find the plugin" "$tmp/out"; then
    echo "FAIL: sdt-host did not find $real by itself"; failures=$((failures + 1))
else
    echo "ok: plugin found without --plugin"
fi

# Panel files and overrides: the plugin's validation sentence comes back with exit 1.
printf '[train]\nmax-steps=3\nlog-dir=%s\nembedding=%s/fake.safetensors\nmodel=%s\n' "$tmp" "$tmp" "$tmp" > "$tmp/panel.ini"
expect 2 "dataset DIR is required" "$host" train --plugin "$fake" --config "$tmp/panel.ini"
expect 0 "step 3/3" "$host" train --plugin "$fake" --config "$tmp/panel.ini" --dataset "$tmp"
expect 0 "step 5/5" "$host" train --plugin "$fake" --config "$tmp/panel.ini" --dataset "$tmp" --max-steps 5
printf '[train]\nbatch-size=lots\n' > "$tmp/bad.ini"
expect 1 "bad.ini, key batch-size" "$host" train --plugin "$fake" --config "$tmp/bad.ini"
printf '[train]\nwhat=1\n' > "$tmp/unknown.ini"
expect 1 "unknown key 'what'" "$host" train --plugin "$fake" --config "$tmp/unknown.ini"
expect 1 "Could not read the panel file" "$host" train --plugin "$fake" --config "$tmp/nope.ini"
# The real plugin without a trainer says so plainly.
expect 1 "does not include the textual-inversion trainer\|cannot open the embedding file" "$host" train --plugin "$real" --config "$tmp/panel.ini" --dataset "$tmp"

# Ctrl-C: the run stops after a step, the plugin saves, sdt-host exits 130.
"$host" train --plugin "$fake" --embedding "$tmp/fake.safetensors" --model "$tmp" --dataset "$tmp" --log-dir "$tmp" \
    --max-steps 100000000 >"$tmp/run" 2>&1 &
pid=$!
tries=0
while ! grep -q "training started" "$tmp/run" && [ $tries -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
kill -INT $pid
wait $pid; got=$?
if [ "$got" = 130 ] && grep -q "saved: $tmp/fake.safetensors" "$tmp/run" && grep -q "Interrupted" "$tmp/run"; then
    echo "ok: Ctrl-C -> 130 after saving"
else
    echo "FAIL: Ctrl-C gave exit $got:"; sed 's/^/    /' "$tmp/run"; failures=$((failures + 1))
fi

[ $failures = 0 ] && echo "all host CLI checks passed" || echo "$failures host CLI checks failed"
[ $failures = 0 ]
