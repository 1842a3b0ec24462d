#!/usr/bin/env bash
# The CUDA backend trains the transformer families' embeddings as the CPU reference does (issue 30): tiny SD3.5
# (clip_l, clip_g, t5xxl) and Flux dev (clip_l, t5xxl) all-in-one files, 4 fp32 steps on --device cpu and
# --device cuda (same seed, data and noise) give tables within 1e-3 of each other (relative to the table's largest
# value); gradient checkpointing on the GPU gives the plain GPU run's tables (within 1e-5); bf16 and fp16 runs with
# checkpointing stay finite and move every table (the fp16 run as on a GPU without bf16, SDTRAIN_DEVICE_NO_BF16 of the
# test plugin: fp16 weights, the transformer's activations in f32; with bf16 an fp16 run trains in bf16). Skips (77)
# where no GPU or CUDA module is usable.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

# tables_diff A B: the largest relative difference over every table of two embedding files (any float dtype)
tables_diff() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def bf16(h): return struct.unpack("<f", struct.pack("<I", h << 16))[0]
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, out = json.loads(raw[8:8 + n]), {}
    for k, v in head.items():
        if k == "__metadata__": continue
        b0, b1 = v["data_offsets"]; d = raw[8 + n + b0: 8 + n + b1]
        if v["dtype"] == "F32": out[k] = struct.unpack("<%df" % (len(d) // 4), d)
        elif v["dtype"] == "F16": out[k] = struct.unpack("<%de" % (len(d) // 2), d)
        elif v["dtype"] == "BF16": out[k] = [bf16(h) for h in struct.unpack("<%dH" % (len(d) // 2), d)]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = 0.0
for k in a:
    scale = max(max(abs(x) for x in a[k]), 1e-12)
    worst = max(worst, max(abs(x - y) for x, y in zip(a[k], b[k])) / scale)
print("%.3g" % worst)
PY
}

mkdir -p models/t5_tokenizer data
cp -r "$MODEL/tokenizer" models/tokenizer
flow_t5_tokenizer models/t5_tokenizer
cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" data/
for fam in sd3 flux; do
    case $fam in
        sd3) config=tiny-sd3; tables="clip_l clip_g t5xxl";;
        flux) config=tiny-flux-dev; tables="clip_l t5xxl";;
    esac
    "$SDT_MAKE_CHECKPOINT" --config $config --out models/$fam.safetensors >/dev/null || fail "$config"
    run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/$fam.safetensors --out $fam/fresh
    expect_rc 0 "create a $fam embedding"
    common=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model models/$fam.safetensors
            --width 64 --height 64 --seed "$SEED" --save-every 0 --preview-every 0 --t5-max-length 64
            --max-steps 4 --learn-rate 0.02)
    for run in cpu cuda cuda-ckpt cuda-bf16 cuda-fp16; do
        args=(--device "${run%%-*}")
        case $run in
            cuda-ckpt) args+=(--gradient-checkpointing);;
            cuda-bf16) args+=(--gradient-checkpointing --precision bf16);;
            cuda-fp16) args+=(--gradient-checkpointing --precision fp16);;
        esac
        mkdir -p $fam/$run && cp $fam/fresh/star.safetensors $fam/$run/
        if [ $run = cuda-fp16 ]; then # fp16 trains in bf16 on a GPU with bf16: the hook keeps fp16 (f32 activations)
            SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_DEVICE_NO_BF16=1 run_host train "${common[@]}" "${args[@]}" \
                --embedding $fam/$run/star.safetensors --log-dir $fam/$run/logs
            grep -q "the transformer computes its activations in fp32" "$ERR" ||
                fail "$fam: the fp16 run without bf16 does not say its transformer runs in fp32"
        else
            run_host train "${common[@]}" "${args[@]}" --embedding $fam/$run/star.safetensors --log-dir $fam/$run/logs
        fi
        if [ "$run" = cuda ] && [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
            echo "SKIP: no usable GPU: $(cat "$ERR")"
            exit 77
        fi
        expect_rc 0 "$fam: train ($run)"
    done
    d=$(tables_diff $fam/cpu/star.safetensors $fam/cuda/star.safetensors)
    echo "$fam: cpu vs cuda (fp32) tables: max relative difference $d"
    awk -v d="$d" 'BEGIN { exit !(d < 1e-3) }' || fail "$fam: the CUDA-trained tables differ from the CPU's by $d"
    d=$(tables_diff $fam/cuda/star.safetensors $fam/cuda-ckpt/star.safetensors)
    echo "$fam: cuda plain vs checkpointing: max relative difference $d"
    awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' || fail "$fam: checkpointing on the GPU changed the tables by $d"
    for run in cuda-bf16 cuda-fp16; do
        run_host inspect $fam/$run/star.safetensors
        grep -q "finite:      yes" "$OUT" || fail "$fam: the $run embedding is not finite"
        for k in $tables; do
            [ "$(table_bytes $fam/$run/star.safetensors $k)" != "$(table_bytes $fam/fresh/star.safetensors $k)" ] ||
                fail "$fam: $run left $k unchanged"
        done
        d=$(tables_diff $fam/cuda/star.safetensors $fam/$run/star.safetensors)
        echo "$fam: cuda fp32 vs $run: max relative difference $d (report only)"
    done
done
e2e_finish
