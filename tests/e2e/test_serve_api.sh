#!/usr/bin/env bash
# `sdt-host serve`'s functions over HTTP (curl), as the page uses them:
#   options    an embedding run takes every option the CLI's embedding run takes: validation, EMA and the
#              LR scheduler are accepted and give the -ema file and metrics.jsonl (with loss.png, written
#              by default); the setup offers them for embeddings
#   folders    a dataset path and a log folder typed by hand are taken inside the configured folders (a
#              new log folder is made there) and refused outside
#   runs       the Runs list walks every log folder inside the logs folder (logs/project/first/<date>/<name>),
#              names each run's log folder, and follows no link out of the logs folder
#              a run with only a CSV whose folder holds one with other columns warns once, not every step
#   gpus       a run's GPU list (gpus=) is read and checked (the plugin's threads: serve is one process)
#   listen     the address printed is the one given to --listen (::1, 127.0.0.2); SIGHUP and SIGTERM
#              stop the panel as Ctrl-C does
HERE=$(cd "$(dirname "$0")" && pwd) # e2e_lib.sh moves into the work folder
source "$HERE/e2e_lib.sh"
source "$HERE/serve_lib.sh"
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
"$SDT_HOST" serve --help >/dev/null 2>&1 || { echo "SKIP: sdt-host was built without serve (libsoup-3.0-dev)"; exit 77; }

# wait_run ID STATE: polls /api/runs until run ID is in STATE (30 s at most).
wait_run() {
    for _ in $(seq 1 300); do
        curl -s -o "$WORK/.runs" "$B/api/runs"
        grep -q "\"run\":$1,[^}]*\"state\":\"$2\"" "$WORK/.runs" && return 0
        grep -q "\"run\":$1,[^}]*\"state\":\"failed\"" "$WORK/.runs" && break
        sleep 0.1
    done
    fail "run $1 did not become $2: $(head -c 500 "$WORK/.runs")"
}

start_serve
B=$SERVE_BASE

# options: the setup offers an embedding the options only sdt_train_options has.
http "the setup" 200 "$B/api/setup"
for option in validation-split ema lr-scheduler flip buckets metrics; do
    python3 - "$WORK/.body" "$option" <<'PY' || fail "the setup does not offer $option to embeddings"
import json, sys
options = {o["name"]: o for o in json.load(open(sys.argv[1]))["options"]}
sys.exit(0 if options[sys.argv[2]]["embedding"] else 1)
PY
done
http "create an embedding" 200 -X POST -d '{"name":"star","model":"model"}' "$B/api/create-embedding"
# SD3.5/Flux's encoder files: confined to the models folder like the model, and refused for an SD 1.x model
http "a T5 file outside the models folder" 403 -X POST -d '{"name":"t5-out","model":"model","t5xxl":"../t5.safetensors"}' \
    "$B/api/create-embedding"
http "a T5 file for an SD 1.x model" 422 -X POST -d '{"name":"t5-sd1","model":"model","t5xxl":"model"}' \
    "$B/api/create-embedding"
