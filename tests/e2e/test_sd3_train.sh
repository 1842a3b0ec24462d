#!/usr/bin/env bash
# SD3.5 embeddings train end to end through sdt-host (issue 30) on the tiny SD3.5 all-in-one file
# (sdt-make-checkpoint --config tiny-sd3, the demo's CLIP tokenizer in tokenizer/, T5's in t5_tokenizer/):
#  - every table: the validation loss on the training image (fixed timesteps and noise) goes down, previews render;
#  - CLIP only (--encoders clip_l,clip_g): the t5xxl table keeps its bytes, the CLIP tables move;
#  - --precision bf16 (the transformer's activations in bf16): the validation loss stays finite and goes down, every
#    table moves;
#  - T5 only with its own rate (--encoders t5xxl --lr-t5xxl): the CLIP tables keep their bytes, t5xxl moves, and the
#    state's keys are the table's (t5xxl.adamw_m ...);
#  - resume is bit-exact on the CPU: 4 steps equal 2, then --resume to 4; also with --ema-result and a table that
#    does not train (the state's hashes span every table);
#  - a t5xxl rate that blows up stops the run with the divergence guard's sentence naming the table;
#  - --encoders / --lr-t5xxl with an SD 1.x embedding and model are refused by name, the file untouched.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer data
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' 1000 rows fit the demo's vocabulary
flow_t5_tokenizer models/t5_tokenizer
cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" data/

run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out fresh
expect_rc 0 "create an SD3.5 embedding"

common=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model models/sd35.safetensors
        --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --csv-every 1)

# every table: the loss on the training image goes down, previews render, every table moves
flow_check_every_table "clip_l clip_g t5xxl" "${common[@]}"

# CLIP only: t5xxl keeps its bytes
mkdir -p clip && cp fresh/star.safetensors clip/
run_host train "${common[@]}" --embedding clip/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir clip/logs \
    --encoders clip_l,clip_g --preview-every 0
expect_rc 0 "train the CLIP tables only"
flow_expect_kept clip/star.safetensors t5xxl "training CLIP only"
flow_expect_moved clip/star.safetensors "clip_l clip_g" "training CLIP only"

# bf16 (--precision bf16): the loss stays finite and goes down, every table moves
flow_check_bf16 "clip_l clip_g t5xxl" "${common[@]}"

# fp16 (--precision fp16): bf16 instead where the device has it, said once; without bf16 (the test hook) fp16 weights
# with the transformer's activations in f32, said once, every step fp16, every table moves
flow_check_fp16 "clip_l clip_g t5xxl" "${common[@]}"

# T5 only with its own rate: the CLIP tables keep their bytes; the state holds the table's own keys
flow_check_t5_alone "clip_l clip_g" "${common[@]}"

# resume: 4 steps straight equal 2, then --resume to 4, bit for bit
rcommon=("${common[@]}" --learn-rate "0.05:3, 0.01" --lr-t5xxl 0.1 --preview-every 0)
flow_check_resume "SD3.5 embedding" "" "${rcommon[@]}"

# resume with the average as the result and a table that does not train (the state pairs with the file's values)
ecommon=("${common[@]}" --learn-rate 0.02 --ema 0.9 --ema-result --encoders clip_l,t5xxl --preview-every 0)
flow_check_resume "SD3.5 average" e "${ecommon[@]}"

# the divergence guard watches each table against its own encoder's token embedding (T5's rows are far longer)
flow_check_divergence "${common[@]}"

# the table options belong to SD3.5/Flux.1 embeddings
new_embedding sd1 cat 1
cp sd1/cat.safetensors sd1/cat.before
run_host train --dataset data --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" \
    --embedding sd1/cat.safetensors --max-steps 1 --log-dir sd1/logs --lr-t5xxl 0.01
expect_error "--lr-t5xxl with an SD 1.x embedding" "learn_rate_t5xxl" "SD3.5"
cmp -s sd1/cat.safetensors sd1/cat.before || fail "a refused run changed the SD 1.x embedding"

e2e_finish
