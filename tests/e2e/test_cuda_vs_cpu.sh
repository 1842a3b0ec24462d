#!/usr/bin/env bash
# The CUDA backend trains what the CPU reference trains: the demo embedding after a few fp32
# steps agrees between --device cpu and --device cuda (same seed, same data, same noise), and
# fp16/bf16 runs on the GPU stay finite; the bf16 run's previews bring back the VAE, which leaves the GPU
# once the images are encoded. Skips (77) where no GPU or CUDA module is usable.
# shellcheck source=e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"

run_host create-embedding --name gpucheck --init-text photo --vectors 2 --model "$MODEL" --out "$WORK/emb"
expect_rc 0 "create-embedding"
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/subject_filewords.txt" --model "$MODEL" --width 64 --height 64
        --seed "$SEED" --max-steps 6 --save-every 0 --preview-every 0 --learn-rate 0.005)
for dev in cpu cuda; do
    mkdir -p "$WORK/$dev"
    cp "$WORK/emb/gpucheck.safetensors" "$WORK/$dev/"
    run_host train --embedding "$WORK/$dev/gpucheck.safetensors" --log-dir "$WORK/log-$dev" --device "$dev" "${common[@]}"
    if [ "$dev" = cuda ] && [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
        echo "SKIP: no usable GPU: $(cat "$ERR")"
        exit 77
    fi
    expect_rc 0 "train on $dev"
done
diff=$(emb_diff "$WORK/cpu/gpucheck.safetensors" "$WORK/cuda/gpucheck.safetensors")
echo "cpu vs cuda embedding: max relative difference $diff"
awk -v d="$diff" 'BEGIN { exit !(d < 1e-3) }' || fail "the CUDA-trained embedding differs from the CPU one by $diff"
for prec in fp16 bf16; do
    mkdir -p "$WORK/$prec"
    cp "$WORK/emb/gpucheck.safetensors" "$WORK/$prec/"
    previews=()
    [ "$prec" = bf16 ] && previews=(--preview-every 3)
    run_host train --embedding "$WORK/$prec/gpucheck.safetensors" --log-dir "$WORK/log-$prec" --device cuda --precision "$prec" \
        "${common[@]}" "${previews[@]}"
    expect_rc 0 "train on cuda in $prec"
    grep -q "the VAE's weights (.* MiB) leave the GPU while training" "$OUT" "$ERR" ||
        fail "$prec: the log does not say the VAE left the GPU after encoding"
    run_host inspect "$WORK/$prec/gpucheck.safetensors"
    grep -q "finite:      yes" "$OUT" || fail "the $prec GPU embedding is not finite"
done
run=$(run_folder "$WORK/log-bf16" gpucheck)
for step in 3 6; do
    expect_file "$run/images/gpucheck-$step.png" "the bf16 GPU run's preview at step $step (the VAE brought back)"
done
e2e_finish
