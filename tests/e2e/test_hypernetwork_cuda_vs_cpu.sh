#!/usr/bin/env bash
# The CUDA backend trains the hypernetwork the CPU reference trains: a demo-model hypernetwork after
# 6 fp32 steps agrees between --device cpu and --device cuda (same seed, data and noise; dropout off)
# in both files a run writes (the .pt's storages and the .safetensors twin's tensors), and fp16/bf16
# runs on the GPU stay finite. Skips (77) where no GPU or CUDA module is usable.
# shellcheck source=e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"

run_host create-hypernetwork --name gpuhn --sizes 128,64 --layer-structure "1, 2, 1" --activation relu \
    --layer-norm --out "$WORK/hn"
expect_rc 0 "create-hypernetwork"
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" --model "$MODEL" --width 64 --height 64
        --seed "$SEED" --max-steps 6 --save-every 0 --preview-every 0 --learn-rate 0.001)

# hn_diff A B: the max over tensors of max|a - b| / max|a| of two hypernetwork files of one format
# (.safetensors: every F32 tensor by name; .pt: every data/N storage of torch.save's zip).
hn_diff() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys, zipfile
def tensors(path):
    if path.endswith(".safetensors"):
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
    z = zipfile.ZipFile(path)
    return {e: struct.unpack("<%df" % (len(d) // 4), d)
            for e in z.namelist() if "/data/" in e for d in [z.read(e)]}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
if not a or sorted(a) != sorted(b):
    print("inf")
    sys.exit(0)
worst = 0.0
for k in a:
    scale = max(max(abs(x) for x in a[k]), 1e-12)
    worst = max(worst, max(abs(x - y) for x, y in zip(a[k], b[k])) / scale)
print("%.3g" % worst)
PY
}

for dev in cpu cuda; do
    mkdir -p "$WORK/$dev"
    cp "$WORK/hn/gpuhn.pt" "$WORK/$dev/"
    run_host train --hypernetwork "$WORK/$dev/gpuhn.pt" --log-dir "$WORK/log-$dev" --device "$dev" "${common[@]}"
    if [ "$dev" = cuda ] && [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
        echo "SKIP: no usable GPU: $(cat "$ERR")"
        exit 77
    fi
    expect_rc 0 "train the hypernetwork on $dev"
    cmp -s "$WORK/hn/gpuhn.pt" "$WORK/$dev/gpuhn.pt" && fail "training on $dev left the hypernetwork as it was created"
done
for ext in pt safetensors; do
    diff=$(hn_diff "$WORK/cpu/gpuhn.$ext" "$WORK/cuda/gpuhn.$ext")
    echo "cpu vs cuda hypernetwork (.$ext): max relative difference $diff"
    awk -v d="$diff" 'BEGIN { exit !(d < 1e-3) }' || fail "the CUDA-trained hypernetwork (.$ext) differs from the CPU one by $diff"
done
for prec in fp16 bf16; do
    mkdir -p "$WORK/$prec"
    cp "$WORK/hn/gpuhn.pt" "$WORK/$prec/"
    run_host train --hypernetwork "$WORK/$prec/gpuhn.pt" --log-dir "$WORK/log-$prec" --device cuda --precision "$prec" \
        "${common[@]}"
    expect_rc 0 "train the hypernetwork on cuda in $prec"
    run_host inspect "$WORK/$prec/gpuhn.pt"
    grep -qE '^finite: +yes' "$OUT" || fail "the $prec GPU hypernetwork is not finite"
    run_host inspect --json "$WORK/$prec/gpuhn.safetensors"
    [ "$(json_get "$OUT" all_finite)" = true ] || fail "the $prec GPU hypernetwork's .safetensors twin is not finite"
done
e2e_finish
