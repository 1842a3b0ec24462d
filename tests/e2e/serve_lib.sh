# serve_lib.sh - sourced after e2e_lib.sh by the `sdt-host serve` tests: starts the panel on a free
# port with its folders in the work folder (models and datasets: the demo assets) and stops it;
# http and body_has check an answer over curl.

# http WHAT EXPECTED_STATUS CURL_ARGS...: the status, and the body in $WORK/.body.
http() {
    local what=$1 want=$2
    shift 2
    local got
    got=$(curl -s -o "$WORK/.body" -w '%{http_code}' "$@")
    [ "$got" = "$want" ] || fail "$what: HTTP $got, expected $want: $(head -c 300 "$WORK/.body")"
}
body_has() { grep -qF "$2" "$WORK/.body" || fail "$1: the answer does not say '$2': $(head -c 300 "$WORK/.body")"; }

SERVE_PID=
SERVE_URL=
# start_serve [EXTRA OPTIONS...]: sets SERVE_URL (what it printed, token included) and SERVE_BASE
# (http://host:port). The folders: $WORK/embeddings, hypernetworks, logs.
start_serve() {
    SERVE_OUT=$WORK/.serve.out
    SERVE_ERR=$WORK/.serve.err
    # Emptied here, not by the background job's redirection: that runs after the fork, and the loop
    # below could read the previous panel's address from the old file first.
    : >"$SERVE_OUT"
    "$SDT_HOST" serve --models "$SDT_DEMO" --datasets "$SDT_DEMO" --embeddings "$WORK/embeddings" \
        --hypernetworks "$WORK/hypernetworks" --log-dir "$WORK/logs" --port 0 "$@" </dev/null >"$SERVE_OUT" 2>"$SERVE_ERR" &
    SERVE_PID=$!
    local i
    for i in $(seq 1 100); do
        SERVE_URL=$(sed -n 's/^sdt-host serve: open //p' "$SERVE_OUT")
        [ -n "$SERVE_URL" ] && break
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$SERVE_URL" ]; then
        fail "sdt-host serve did not start: $(cat "$SERVE_ERR")"
        e2e_finish
    fi
    SERVE_BASE=$(echo "$SERVE_URL" | sed -E 's|^(http://[^/]+)/.*|\1|')
    trap 'stop_serve; e2e_cleanup' EXIT
}

# stop_serve [SIGNAL]: Ctrl-C's signal (or SIGNAL: TERM, HUP); the panel interrupts its runs, which save,
# and exits 0.
stop_serve() {
    [ -n "$SERVE_PID" ] || return 0
    local sig=${1:-INT}
    kill -"$sig" "$SERVE_PID" 2>/dev/null
    local i
    for i in $(seq 1 300); do
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SERVE_PID" 2>/dev/null; then
        fail "sdt-host serve did not stop within 30 s of SIG$sig"
        kill -KILL "$SERVE_PID" 2>/dev/null
    fi
    wait "$SERVE_PID" 2>/dev/null
    SERVE_RC=$?
    SERVE_PID=
    [ "$SERVE_RC" = 0 ] || { fail "sdt-host serve exited with $SERVE_RC after SIG$sig"; tail -n 30 "$SERVE_ERR" | sed 's/^/    | /' >&2; }
    if grep -qE 'CRITICAL|WARNING|ERROR: AddressSanitizer|runtime error:' "$SERVE_ERR"; then
        fail "sdt-host serve complained:"
        tail -n 30 "$SERVE_ERR" | sed 's/^/    | /' >&2
    fi
}
