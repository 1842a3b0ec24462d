#!/usr/bin/env bash
# SD3.5 embeddings train end to end through sdt-host (issue 30) on the tiny SD3.5 all-in-one file
# (sdt-make-checkpoint --config tiny-sd3, the demo's CLIP tokenizer in tokenizer/, T5's in t5_tokenizer/):
#  - every table: the validation loss on the training image (fixed timesteps and noise) goes down, previews render;
#  - CLIP only (--encoders clip_l,clip_g): the t5xxl table keeps its bytes, the CLIP tables move;
#  - T5 only with its own rate (--encoders t5xxl --lr-t5xxl): the CLIP tables keep their bytes, t5xxl moves, and the
#    state's keys are the table's (t5xxl.adamw_m ...);
#  - resume is bit-exact on the CPU: 4 steps equal 2, then --resume to 4; also with --ema-result and a table that
#    does not train (the state's hashes span every table);
#  - a t5xxl rate that blows up stops the run with the divergence guard's sentence naming the table;
#  - --encoders / --lr-t5xxl with an SD 1.x embedding and model are refused by name, the file untouched.
source "$(dirname "$0")/e2e_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer data
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' 1000 rows fit the demo's vocabulary
printf '%s' '{"added_tokens":[{"id":0,"content":"<pad>","special":true},{"id":1,"content":"</s>","special":true},'\
'{"id":2,"content":"<unk>","special":true}],"model":{"type":"Unigram","unk_id":2,"vocab":[["<pad>",0],["</s>",0],'\
'["<unk>",0],["▁",-2],["▁a",-1.5],["▁the",-1],["▁cat",-3],["▁yellow",-4],["▁star",-4],["▁dog",-3]],'\
'"byte_fallback":false}}' >models/t5_tokenizer/tokenizer.json
cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" data/

run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out fresh
expect_rc 0 "create an SD3.5 embedding"

# table_bytes FILE KEY: the sha256 of the table's bytes in the safetensors file (python3).
table_bytes() {
    python3 - "$1" "$2" <<'PY'
import hashlib, json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
b0, b1 = json.loads(raw[8:8 + n])[sys.argv[2]]["data_offsets"]
print(hashlib.sha256(raw[8 + n + b0: 8 + n + b1]).hexdigest())
PY
}

common=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model models/sd35.safetensors
        --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --csv-every 1)

# every table: the loss on the training image goes down
mkdir -p all && cp fresh/star.safetensors all/
run_host train "${common[@]}" --embedding all/star.safetensors --max-steps 8 --learn-rate 0.05 --log-dir all/logs \
    --validation-dir data --validate-every 1 --preview-every 8
expect_rc 0 "train every table"
first=$(grep -m1 -oE 'step 1: validation loss [0-9.]+' "$ERR" | awk '{print $NF}')
last=$(grep -oE 'step 8: validation loss [0-9.]+' "$ERR" | awk '{print $NF}')
[ -n "$first" ] && [ -n "$last" ] || fail "no validation losses in the log"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    fail "the validation loss did not go down on the training image: $first at step 1, $last at step 8"
expect_file "$(run_folder all/logs star)/images/star-8.png" "the preview of step 8"
for k in clip_l clip_g t5xxl; do
    [ "$(table_bytes all/star.safetensors $k)" != "$(table_bytes fresh/star.safetensors $k)" ] ||
        fail "training every table left $k unchanged"
done

# CLIP only: t5xxl keeps its bytes
mkdir -p clip && cp fresh/star.safetensors clip/
run_host train "${common[@]}" --embedding clip/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir clip/logs \
    --encoders clip_l,clip_g --preview-every 0
expect_rc 0 "train the CLIP tables only"
[ "$(table_bytes clip/star.safetensors t5xxl)" = "$(table_bytes fresh/star.safetensors t5xxl)" ] ||
    fail "training CLIP only changed the t5xxl table"
for k in clip_l clip_g; do
    [ "$(table_bytes clip/star.safetensors $k)" != "$(table_bytes fresh/star.safetensors $k)" ] ||
        fail "training CLIP only left $k unchanged"
done