body_has "a T5 file for an SD 1.x model" "T5-XXL is set"
body_has "a T5 file for an SD 1.x model" "SD3.5"
panel=$'[train]\nembedding=star.safetensors\nmodel=model\ndataset=dataset\nwidth=64\nheight=64\ndevice=cpu\nseed=7\n'
panel+=$'max-steps=6\nsave-every=0\npreview-every=0\ncsv-every=1\nvalidation-split=0.25\nvalidate-every=2\nema=0.8\n'
panel+=$'lr-scheduler=cosine\nwarmup-steps=2\n'
http "an embedding run with validation, EMA and a scheduler" 200 -X POST --data-binary "$panel" "$B/api/train"
wait_run 1 finished
folder=$(run_folder "$WORK/logs" star)
expect_file "$WORK/embeddings/star-ema.safetensors" "the embedding's average"
[ "$(wc -l <"$folder/metrics.jsonl" 2>/dev/null)" = 6 ] || fail "metrics.jsonl of the panel's run does not have 6 lines"
[ "$(grep -c '"validation_loss"' "$folder/metrics.jsonl")" = 3 ] || fail "metrics.jsonl does not hold 3 validation losses"
head -c 8 "$folder/loss.png" 2>/dev/null | grep -q PNG || fail "the panel's run drew no loss.png"
# metrics=false (the page's unticked box) turns the default off; the CSV stays.
http "create a second embedding" 200 -X POST -d '{"name":"plain","model":"model"}' "$B/api/create-embedding"
plain=$'[train]\nembedding=plain.safetensors\nmodel=model\ndataset=dataset\nwidth=64\nheight=64\ndevice=cpu\nmax-steps=2\n'
plain+=$'save-every=0\npreview-every=0\nmetrics=false\n'
http "an embedding run with metrics=false" 200 -X POST --data-binary "$plain" "$B/api/train"
wait_run 2 finished
folder=$(run_folder "$WORK/logs" plain)
expect_file "$folder/textual_inversion_loss.csv" "the loss CSV without metrics"
[ -e "$folder/metrics.jsonl" ] && fail "metrics=false still wrote metrics.jsonl"
# gpus: a run's GPU list is taken (serve is one process: the plugin's threads); a bad list is refused
# by its sentence, and a plugin without the distributed extension says so (issue 33).
on_gpus="${plain/device=cpu/device=auto}"
http "a run on GPUs 0 and 0" 422 -X POST --data-binary "$on_gpus"$'gpus=0,0\n' "$B/api/train"
body_has "a run on GPUs 0 and 0" "names GPU 0 twice"
http "a run on GPUs 0 and 1 with device=cpu" 422 -X POST --data-binary "$plain"$'gpus=0,1\n' "$B/api/train"
body_has "a run on GPUs 0 and 1 with device=cpu" "trains on GPUs, but --device cpu"
# The test plugin (a CPU build) cannot spread a run over GPUs, and says why.
http "a run on GPUs 0 and 1" 422 -X POST --data-binary "$on_gpus"$'gpus=0,1\n' "$B/api/train"
body_has "a run on GPUs 0 and 1" "cannot train on chosen GPUs"

# folders: a dataset and a log folder typed by hand.
mkdir -p "$WORK/outside/images"
cp "$SDT_DEMO/dataset"/demo_001.* "$WORK/outside/images/"
typed=$'[train]\nembedding=plain.safetensors\nmodel=model\nwidth=64\nheight=64\ndevice=cpu\nmax-steps=3\nsave-every=0\n'
typed+=$'preview-every=0\n'
http "a typed dataset path inside the datasets folder" 200 -X POST \
    --data-binary "$(printf '%sdataset=%s\nlog-dir=%s\n' "$typed" "$SDT_DEMO/dataset" "project/first")" "$B/api/train"
wait_run 3 finished
[ -d "$(run_folder "$WORK/logs/project/first" plain)" ] || fail "the run did not write into the typed log folder logs/project/first"
http "a typed dataset outside" 403 -X POST --data-binary "$(printf '%sdataset=%s\n' "$typed" "$WORK/outside/images")" "$B/api/train"
body_has "a typed dataset outside" "outside the datasets folder"
http "a typed log folder outside" 403 -X POST \
    --data-binary "$(printf '%sdataset=dataset\nlog-dir=%s\n' "$typed" "$WORK/outside/new-logs")" "$B/api/train"
http "a typed log folder climbing out" 403 -X POST \
    --data-binary "$(printf '%sdataset=dataset\nlog-dir=../escaped/logs\n' "$typed")" "$B/api/train"
[ -e "$WORK/outside/new-logs" ] || [ -e "$WORK/escaped" ] && fail "a log folder outside the logs folder was made"
http "a typed log folder through a missing '..'" 403 -X POST \
    --data-binary "$(printf '%sdataset=dataset\nlog-dir=new/../../escaped\n' "$typed")" "$B/api/train"
