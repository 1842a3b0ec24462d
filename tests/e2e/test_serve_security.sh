#!/usr/bin/env bash
# `sdt-host serve`'s safety rules, over HTTP with curl:
#   paths      a file outside the configured folders (absolute, '..', a symlink that leads out) is refused,
#              for reading (/api/file) and for training (/api/train); one inside is served
#   origin     a state-changing request from another site's page (foreign Origin) is refused
#   host       a loopback panel answers only to loopback names (DNS rebinding)
#   keys       every key the option table marks as a path (the walk reads the table from /api/setup)
#              is refused outside its folder; a dataset file (caption) or run folder that is a link
#              leading out is refused
#   body       a body over the limit is refused by its Content-Length before it is read, a chunked
#              one while it is read, a GET's body at once: 50 MiB sent leave the server's memory as it was
#   corp       every answer carries Cross-Origin-Resource-Policy: same-origin
#   lock       a second run of the same embedding fails with the plugin's lock sentence
#   events     a reconnecting page (Last-Event-ID) gets only the events it has not seen
#   token      --token: every request without it, or with a wrong one, is refused; --listen beyond
#              loopback without --token generates one (32 hex digits from getrandom, another each
#              start) and prints it
HERE=$(cd "$(dirname "$0")" && pwd) # e2e_lib.sh moves into the work folder
source "$HERE/e2e_lib.sh"
source "$HERE/serve_lib.sh"
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
"$SDT_HOST" serve --help >/dev/null 2>&1 || { echo "SKIP: sdt-host was built without serve (libsoup-3.0-dev)"; exit 77; }

mkdir -p "$WORK/embeddings" "$WORK/outside"
echo secret >"$WORK/outside/secret.txt"
start_serve
B=$SERVE_BASE

# paths
http "a file inside the templates folder" 200 "$B/api/file?root=templates&path=style.txt"
http "an absolute path outside" 403 "$B/api/file?root=logs&path=$WORK/outside/secret.txt"
body_has "an absolute path outside" "outside the logs folder"
http "a .. path" 403 "$B/api/file?root=logs&path=../outside/secret.txt"
ln -s "$WORK/outside" "$WORK/logs/escape"
http "a symlink out of the folder" 403 "$B/api/file?root=logs&path=escape/secret.txt"
grep -qx secret "$WORK/.body" && fail "the symlink escape served the file"
http "a link leading out of the log folder" 403 -X POST --data-binary $'[train]\nmodel=model\n' "$B/api/train"
body_has "a link leading out of the log folder" "log-dir: $WORK/logs/escape is a link to"
rm "$WORK/logs/escape"
mkdir -p "$WORK/logs/2020-01-01"
ln -s "$WORK/outside" "$WORK/logs/2020-01-01/star"
http "a run folder that is a link leading out" 403 -X POST --data-binary $'[train]\nmodel=model\n' "$B/api/train"
body_has "a run folder that is a link leading out" "is a link to $WORK/outside, outside the logs folder"
rm "$WORK/logs/2020-01-01/star"
http "/etc/passwd as a model" 403 -X POST --data-binary $'[train]\nmodel=/etc\n' "$B/api/train"
body_has "/etc as a model" "model:"
http "a model to inspect outside" 403 "$B/api/model?path=/etc"
http "the demo model inspected" 200 "$B/api/model?path=model"
body_has "the demo model inspected" '"hypernetwork_sizes":'
http "a dataset outside" 403 -X POST --data-binary $'[train]\ndataset=../../..\n' "$B/api/train"
http "a log folder outside" 403 -X POST --data-binary "$(printf '[train]\nmodel=model\nlog-dir=%s\n' "$WORK/outside")" "$B/api/train"

# origin
http "a foreign Origin" 403 -X POST -H "Origin: http://evil.example" -d '{"run":1}' "$B/api/interrupt"
body_has "a foreign Origin" "Origin"
http "a foreign Origin creating" 403 -X POST -H "Origin: http://evil.example" -d '{"name":"x","model":"model"}' "$B/api/create-embedding"
[ -e "$WORK/embeddings/x.safetensors" ] && fail "a foreign page created an embedding"
http "the panel's own Origin" 409 -X POST -H "Origin: $B" -d '{"run":99}' "$B/api/interrupt"
body_has "the panel's own Origin" "no run 99"

# host
http "a rebound DNS name" 403 -H "Host: evil.example" "$B/api/setup"
http "localhost" 200 -H "Host: localhost" "$B/api/setup"

