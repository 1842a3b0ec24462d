#!/bin/sh
# test_host_dist.sh SDT_HOST FAKE REAL_PLUGIN FAKE_NODIST - data-parallel launches as a user meets them (issue 33),
# against the fake plugin: `train --gpus` starts one rank process per GPU and shows rank 0's output and
# the others' marked [rank N]; one rank failing or killed stops the others with one sentence naming it;
# Ctrl-C stops every rank after its step; torchrun's variables by hand; every bad setting refused with
# its sentence. The fake plugin fails rank N when the dataset folder is named fail-rank-N (crash-rank-N:
# SIGKILL). Only bounded waits; no durations are checked.
host="$1"; fake="$2"; real="$3"; fake_nodist="$4"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
mkdir -p "$tmp/ok" "$tmp/fail-rank-1" "$tmp/crash-rank-2"
common="--plugin $fake --embedding $tmp/e.safetensors --model $tmp --log-dir $tmp"

# expect STATUS PATTERN... -- CMD... : runs CMD, checks its exit status and that its output has every PATTERN.
expect() {
    want="$1"; shift
    patterns=""
    while [ "$1" != "--" ]; do patterns="$patterns
$1"; shift; done
    shift
    "$@" >"$tmp/out" 2>&1; got=$?
    bad=""
    [ "$got" = "$want" ] || bad="exited $got (want $want)"
    echo "$patterns" | while IFS= read -r p; do
        [ -z "$p" ] || grep -qF -- "$p" "$tmp/out" || echo "lacks: $p"
    done >"$tmp/missing"
    if [ -n "$bad" ] || [ -s "$tmp/missing" ]; then
        echo "FAIL: '$*' $bad"; sed 's/^/    /' "$tmp/missing"; echo "  output:"; sed 's/^/    /' "$tmp/out"
        failures=$((failures + 1))
    else
        echo "ok: $* -> $got"
    fi
}

# shellcheck disable=SC2086 # $common is several arguments on purpose
{
# Two ranks finish together; rank 1's lines are marked.
expect 0 "step 5/5" "[rank 1] info: fake: training started" "ranks 0 to 1" \
    "[rank 1] info: fake: rank 1 of 2, local rank 1 of 2, rank 0 at 127.0.0.1" \
    "info: fake: rank 0 of 2, local rank 0 of 2" "[rank 1] Rank 1 of 2 (GPU 6): meeting the other ranks" -- \
    "$host" train $common --dataset "$tmp/ok" --max-steps 5 --gpus 3,6
# --in-process: the GPUs as the plugin's threads, one process, one progress stream.
expect 0 "step 5/5" -- "$host" train $common --dataset "$tmp/ok" --max-steps 5 --gpus 0,1 --in-process
grep -q "rank" "$tmp/out" && { echo "FAIL: --in-process started rank processes:"; sed 's/^/    /' "$tmp/out"; failures=$((failures + 1)); }
# --device cuda:N alone: one GPU, chosen.
expect 0 "step 5/5" -- "$host" train $common --dataset "$tmp/ok" --max-steps 5 --device cuda:1
# One rank fails: the others are stopped (SIGTERM: their Interrupt button), one sentence names it.
expect 1 "sdt-host: Rank 1 (GPU 1) exited with status 1, so every other rank was stopped" \
    "[rank 1] sdt-host: fake: rank 1 failed on purpose." "[rank 2] Interrupted after the step; rank 0 saves the job's training state." \
    "Interrupted; the training state was saved." -- \
    "$host" train $common --dataset "$tmp/fail-rank-1" --max-steps 100000000 --gpus 0,1,2
# One rank killed outright.
expect 1 "sdt-host: Rank 2 (GPU 5) was killed by signal 9" "[rank 1] Interrupted" -- \
    "$host" train $common --dataset "$tmp/crash-rank-2" --max-steps 100000000 --gpus 3,4,5
# Bad settings.
expect 2 "--gpus names GPU 0 twice" -- "$host" train $common --dataset "$tmp/ok" --gpus 0,0
expect 2 "--in-process runs the GPUs that --gpus lists" -- "$host" train $common --dataset "$tmp/ok" --in-process
expect 2 "--gpus trains on GPUs, but --device cpu" -- "$host" train $common --dataset "$tmp/ok" --gpus 0,1 --device cpu
expect 2 "--device: 'cuda:x' is not cuda:N" -- "$host" train $common --dataset "$tmp/ok" --device cuda:x
expect 2 "leave out --gpus under torchrun" -- env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=29500 "$host" train $common --dataset "$tmp/ok" --gpus 0,1
expect 1 "RANK='5' is not a whole number from 0 to 1" -- env WORLD_SIZE=2 RANK=5 LOCAL_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "$host" train $common --dataset "$tmp/ok"
expect 1 "MASTER_ADDR is not set" -- env -u MASTER_ADDR WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 MASTER_PORT=29500 \
    "$host" train $common --dataset "$tmp/ok"
# A plugin that cannot spread training over GPUs (this CPU build: no distributed extension, or one whose
# available() says no) says so before anything starts.
expect 1 "cannot train on chosen GPUs" -- "$host" train --plugin "$real" --embedding "$tmp/e.safetensors" \
    --model "$tmp" --log-dir "$tmp" --dataset "$tmp/ok" --gpus 0,1
expect 1 "cannot train on chosen GPUs" -- "$host" train --plugin "$real" --embedding "$tmp/e.safetensors" \
    --model "$tmp" --log-dir "$tmp" --dataset "$tmp/ok" --device cuda:1
expect 1 "sdt-host: This libsdtrain.so cannot train on chosen GPUs here: fake: NCCL (libnccl.so.2) is not installed." -- \
    "$host" train --plugin "$fake_nodist" --embedding "$tmp/e.safetensors" --model "$tmp" --log-dir "$tmp" \
    --dataset "$tmp/ok" --gpus 0,1
}