# T5 only with its own rate: the CLIP tables keep their bytes; the state holds the table's own keys
mkdir -p t5 && cp fresh/star.safetensors t5/
run_host train "${common[@]}" --embedding t5/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir t5/logs \
    --encoders t5xxl --lr-t5xxl 0.2 --preview-every 0
expect_rc 0 "train the T5 table only"
for k in clip_l clip_g; do
    [ "$(table_bytes t5/star.safetensors $k)" = "$(table_bytes fresh/star.safetensors $k)" ] ||
        fail "training T5 only changed the $k table"
done
[ "$(table_bytes t5/star.safetensors t5xxl)" != "$(table_bytes fresh/star.safetensors t5xxl)" ] ||
    fail "training T5 only left t5xxl unchanged"
state=$(run_folder t5/logs star)/star.state.safetensors
table_bytes "$state" t5xxl.adamw_m >/dev/null 2>&1 || fail "the state has no t5xxl.adamw_m"
table_bytes "$state" clip_l.adamw_m >/dev/null 2>&1 && fail "the state has moments of a table that did not train"

# resume: 4 steps straight equal 2, then --resume to 4, bit for bit
for d in straight split; do mkdir -p $d && cp fresh/star.safetensors $d/; done
rcommon=("${common[@]}" --learn-rate "0.05:3, 0.01" --lr-t5xxl 0.1 --preview-every 0)
run_host train "${rcommon[@]}" --embedding straight/star.safetensors --max-steps 4 --log-dir straight/logs
expect_rc 0 "train 4 steps"
run_host train "${rcommon[@]}" --embedding split/star.safetensors --max-steps 2 --log-dir split/logs
expect_rc 0 "train 2 steps"
state=$(run_folder split/logs star)/star.state.safetensors
expect_file "$state" "the state after 2 steps"
run_host train "${rcommon[@]}" --embedding split/star.safetensors --max-steps 4 --log-dir split/logs --resume "$state"
expect_rc 0 "resume to 4 steps"
cmp -s split/star.safetensors straight/star.safetensors ||
    fail "the resumed SD3.5 embedding differs from the uninterrupted one"

# resume with the average as the result and a table that does not train (the state pairs with the file's values)
for d in estraight esplit; do mkdir -p $d && cp fresh/star.safetensors $d/; done
ecommon=("${common[@]}" --learn-rate 0.02 --ema 0.9 --ema-result --encoders clip_l,t5xxl --preview-every 0)
run_host train "${ecommon[@]}" --embedding estraight/star.safetensors --max-steps 4 --log-dir estraight/logs
expect_rc 0 "train 4 steps with the average as the result"
run_host train "${ecommon[@]}" --embedding esplit/star.safetensors --max-steps 2 --log-dir esplit/logs
expect_rc 0 "train 2 steps with the average as the result"
run_host train "${ecommon[@]}" --embedding esplit/star.safetensors --max-steps 4 --log-dir esplit/logs \
    --resume "$(run_folder esplit/logs star)/star.state.safetensors"
expect_rc 0 "resume to 4 steps with the average as the result"
cmp -s esplit/star.safetensors estraight/star.safetensors ||
    fail "the resumed SD3.5 average differs from the uninterrupted one"

# the divergence guard watches each table against its own encoder's token embedding (T5's rows are far longer)
mkdir -p dv && cp fresh/star.safetensors dv/
run_host train "${common[@]}" --embedding dv/star.safetensors --max-steps 2 --learn-rate 0.01 --lr-t5xxl 100000 \
    --log-dir dv/logs --preview-every 0
expect_rc 1 "a t5xxl table that diverges"
grep -q 'the embedding diverged: .* vector (t5xxl) ' "$ERR" || fail "the divergence is not named with its t5xxl table"

# the table options belong to SD3.5/Flux.1 embeddings
new_embedding sd1 cat 1
cp sd1/cat.safetensors sd1/cat.before
run_host train --dataset data --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" \
    --embedding sd1/cat.safetensors --max-steps 1 --log-dir sd1/logs --lr-t5xxl 0.01
expect_error "--lr-t5xxl with an SD 1.x embedding" "learn_rate_t5xxl" "SD3.5"
cmp -s sd1/cat.safetensors sd1/cat.before || fail "a refused run changed the SD 1.x embedding"

e2e_finish
