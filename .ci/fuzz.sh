#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzzing build for a bounded time on its seed corpus.
#   bash .ci/fuzz.sh BUILD_DIR [SECONDS_PER_TARGET]   (default 15; also $SDT_FUZZ_SECONDS)
# Targets run $SDT_FUZZ_JOBS at a time (default: the number of cores). New inputs go to
# BUILD_DIR/fuzz-corpus/<target>/ (the committed seeds stay as they are); a crash leaves its
# input in BUILD_DIR/fuzz-artifacts/ and fails the run, after every target has run.
# Mutations follow a fixed seed ($SDT_FUZZ_SEED, default 1, printed) so a run can be replayed;
# how far a run gets still depends on the seconds given and the machine's speed.
set -euo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR [SECONDS_PER_TARGET]}
seconds=${2:-${SDT_FUZZ_SECONDS:-15}}
jobs=${SDT_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
seed=${SDT_FUZZ_SEED:-1}
echo "fuzz: ${seconds} s per target, seed $seed (SDT_FUZZ_SEED), $jobs at a time"
list="$build/tests/fuzz/fuzz_targets.txt"
[ -f "$list" ] || { echo "fuzz.sh: $list not found; configure $build with -DSDT_FUZZ=ON and clang" >&2; exit 1; }
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts" "$build/fuzz-logs"

run_one() { # target seeds-folder
  local t=$1 seeds=$2 corpus="$build/fuzz-corpus/$1" log="$build/fuzz-logs/$1.log"
  mkdir -p "$corpus"
  # -timeout: one input may take at most this long; -rss_limit_mb: no input may need more memory.
  if "$build/tests/fuzz/$t" "$corpus" "$seeds" -max_total_time="$seconds" -seed="$seed" -timeout=30 -rss_limit_mb=2048 \
       -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1 >"$log" 2>&1; then
    echo "fuzz: $t ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${seconds} s)"
  else
    echo "fuzz: $t FAILED; its log: $log"
    tail -n 40 "$log"
    return 1
  fi
}

failed=0
pids=()
while read -r t seeds; do
  [ -n "$t" ] || continue
  [ -x "$build/tests/fuzz/$t" ] || { echo "fuzz: $build/tests/fuzz/$t not built"; failed=1; continue; }
  run_one "$t" "$seeds" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done <"$list"
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
