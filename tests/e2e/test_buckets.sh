#!/usr/bin/env bash
# Aspect-ratio buckets (--buckets) on the demo model, with a dataset of three shapes (wide 3:1,
# tall 1:3, square) written here: the bucket counts are in the log before training, the settings
# file names the options, a run interrupted and resumed with --random-crop and --flip ends bit
# exact with the uninterrupted one (the crops are seeded per image, the batch order per epoch),
# and bad settings are one sentence naming the option: --buckets with --do-not-resize, a step
# that is not a multiple of 8, a step the demo UNet cannot divide (its VAE is 4x, so 4 x 2 x 2 = 16), an area smaller than the
# smallest bucket.
source "$(dirname "$0")/e2e_lib.sh"

mkdir data
bucket_dataset data

for d in straight split; do new_embedding "$d" cat 2; done
cp straight/cat.safetensors made-for-gpu.safetensors
# area 64x64, sides 32..128 in steps of 32: buckets 32x96, 32x128, 64x64, 96x32, 128x32; 160x50 and
# 150x50 (3.2, 3) go to 96x32, the tall ones to 32x96, the squares to 64x64
common=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" --buckets
        --bucket-min-side 32 --bucket-max-side 128 --bucket-step 32 --random-crop --flip --batch-size 2
        --learn-rate 0.01 --save-every 0 --preview-every 0 --csv-every 1)
run_host train "${common[@]}" --embedding straight/cat.safetensors --max-steps 4 --log-dir straight/logs
expect_rc 0 "train 4 steps with --buckets"
grep -qF "buckets: 3 of 5 used by the 6 images (area <= 4096, sides 32..128 in steps of 32, random crop): 32x96: 2, 64x64: 2, 96x32: 2" "$ERR" ||
    { fail "the log does not give the bucket counts before training"; show_stderr; }
settings=$(ls "$(run_folder straight/logs cat)"/settings-*.json | head -n 1)
[ "$(json_get "$settings" buckets)" = "true" ] && [ "$(json_get "$settings" bucket_step)" = "32" ] &&
    [ "$(json_get "$settings" bucket_max_area)" = "4096" ] && [ "$(json_get "$settings" random_crop)" = "true" ] ||
    fail "the settings file does not name the bucket options: $(cat "$settings")"
run_host train "${common[@]}" --embedding split/cat.safetensors --max-steps 2 --log-dir split/logs
expect_rc 0 "train 2 steps"
state=$(run_folder split/logs cat)/cat.state.safetensors
run_host train "${common[@]}" --embedding split/cat.safetensors --max-steps 4 --log-dir split/logs --resume "$state"
expect_rc 0 "resume to 4 steps"
cmp -s split/cat.safetensors straight/cat.safetensors ||
    fail "with --buckets, --random-crop and --flip the resumed embedding differs from the uninterrupted one"
cmp -s <(cut -d, -f1-6 "$(run_folder straight/logs cat)/textual_inversion_loss.csv") \
       <(cut -d, -f1-6 "$(run_folder split/logs cat)/textual_inversion_loss.csv") ||
    fail "the loss CSVs of the straight and the resumed runs differ"

