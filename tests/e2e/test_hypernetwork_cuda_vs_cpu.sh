#!/usr/bin/env bash
# The CUDA backend trains the hypernetwork the CPU reference trains: a demo-model hypernetwork after
# one fp32 step agrees between --device cpu and --device cuda (same seed, data and noise; dropout off)
# (the .safetensors twin's tensors by name; the twin holds the .pt's values, test_hn_train), and fp16/bf16
# runs on the GPU stay finite. Skips (77) where no GPU or CUDA module is usable.
# shellcheck source=e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"

run_host create-hypernetwork --name gpuhn --sizes 128,64 --layer-structure "1, 2, 1" --activation relu \
    --layer-norm --out "$WORK/hn"
expect_rc 0 "create-hypernetwork"
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" --model "$MODEL" --width 64 --height 64
        --seed "$SEED" --save-every 0 --preview-every 0 --learn-rate 0.001)

# hn_diff A B: "OUTLIERS TOTAL", how many values of two .safetensors hypernetworks differ by more than 1e-3
# of their tensor's largest, and how many were compared, leaving out
# each K module's last bias (`<width>.0.linear.<last>.bias`): it adds the same vector to every key of an
# attention, which shifts all of a query's logits equally, so softmax ignores it and its gradient is zero
# in exact arithmetic. Adam divides that rounding noise by its own tiny RMS, so the noise moves it by up
# to the learning rate, differently on each device (measured on an H100: bench/NOTES.md run 6).
hn_diff() {
    python3 - "$1" "$2" <<'PY'
import json, re, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        b0, b1 = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b1 - b0) // 4), raw[8 + n + b0: 8 + n + b1])
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if not a or sorted(a) != sorted(b):
    print("inf")
    sys.exit(0)
last = {}
for k in a:
    m = re.match(r"(\d+)\.0\.linear\.(\d+)\.", k)
    if m:
        last[m.group(1)] = max(last.get(m.group(1), -1), int(m.group(2)))
zero_grad = {"%s.0.linear.%d.bias" % (w, p) for w, p in last.items()}
if not zero_grad <= set(a):
    print("inf")
    sys.exit(0)
outliers = total = 0
for k in a:
    if k in zero_grad:
        continue
    scale = max(max(abs(x) for x in a[k]), 1e-12)
    total += len(a[k])
    outliers += sum(1 for x, y in zip(a[k], b[k]) if abs(x - y) > 1e-3 * scale)
print("%d %d" % (outliers, total))
PY
}

for dev in cpu cuda; do
    mkdir -p "$WORK/$dev"
    cp "$WORK/hn/gpuhn.pt" "$WORK/$dev/"
    run_host train --hypernetwork "$WORK/$dev/gpuhn.pt" --log-dir "$WORK/log-$dev" --device "$dev" --max-steps 1 "${common[@]}"
    if [ "$dev" = cuda ] && [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
        echo "SKIP: no usable GPU: $(cat "$ERR")"
        exit 77
    fi
    expect_rc 0 "train the hypernetwork on $dev"
    cmp -s "$WORK/hn/gpuhn.pt" "$WORK/$dev/gpuhn.pt" && fail "training on $dev left the hypernetwork as it was created"
done
read -r outliers total < <(hn_diff "$(run_folder "$WORK/log-cpu" gpuhn)/gpuhn.safetensors" \
    "$(run_folder "$WORK/log-cuda" gpuhn)/gpuhn.safetensors")
echo "cpu vs cuda hypernetwork after one step: $outliers of $total values differ by more than 1e-3 of their tensor's largest"
# Adam's first step moves every value by about lr * sign(g) however small g is, so a value whose gradient is
# at float32 rounding level can step the other way on the other device: measured on an H100, 1 value of
# 8192 in a V module's first weight (init 0.01389, cpu -lr, cuda +lr). Everything else agrees to 1e-3; a
# wrong gradient or optimizer moves far more than 0.1% of the values.
[ "$total" -gt 0 ] || fail "no tensors to compare (the twins' names changed?)"
awk -v o="$outliers" -v t="$total" 'BEGIN { exit !(o <= 1e-3 * t) }' ||
    fail "$outliers of $total values of the CUDA-trained hypernetwork differ from the CPU's by more than 1e-3"
for prec in fp16 bf16; do
    mkdir -p "$WORK/$prec"
    cp "$WORK/hn/gpuhn.pt" "$WORK/$prec/"
    run_host train --hypernetwork "$WORK/$prec/gpuhn.pt" --log-dir "$WORK/log-$prec" --device cuda --precision "$prec" --max-steps 6 \
        "${common[@]}"
    expect_rc 0 "train the hypernetwork on cuda in $prec"
    run_host inspect "$WORK/$prec/gpuhn.pt"
    grep -qE '^finite: +yes' "$OUT" || fail "the $prec GPU hypernetwork is not finite"
    run_host inspect --json "$(run_folder "$WORK/log-$prec" gpuhn)/gpuhn.safetensors"
    [ "$(json_get "$OUT" all_finite)" = true ] || fail "the $prec GPU hypernetwork's .safetensors twin is not finite"
done
e2e_finish