# torchrun's variables by hand (two "machines" on 127.0.0.1): a rank started with other options is
# refused, and rank 0 stops after --comm-timeout naming the rank that never came. A port another
# program took is retried with the next one.
port=$((20000 + $$ % 20000))
for attempt in 1 2 3; do
    env WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$host" train $common --dataset "$tmp/ok" --max-steps 3 --comm-timeout 3 >"$tmp/rank0" 2>&1 &
    pid0=$!
    env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$host" train $common --dataset "$tmp/ok" --max-steps 4 --comm-timeout 10 >"$tmp/rank1" 2>&1
    got1=$?
    wait $pid0; got0=$?
    grep -q "is in use" "$tmp/rank0" || break
    port=$((port + 1))
done
if [ "$got1" = 1 ] && grep -q "refused rank 1: rank 1's options differ from rank 0's" "$tmp/rank1" &&
    [ "$got0" = 1 ] && grep -q "Rank 1 of the 2 did not join the rendezvous at 127.0.0.1:$port within 3 s" "$tmp/rank0" &&
    grep -q "a rank 1 of another job" "$tmp/rank0"; then
    echo "ok: a rank with other options refused; rank 0 timed out naming rank 1"
else
    echo "FAIL: mismatched ranks gave $got0/$got1:"; sed 's/^/    0: /' "$tmp/rank0"; sed 's/^/    1: /' "$tmp/rank1"
    failures=$((failures + 1))
fi

# Ctrl-C reaches every rank: each finishes its step, rank 0 saves, sdt-host exits 130.
"$host" train $common --dataset "$tmp/ok" --max-steps 100000000 --gpus 0,1 >"$tmp/run" 2>&1 &
pid=$!
tries=0
while ! { grep -q "^info: fake: training started" "$tmp/run" && grep -q "\[rank 1\] info: fake: training started" "$tmp/run"; } &&
    [ $tries -lt 400 ]; do sleep 0.05; tries=$((tries + 1)); done
kill -INT $pid
wait $pid; got=$?
if [ "$got" = 130 ] && grep -q "^Interrupted; the training state was saved." "$tmp/run" &&
    grep -q "\[rank 1\] Interrupted after the step; rank 0 saves" "$tmp/run" &&
    ! grep -q "\[rank 1\] step" "$tmp/run"; then
    echo "ok: Ctrl-C -> 130, every rank interrupted after its step"
else
    echo "FAIL: Ctrl-C gave exit $got:"; sed 's/^/    /' "$tmp/run"; failures=$((failures + 1))
fi

[ $failures = 0 ] && echo "all data-parallel launch checks passed" || echo "$failures data-parallel launch checks failed"
[ $failures = 0 ]