[ -e "$WORK/escaped" ] || [ -e "$WORK/logs/new" ] && fail "a log folder with '..' was made"

# runs: the run written into logs/project/first is listed with its log folder; a link to a run folder
# outside the logs folder is not followed.
mkdir -p "$WORK/outside/runs/2020-01-01/secret/images"
echo "step,loss" >"$WORK/outside/runs/2020-01-01/secret/textual_inversion_loss.csv"
ln -s "$WORK/outside/runs" "$WORK/logs/linked"
ln -s "$WORK/outside/runs/2020-01-01" "$WORK/logs/2020-01-02"
http "the runs" 200 "$B/api/runs"
python3 - "$WORK/.body" "$(basename "$(dirname "$(run_folder "$WORK/logs/project/first" plain)")")" <<'PY' || fail "the Runs list is wrong: $(head -c 600 "$WORK/.body")"
import json, sys
logs = json.load(open(sys.argv[1]))["logs"]
date = sys.argv[2]
nested = [r for r in logs if r["log_dir"] == "project/first"]
assert len(nested) == 1, "the run in logs/project/first is not listed once"
r = nested[0]
assert (r["date"], r["name"], r["folder"]) == (date, "plain", "project/first/%s/plain" % date), r
assert r["csv"] == r["folder"] + "/textual_inversion_loss.csv" and r["settings"].startswith(r["folder"] + "/settings-"), r
assert any(f.endswith("/plain.state.safetensors") for f in r["files"]), r["files"]
assert all(x["date"] not in ("project", "first") and x["name"] != "first" for x in logs), "a log folder is listed as a run"
assert all(x["log_dir"] == "" for x in logs if x is not r), "the other runs are not in the logs folder itself"
assert not any(x["name"] == "secret" for x in logs), "a run outside the logs folder was listed through a link"
PY
rm "$WORK/logs/linked" "$WORK/logs/2020-01-02" # a run refuses a log folder holding links out of it
# A run with only a CSV (metrics=false) whose folder holds a CSV with other columns (plain's, without
# validation): one warning for the run, not one per step; the Runs list offers the CSV for its plot.
csv_run=$plain$'validation-split=0.25\nvalidate-every=1\ncsv-every=1\nmax-steps=8\n'
http "a CSV-only run into a CSV with other columns" 200 -X POST --data-binary "$csv_run" "$B/api/train"
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$WORK/.body")
wait_run "$id" finished
curl -s -N --max-time 1 -o "$WORK/.events" "$B/api/events"
warned=$(grep "\"run\":$id[,}]" "$WORK/.events" | grep -c "the loss CSV was not updated")
[ "$warned" = 1 ] || fail "a run whose CSV has other columns warned $warned times, expected once: $(grep -m 2 'not updated' "$WORK/.events")"
http "the runs" 200 "$B/api/runs"
python3 - "$WORK/.body" <<'PY' || fail "the CSV-only run is not offered with its CSV: $(head -c 600 "$WORK/.body")"
import json, sys
r = [r for r in json.load(open(sys.argv[1]))["logs"] if r["name"] == "plain" and r["log_dir"] == ""][0]
assert r["csv"].endswith("/textual_inversion_loss.csv") and "metrics" not in r, r
PY
stop_serve

# listen: the address printed is the one listened on.
start_serve --listen 127.0.0.2
case $SERVE_URL in http://127.0.0.2:*) ;; *) fail "--listen 127.0.0.2 printed $SERVE_URL" ;; esac
http "the printed address" 200 "$SERVE_BASE/api/setup"
stop_serve HUP # a closed terminal stops the panel as Ctrl-C does
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    start_serve --listen ::1
    case $SERVE_URL in "http://[::1]:"*) ;; *) fail "--listen ::1 printed $SERVE_URL" ;; esac
    http "the printed IPv6 address" 200 -g "$SERVE_BASE/api/setup"
    stop_serve TERM
else
    echo "note: no IPv6 loopback here; --listen ::1 is not checked"
fi

e2e_finish