# body
head -c 70000 /dev/zero | tr '\0' x >"$WORK/big"
http "an oversized body" 413 -X POST --data-binary "@$WORK/big" "$B/api/train"
body_has "an oversized body" "at most 65536"
http "a chunked body over the limit" 413 -X POST -H "Transfer-Encoding: chunked" --data-binary "@$WORK/big" "$B/api/train"
body_has "a chunked body over the limit" "at most 65536"
http "a chunked body within the limit" 403 -X POST -H "Transfer-Encoding: chunked" --data-binary $'[train]\nmodel=/etc\n' "$B/api/train"
body_has "a chunked body within the limit" "model:"
http "a GET with a body" 400 -X GET -H "Expect:" --data-binary "@$WORK/big" "$B/api/setup"
body_has "a GET with a body" "A GET request carries no body"
http "a HEAD with a body" 400 -X HEAD -H "Expect:" --max-time 5 --data-binary "@$WORK/big" "$B/api/setup"
# flood WHAT STATUS CURL_ARGS...: sends 50 MiB (no Expect: 100-continue, so the bytes come whatever
# the answer); the answer must be STATUS and the server's resident memory must not grow by 16 MiB.
flood() {
    local what=$1 want=$2
    shift 2
    local before after got
    before=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVE_PID/status")
    got=$(head -c $((50 * 1024 * 1024)) /dev/zero | curl -s -o "$WORK/.body" -w '%{http_code}' --max-time 10 -H "Expect:" "$@")
    after=$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVE_PID/status")
    [ "$got" = "$want" ] || fail "$what: HTTP $got, expected $want: $(head -c 300 "$WORK/.body")"
    [ $((after - before)) -lt 16384 ] || fail "$what: the server grew from $before to $after KiB while refusing it"
}
flood "a terabyte Content-Length" 413 -X POST -H "Content-Length: 1099511627776" --data-binary @- "$B/api/interrupt"
body_has "a terabyte Content-Length" "1099511627776 bytes"
flood "a 50 MiB chunked body" 413 -X POST -H "Transfer-Encoding: chunked" -T - "$B/api/interrupt"
flood "a 50 MiB GET body" 400 -X GET --data-binary @- "$B/api/setup"
http "the panel still answers" 200 "$B/api/setup"

# corp
for url in "$B/api/file?root=templates&path=style.txt" "$B/api/setup" "$B/"; do
    curl -s -D "$WORK/.headers" -o /dev/null "$url"
    grep -qi '^Cross-Origin-Resource-Policy: same-origin' "$WORK/.headers" ||
        fail "$url: no Cross-Origin-Resource-Policy: same-origin: $(tr -d '\r' <"$WORK/.headers" | tr '\n' '|')"
done

# lock: the second run of one embedding gets the plugin's sentence.
http "create an embedding" 200 -X POST -d '{"name":"locked","model":"model"}' "$B/api/create-embedding"
panel=$'[train]\nembedding=locked.safetensors\nmodel=model\ndataset=dataset\nwidth=64\nheight=64\ndevice=cpu\nmax-steps=100000\npreview-every=0\nsave-every=0\n'
http "the first run" 200 -X POST --data-binary "$panel" "$B/api/train"
http "the second run" 200 -X POST --data-binary "$panel" "$B/api/train"
for _ in $(seq 1 300); do
    curl -s -o "$WORK/.body" "$B/api/runs"
    grep -q '"run":2,[^}]*"state":"failed"' "$WORK/.body" && break
    sleep 0.1
done
body_has "the second run of one embedding" "another trainer"
http "interrupt the first" 200 -X POST -d '{"run":1}' "$B/api/interrupt"

# events: a page that reconnects with Last-Event-ID gets only what it has not seen.
curl -s -N --max-time 1 -o "$WORK/.events" "$B/api/events"
all=$(grep -c '^data: ' "$WORK/.events")
last=$(grep '^id: ' "$WORK/.events" | tail -n 1 | cut -c5-)
[ "$all" -ge 3 ] || fail "the event stream replayed $all events, expected the runs' states and logs"
curl -s -N --max-time 1 -o "$WORK/.events" -H "Last-Event-ID: $last" "$B/api/events"
again=$(grep -c '^data: ' "$WORK/.events")
[ "$again" -lt "$all" ] || fail "a reconnect after event $last got all $all events again"
curl -s -N --max-time 1 -o "$WORK/.events" -H "Last-Event-ID: 1-1" "$B/api/events"
[ "$(grep -c '^data: ' "$WORK/.events")" -ge "$all" ] || fail "an id from another run of the panel did not replay everything"
stop_serve

# token
start_serve --token s3cret-token-1
B=$SERVE_BASE
case $SERVE_URL in *"?token=s3cret-token-1") ;; *) fail "the printed address does not carry the token: $SERVE_URL" ;; esac
http "no token" 401 "$B/api/setup"
body_has "no token" "token"
http "no token, the page" 401 "$B/"
http "a wrong token" 401 -H "X-SDT-Token: s3cret-token-2" "$B/api/setup"
http "a wrong token in the query" 401 "$B/api/setup?token=nope"
http "the token as a header" 200 -H "X-SDT-Token: s3cret-token-1" "$B/api/setup"
http "the token in the query" 200 "$B/api/setup?token=s3cret-token-1"
http "the page with its token" 200 "$SERVE_URL"
stop_serve

