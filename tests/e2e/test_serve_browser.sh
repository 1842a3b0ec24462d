#!/usr/bin/env bash
# `sdt-host serve` in a real browser: headless Chromium (Debian's chromium) driven by puppeteer-core
# (serve/browser_test.mjs) creates an embedding on the demo model, trains it, sees the progress move,
# interrupts, resumes, and finds the run in the Runs tab; then the same for a hypernetwork. The files
# the page reported are checked here. A second panel, on the plugin's test build, shows the NaN/Inf
# fallback's messages as they happen. Screenshots: <build>/serve-screenshots/ (CI keeps them).
# Skipped (77) without chromium, node or npm, or when puppeteer-core cannot be installed.
HERE=$(cd "$(dirname "$0")" && pwd) # e2e_lib.sh moves into the work folder
source "$HERE/e2e_lib.sh"
source "$HERE/serve_lib.sh"

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (apt-get install nodejs npm)"; exit 77; }
done
[ -n "$CHROMIUM" ] || { echo "SKIP: chromium is not installed (apt-get install chromium)"; exit 77; }
"$SDT_HOST" serve --help >/dev/null 2>&1 || { echo "SKIP: sdt-host was built without serve (libsoup-3.0-dev)"; exit 77; }

# puppeteer-core, pinned by serve/package-lock.json, installed once into the build folder.
SERVE_NPM=${SDT_SERVE_NPM:?ctest sets SDT_SERVE_NPM}
if ! cmp -s "$HERE/serve/package-lock.json" "$SERVE_NPM/package-lock.json" || [ ! -d "$SERVE_NPM/node_modules/puppeteer-core" ]; then
    mkdir -p "$SERVE_NPM"
    cp "$HERE/serve/package.json" "$HERE/serve/package-lock.json" "$SERVE_NPM/"
    if ! (cd "$SERVE_NPM" && npm ci --no-audit --no-fund >npm.log 2>&1); then
        echo "SKIP: npm ci could not install puppeteer-core into $SERVE_NPM (no registry access?): $(tail -n 3 "$SERVE_NPM/npm.log")"
        exit 77
    fi
fi
cp "$HERE/serve/browser_test.mjs" "$SERVE_NPM/"

SHOTS=${SDT_SERVE_SHOTS:?ctest sets SDT_SERVE_SHOTS}
rm -rf "$SHOTS"
mkdir -p "$SHOTS"
# A run with only a loss CSV (no metrics.jsonl), validation column included, that ends in 2 torn rows.
csv_only=$WORK/logs/2020-01-01/csv-only
mkdir -p "$csv_only"
{
    echo "step,epoch,epoch_step,loss,learn_rate,grad_norm,loss_scale,precision,skipped,images_per_s,validation_loss"
    for step in $(seq 1 20); do echo "$step,0,$step,0.0$((50 - step)),0.005,0.01,1,fp32,0,1.0,$([ $((step % 5)) = 0 ] && echo 0.03)"; done
    echo "21,0,21,0.02"
    echo "22,0,22,,0.005,0.01,1,fp32,0,1.0,"
} >"$csv_only/textual_inversion_loss.csv"
start_serve
CHROMIUM=$CHROMIUM node "$SERVE_NPM/browser_test.mjs" "$SERVE_URL" "$SHOTS" >"$WORK/.browser" 2>&1 || {
    fail "the browser test failed:"
    sed 's/^/    | /' "$WORK/.browser" >&2
}
cat "$WORK/.browser"
stop_serve

# What the page reported is on disk: each file trained past step 0, its run folder with a state,
# snapshots, previews and a loss CSV whose last step is the file's step.
# The hypernetwork was written into the log folder typed on the page, and resumed there from the Runs tab.
for case in "embeddings/browser-cat.safetensors browser-cat textual_inversion_loss.csv logs" \
            "hypernetworks/browser-style.pt browser-style hypernetwork_loss.csv logs/project/first"; do
    set -- $case
    file=$WORK/$1 name=$2 csv_name=$3 logs=$WORK/$4
    run_host inspect --json "$file"
    expect_rc 0 "inspect $file"
    step=$(json_get "$OUT" step)
    [ -n "$step" ] && [ "$step" -gt 2 ] || fail "$file was not trained (step '$step')"
    run=$(run_folder "$logs" "$name")
    expect_file "$run/$name.state.safetensors" "$name's training state"
    expect_file "$run/$csv_name" "$name's loss CSV"
    [ "$(csv_last_step "$run/$csv_name")" = "$step" ] || fail "$name: the CSV ends at $(csv_last_step "$run/$csv_name"), the file is at $step"
    ls "$run"/images/"$name"-*.png >/dev/null 2>&1 || fail "$name: no previews in $run/images"
done
# The NaN/Inf fallback as it happens: the test build of the plugin makes step 2's gradient infinite.
SDTRAIN_FAULT_INF_GRAD=embedding:2 start_serve --plugin "$SDT_TEST_PLUGIN"
CHROMIUM=$CHROMIUM node "$SERVE_NPM/browser_test.mjs" "$SERVE_URL" "$SHOTS" fallback >"$WORK/.browser" 2>&1 || {
    fail "the browser's fallback case failed:"
    sed 's/^/    | /' "$WORK/.browser" >&2
}
cat "$WORK/.browser"
stop_serve
csv=$(run_folder "$WORK/logs" browser-nan)/textual_inversion_loss.csv
grep -q ",fp32," "$csv" || fail "the fallback run's CSV does not record the switch to fp32"

ls "$SHOTS"/*.png >/dev/null 2>&1 || fail "no screenshots in $SHOTS"
e2e_finish
