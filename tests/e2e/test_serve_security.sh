#!/usr/bin/env bash
# `sdt-host serve`'s safety rules, over HTTP with curl:
#   paths      a file outside the configured folders (absolute, '..', a symlink that leads out) is refused,
#              for reading (/api/file) and for training (/api/train); one inside is served
#   origin     a state-changing request from another site's page (foreign Origin) is refused
#   host       a loopback panel answers only to loopback names (DNS rebinding)
#   body       a body over the limit, or without a Content-Length, is refused before it is read
#   lock       a second run of the same embedding fails with the plugin's lock sentence
#   events     a reconnecting page (Last-Event-ID) gets only the events it has not seen
#   token      --token: every request without it, or with a wrong one, is refused; --listen beyond
#              loopback without --token generates one and prints it
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
http "a chunked body" 411 -X POST -H "Transfer-Encoding: chunked" --data-binary "@$WORK/big" "$B/api/train"

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
[ ${#token} -ge 16 ] || fail "--listen 0.0.0.0 did not print a generated token: $SERVE_URL"
B=http://127.0.0.1:${SERVE_BASE##*:}
http "generated token missing" 401 "$B/api/setup"
http "generated token given" 200 "$B/api/setup?token=$token"
http "the page's own Origin beyond loopback" 409 -X POST -H "Origin: $B" -d '{"run":9}' "$B/api/interrupt?token=$token"
http "a foreign Origin beyond loopback" 403 -X POST -H "Origin: http://evil.example" -d '{"run":9}' "$B/api/interrupt?token=$token"
stop_serve

run_host serve --listen nonsense --models "$SDT_DEMO" --datasets "$SDT_DEMO" --embeddings e --hypernetworks h --log-dir l
expect_error "--listen nonsense" "--listen nonsense"
run_host serve --embeddings e
expect_usage "serve without --models" "--models"
e2e_finish
