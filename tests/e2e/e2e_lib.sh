# e2e_lib.sh - sourced by every end-to-end test: it drives sdt-host exactly as a user would
# (command line, files, exit status, stderr) in a fresh temporary folder.
#
# ctest sets SDT_HOST (the binary), SDT_DEMO (build/host-sim/demo with model/ and dataset/),
# SDT_TEMPLATES (build/host-sim/templates), E2E_TOOL (JSON check, PNG header writer) and
# SDT_TEST_PLUGIN (the plugin's test build, whose fault hooks read SDTRAIN_FAULT_* variables;
# pass it as SDTRAIN_PLUGIN to the runs that inject a fault).
# Checks record a failure and go on, so one run lists everything broken; e2e_finish turns
# the count into the exit status. The training seed is fixed (20261126), printed, and
# SDT_TEST_SEED replays it. On failure the work folder is kept and its path printed.
set -u

: "${SDT_HOST:?SDT_HOST must name the sdt-host binary}"
: "${SDT_DEMO:?SDT_DEMO must name the demo assets folder}"
: "${SDT_TEMPLATES:?SDT_TEMPLATES must name the templates folder}"
: "${E2E_TOOL:?E2E_TOOL must name the e2e_tool binary}"

MODEL=$SDT_DEMO/model # the shipped demo model: diffusers folder (tokenizer/ inside), the single file beside
DATASET=$SDT_DEMO/dataset
FAILURES=0
SEED=${SDT_TEST_SEED:-20261126} # fixed default: every run checks the same case
echo "seed $SEED (SDT_TEST_SEED=$SEED replays this run)"

if [ ! -x "$SDT_HOST" ] || [ ! -d "$MODEL" ] || [ ! -d "$DATASET" ]; then
    echo "FAIL: sdt-host ($SDT_HOST) or the demo assets ($SDT_DEMO) are missing; build the default target first" >&2
    exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sdt-e2e.XXXXXX")
e2e_cleanup() {
    if [ "$FAILURES" -eq 0 ]; then rm -rf "$WORK"; else echo "work folder kept: $WORK" >&2; fi
}
trap e2e_cleanup EXIT
cd "$WORK" || exit 1

fail() {
    echo "FAIL: $*" >&2
    FAILURES=$((FAILURES + 1))
}

# The last command's stderr, indented, to explain a failure.
show_stderr() {
    tail -n 15 "$ERR" | sed 's/^/    | /' >&2
}

# run_host ARGS...: runs sdt-host with no input; sets RC, OUT (stdout file) and ERR (stderr file).
run_host() {
    OUT=$WORK/.stdout
    ERR=$WORK/.stderr
    "$SDT_HOST" "$@" </dev/null >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="sdt-host $*"
}

# The ctest cases that emulate another CPU (OPENBLAS_CORETYPE, tests/e2e/CMakeLists.txt) are worth
# something only if the plugin's OpenBLAS really takes that core, though sdt-host sets
# OPENBLAS_NUM_THREADS for its own process: OpenBLAS names its core at load when OPENBLAS_VERBOSE=2.
# An OpenBLAS built for one CPU names none and ignores the variable, so the case is skipped there.
# E2E_BLAS_CORE marks those cases: a machine may set OPENBLAS_CORETYPE for every process, and the
# other tests must not probe (e2e_help checks that nothing is written).
if [ -n "${E2E_BLAS_CORE:-}" ]; then
    [ "${OPENBLAS_CORETYPE:-}" = "$E2E_BLAS_CORE" ] || fail "E2E_BLAS_CORE=$E2E_BLAS_CORE but OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-}"
    blas_probe=$(mktemp -d "${TMPDIR:-/tmp}/sdt-blas-core.XXXXXX")
    OPENBLAS_VERBOSE=2 run_host create-hypernetwork --name blas-core --sizes 32,64 --out "$blas_probe"
    rm -rf "$blas_probe"
    blas_core=$(sed -n 's/^Core: //p' "$ERR" | head -n 1)
    if [ -z "$blas_core" ]; then
        echo "this OpenBLAS does not choose its kernels at run time (OPENBLAS_CORETYPE is ignored); skipping"
        exit 77
    fi
    [ "$blas_core" = "$OPENBLAS_CORETYPE" ] || fail "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE did not reach the plugin's OpenBLAS (it took $blas_core)"
    # A CPU with AVX-512F runs most GEMMs in the plugin's own kernel, whatever the core: these cases run
    # the plugin's test build with every GEMM through OpenBLAS, as a CPU without AVX-512F does.
    export SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_CPU_BLAS_GEMM=1
fi

# Options every training here shares: the tiny demo model at its 64x64 size, on the CPU.
# shellcheck disable=SC2034 # used by the scripts that source this file
TRAIN_COMMON=(--model "$MODEL" --width 64 --height 64 --device cpu --seed "$SEED")

no_crash() {
    if grep -qE 'Segmentation fault|Aborted|core dumped|AddressSanitizer|LeakSanitizer|runtime error:|GLib-CRITICAL|GLib-WARNING' "$ERR"; then
        fail "$1: the process crashed or GLib complained ($LAST_CMD)"
        show_stderr
    fi
}

expect_rc() { # WANT WHAT
    if [ "$RC" != "$1" ]; then
        fail "$2: exit status $RC, expected $1 ($LAST_CMD)"
        show_stderr
    fi
    no_crash "$2"
}