# Beyond loopback without --token: one is generated and printed (listening on all addresses; the
# request still goes to 127.0.0.1).
start_serve --listen 0.0.0.0
token=${SERVE_URL##*token=}
[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "--listen 0.0.0.0 did not print a generated token of 32 hex digits: $SERVE_URL"
B=http://127.0.0.1:${SERVE_BASE##*:}
http "generated token missing" 401 "$B/api/setup"
http "generated token given" 200 "$B/api/setup?token=$token"
http "the page's own Origin beyond loopback" 409 -X POST -H "Origin: $B" -d '{"run":9}' "$B/api/interrupt?token=$token"
http "a foreign Origin beyond loopback" 403 -X POST -H "Origin: http://evil.example" -d '{"run":9}' "$B/api/interrupt?token=$token"
stop_serve
start_serve --listen 0.0.0.0
[ "${SERVE_URL##*token=}" != "$token" ] || fail "two starts generated the same token $token"
stop_serve
# The token comes from getrandom: with a getrandom that answers 0, 1, 2, ... it is those bytes.
if [ -n "${SDT_SERVE_FIXED_RANDOM:-}" ]; then
    LD_PRELOAD=$SDT_SERVE_FIXED_RANDOM ASAN_OPTIONS=verify_asan_link_order=0:${ASAN_OPTIONS:-} start_serve --listen 0.0.0.0
    [ "${SERVE_URL##*token=}" = 000102030405060708090a0b0c0d0e0f ] ||
        fail "the generated token does not come from getrandom: $SERVE_URL"
    stop_serve
fi

# keys: every path key of the option table, outside its folder; dataset files and folders that are
# links leading out. The datasets folder is the work folder's, so links can be made in it.
mkdir -p "$WORK/datasets/leaky" "$WORK/datasets/clean"
image=$(cd "$SDT_DEMO/dataset" && ls | grep -m 1 -iE '\.(png|jpe?g)$')
cp "$SDT_DEMO/dataset/$image" "$WORK/datasets/leaky/"
cp "$SDT_DEMO/dataset/$image" "$WORK/datasets/clean/"
ln -s "$WORK/outside/secret.txt" "$WORK/datasets/leaky/${image%.*}.txt"
echo "a prompt" >"$WORK/datasets/prompts.txt"
start_serve --datasets "$WORK/datasets"
B=$SERVE_BASE
http "the setup" 200 "$B/api/setup"
python3 - "$WORK/.body" >"$WORK/.path_keys" <<'PY' || fail "the option table: $(cat "$WORK/.path_keys")"
import json, re, sys
for o in json.load(open(sys.argv[1]))["options"]:
    if re.search(r"FILE|DIR|PATH", o.get("arg") or "") and not o.get("folder"):
        print(f"--{o['name']} takes a path ({o['arg']}) but names no folder to confine it to")
        sys.exit(1)
    if o.get("folder"):
        print(o["name"], "list" if o.get("folder_list") else "one")
PY
keys=0
while read -r key shape; do
    value=$WORK/outside/secret.txt
    [ "$shape" = list ] && value=$value:0.5
    http "$key outside its folder" 403 -X POST --data-binary "$(printf '[train]\n%s=%s\n' "$key" "$value")" "$B/api/train"
    body_has "$key outside its folder" "$key: '$WORK/outside/secret.txt'"
    body_has "$key outside its folder" "lies outside the"
    keys=$((keys + 1))
done <"$WORK/.path_keys"
[ "$keys" -ge 11 ] || fail "the option table marks $keys keys as paths, expected 11 or more"
for key in dataset validation-dir; do
    http "$key with a caption linked out" 403 -X POST --data-binary "$(printf '[train]\n%s=leaky\n' "$key")" "$B/api/train"
    body_has "$key with a caption linked out" "$key: $WORK/datasets/leaky/${image%.*}.txt is a link to $WORK/outside/secret.txt"
done
ln -s "$WORK/outside" "$WORK/datasets/away"
http "a dataset that is a link leading out" 403 -X POST --data-binary $'[train]\ndataset=away\n' "$B/api/train"
body_has "a dataset that is a link leading out" "lies outside the datasets folder"
# Inside their folders, the new path keys pass the check (the run is then refused for what it lacks).
http "prompts and validation inside" 422 -X POST \
    --data-binary $'[train]\npreview-prompts=prompts.txt\nvalidation-dir=clean\ndataset=clean\n' "$B/api/train"
grep -q "outside\|is a link" "$WORK/.body" && fail "prompts and validation inside were refused: $(cat "$WORK/.body")"
stop_serve

run_host serve --listen nonsense --models "$SDT_DEMO" --datasets "$SDT_DEMO" --embeddings e --hypernetworks h --log-dir l
expect_error "--listen nonsense" "--listen nonsense"
run_host serve --embeddings e
expect_usage "serve without --models" "--models"
e2e_finish