# on a GPU, when one is usable (else skipped here): the CUDA backend trains the bucketed run as the CPU did
mkdir -p gpu && cp made-for-gpu.safetensors gpu/cat.safetensors 2>/dev/null
run_host train "${common[@]}" --device cuda --embedding gpu/cat.safetensors --max-steps 4 --log-dir gpu/logs
if [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
    echo "no usable GPU: the CUDA run is skipped"
else
    expect_rc 0 "train 4 steps with --buckets on the GPU"
    diff=$(emb_diff gpu/cat.safetensors straight/cat.safetensors)
    echo "cpu vs cuda bucketed embedding: max relative difference $diff"
    awk -v d="$diff" 'BEGIN { exit !(d < 1e-3) }' || fail "the bucketed CUDA embedding differs from the CPU one by $diff"
fi

# the panel file's keys: another area, the centre crop
new_embedding panel cat 2
printf '[train]\nbuckets=true\nbucket-max-area=6144\nbucket-min-side=32\nbucket-max-side=128\nbucket-step=32\n' > panel.ini
run_host train --dataset data --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" --config panel.ini \
    --batch-size 2 --max-steps 1 --save-every 0 --preview-every 0 --embedding panel/cat.safetensors --log-dir panel/logs
expect_rc 0 "train with the bucket options in a panel file"
grep -qF "buckets: 3 of 5 used by the 6 images (area <= 6144, sides 32..128 in steps of 32, centre crop): 32x128: 2, 64x64: 2, 128x32: 2" "$ERR" ||
    { fail "the panel file's bucket options did not reach the run"; show_stderr; }

# the memory plan is sized at the largest bucket: 64x64 (the demo VAE's 16x16 latents), not the
# first image's 96x32 (24x8); a 1 MiB cap (the test build's hook) makes the plan say which it measured
if [ -n "${SDT_TEST_PLUGIN:-}" ]; then
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_MEMORY_LIMIT_MB=1 run_host train "${common[@]}" \
        --embedding split/cat.safetensors --max-steps 8 --log-dir capped/logs
    expect_error "a 1 MiB cap" "16x16 latents"
fi

# SDXL (the tiny checkpoint): its size conditioning takes each image's size and crop (mirrored with
# --flip; the numbers are train_test_bucket_sizes'); the run resumes exactly
if [ -n "${SDT_MAKE_CHECKPOINT:-}" ]; then
    "$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --out sdxl.safetensors >/dev/null || fail "sdt-make-checkpoint tiny-sdxl"
    xl=(--model sdxl.safetensors --tokenizer "$MODEL/tokenizer")
    run_host create-embedding --name sxl --init-text "a cat" --vectors 2 "${xl[@]}" --out xl
    expect_rc 0 "create an SDXL embedding"
    mkdir -p xl-split && cp xl/sxl.safetensors xl-split/
    run_host train "${common[@]}" "${xl[@]}" --embedding xl/sxl.safetensors --max-steps 3 --log-dir xl/logs
    expect_rc 0 "train SDXL 3 steps with --buckets"
    grep -qF "buckets: 3 of 5 used" "$ERR" || fail "the SDXL run does not give the bucket counts"
    run_host train "${common[@]}" "${xl[@]}" --embedding xl-split/sxl.safetensors --max-steps 1 --log-dir xl-split/logs
    expect_rc 0 "train SDXL 1 step"
    run_host train "${common[@]}" "${xl[@]}" --embedding xl-split/sxl.safetensors --max-steps 3 --log-dir xl-split/logs \
        --resume "$(run_folder xl-split/logs sxl)/sxl.state.safetensors"
    expect_rc 0 "resume SDXL to 3 steps"
    cmp -s xl/sxl.safetensors xl-split/sxl.safetensors || fail "the resumed bucketed SDXL embedding differs from the uninterrupted one"
fi

run_host train "${common[@]}" --do-not-resize --embedding split/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--buckets with --do-not-resize" "--buckets" "--do-not-resize"
run_host train "${common[@]}" --bucket-step 12 --embedding split/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--bucket-step 12" "--bucket-step" "multiple of 8"
run_host train "${common[@]}" --bucket-step 8 --embedding split/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--bucket-step 8 on the demo UNet, which needs 16" "--bucket-step" "multiple of 16"
run_host train "${common[@]}" --bucket-max-area 900 --embedding split/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--bucket-max-area 900" "--bucket-max-area" "smallest bucket"
run_host train "${common[@]/--buckets/--flip}" --embedding split/cat.safetensors --max-steps 8 --log-dir bad/logs
expect_error "--random-crop without --buckets" "--random-crop" "--buckets"
[ -e bad/logs ] && fail "a refused run wrote into its log folder"
e2e_finish