# expect_error WHAT TEXT...: exit 1 and exactly one "sdt-host: ..." line, one sentence, holding every TEXT.
expect_error() {
    local what=$1 line n
    shift
    expect_rc 1 "$what"
    n=$(grep -c '^sdt-host: ' "$ERR")
    if [ "$n" != 1 ]; then
        fail "$what: $n 'sdt-host:' error lines on stderr, expected exactly one"
        show_stderr
        return
    fi
    line=$(grep '^sdt-host: ' "$ERR")
    if printf '%s' "$line" | grep -qE '[.!?] +[A-Z]'; then
        fail "$what: the error is more than one sentence: $line"
    fi
    for text in "$@"; do
        if ! printf '%s' "$line" | grep -qiF -- "$text"; then
            fail "$what: the error does not mention '$text': $line"
        fi
    done
}

# expect_usage WHAT TEXT...: exit 2 with a hint to --help, and every TEXT on stderr.
expect_usage() {
    local what=$1
    shift
    expect_rc 2 "$what"
    grep -qF -- "--help" "$ERR" || fail "$what: the usage error does not point to --help"
    for text in "$@"; do
        grep -qiF -- "$text" "$ERR" || { fail "$what: stderr does not mention '$text'"; show_stderr; }
    done
}

# new_embedding DIR NAME [VECTORS]: creates DIR/NAME.safetensors through create-embedding.
new_embedding() {
    run_host create-embedding --name "$2" --init-text "a cat" --vectors "${3:-2}" --model "$MODEL" --out "$1"
    expect_rc 0 "create-embedding $2"
}

# The output folder of a run: LOG/<date>/<name> (the date is whatever day the run started).
run_folder() { # LOG NAME
    local d
    for d in "$1"/*/"$2"; do
        [ -d "$d" ] && { echo "$d"; return 0; }
    done
    echo "$1/MISSING/$2"
}

json_get() { "$E2E_TOOL" json "$@"; }

# expect_json_file FILE WHAT: FILE holds one valid JSON object.
expect_json_file() {
    "$E2E_TOOL" json "$1" || fail "$2: $1 is not valid JSON"
}

expect_file() { # PATH WHAT
    [ -s "$1" ] || fail "$2: $1 is missing or empty"
}

# keep_copy FILE / expect_untouched FILE WHAT: the file's bytes are what they were.
keep_copy() { cp -p "$1" "$1.before"; }
expect_untouched() {
    if ! cmp -s "$1" "$1.before"; then fail "$2: $1 was changed or lost"; fi
}

# csv_last_step CSV: the step of the last row (empty when there is none).
csv_last_step() { tail -n +2 "$1" 2>/dev/null | tail -n 1 | cut -d, -f1; }

# expect_csv_precision CSV PRECISION WHAT: every step of a loss CSV ran in PRECISION (its 8th column).
expect_csv_precision() {
    [ "$(tail -n +2 "$1" | cut -d, -f8 | sort -u | tr '\n' ' ')" = "$2 " ] ||
        fail "$3: the steps are not all $2 ($(tail -n +2 "$1" | cut -d, -f8 | tr '\n' ' '))"
}

# tensors_equal A B: every tensor of two safetensors files has the same name, dtype, shape and bytes
tensors_equal() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]])
            for k, v in head.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print(", ".join(bad) if bad else "equal")
sys.exit(1 if bad else 0)
PY
}

# bucket_dataset DIR: six pictures of three shapes (wide 3:1, tall 1:3, square: two each) with captions, for
# the aspect-ratio bucket runs.
bucket_dataset() {
    python3 - "$1" <<'PY' || fail "writing the three-shape dataset into $1"
import random, struct, sys, zlib
def png(path, w, h, seed):
    rnd = random.Random(seed)
    cx, cy = rnd.random(), rnd.random()
    rows = []
    for y in range(h):
        row = bytearray([0])
        for x in range(w):
            d = ((x / w - cx) ** 2 + (y / h - cy) ** 2) ** 0.5
            row += bytes([int(255 * min(1.0, d)), x * 255 // w, y * 255 // h])
        rows.append(bytes(row))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
for i, (w, h) in enumerate([(160, 50), (150, 50), (50, 160), (48, 144), (64, 64), (80, 80)]):
    png(f"{sys.argv[1]}/img_{i}.png", w, h, i)
    open(f"{sys.argv[1]}/img_{i}.txt", "w").write(f"a picture, shape {i // 2}")
PY
}

# emb_diff A B: prints the max relative difference of two embeddings' emb_params (python3).
emb_diff() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    b0, b1 = json.loads(raw[8:8 + n])["emb_params"]["data_offsets"]
    data = raw[8 + n + b0: 8 + n + b1]
    return struct.unpack("<%df" % (len(data) // 4), data)
a, b = load(sys.argv[1]), load(sys.argv[2])
print("%.3g" % (max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(x) for x in a), 1e-12)))
PY
}

e2e_finish() {
    if [ "$FAILURES" -ne 0 ]; then
        echo "$(basename "$0") ${E2E_CASE:-}: $FAILURES check(s) failed" >&2
        exit 1
    fi
    echo "$(basename "$0") ${E2E_CASE:-}: all checks passed"
    exit 0
}
