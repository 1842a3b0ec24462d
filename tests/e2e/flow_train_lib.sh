# flow_train_lib.sh - sourced after e2e_lib.sh by the SD3.5 and Flux.1 tests (training: test_sd3_train.sh,
# test_flux_train.sh; T5's tokenizer alone: test_t5_cache.sh, test_transformer_*.sh, test_demo_eval_transformer.sh,
# test_locale.sh): a tiny T5 tokenizer, a table's bytes in an embedding or state file, and the checks both families'
# training runs the same way (T5's table alone, resume bit for bit, the divergence guard on the t5xxl table).

# flow_t5_tokenizer DIR [WORDS]: a tiny Unigram T5 tokenizer (pad 0, </s> 1, unk 2, "▁" 3, then WORDS: a few words
# with their scores, as JSON pairs; default "a the cat yellow star dog", tests/common/t5_test_vocab.h's) as
# DIR/tokenizer.json.
flow_t5_tokenizer() {
    local words=${2:-'["▁a",-1.5],["▁the",-1],["▁cat",-3],["▁yellow",-4],["▁star",-4],["▁dog",-3]'}
    mkdir -p "$1"
    printf '%s' '{"added_tokens":[{"id":0,"content":"<pad>","special":true},{"id":1,"content":"</s>","special":true},'\
'{"id":2,"content":"<unk>","special":true}],"model":{"type":"Unigram","unk_id":2,"vocab":[["<pad>",0],["</s>",0],'\
'["<unk>",0],["▁",-2],'"$words"'],"byte_fallback":false}}' >"$1/tokenizer.json"
}

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

# flow_expect_moved FILE "TABLES" WHAT: each of TABLES in FILE differs from fresh/star.safetensors' (WHAT: the run).
flow_expect_moved() {
    local k
    for k in $2; do
        [ "$(table_bytes "$1" $k)" != "$(table_bytes fresh/star.safetensors $k)" ] || fail "$3 left $k unchanged"
    done
}

# flow_expect_kept FILE "TABLES" WHAT: each of TABLES in FILE has fresh/star.safetensors' bytes (WHAT: the run).
flow_expect_kept() {
    local k
    for k in $2; do
        [ "$(table_bytes "$1" $k)" = "$(table_bytes fresh/star.safetensors $k)" ] || fail "$3 changed the $k table"
    done
}

# flow_train_every_table DIR PRECISION "TABLES" TRAIN_ARGS...: every table trains 8 steps (fresh/star.safetensors
# copied to DIR/; PRECISION empty: the default, else --precision PRECISION and every step of the CSV in it): the
# validation loss on the training image is finite and goes down, the preview of step 8 renders, each of TABLES moves;
# the run's log stays in $ERR for the caller's own checks.
flow_train_every_table() {
    local dir=$1 precision=$2 tables=$3 first last
    local in=${precision:+ in $precision} tag=${precision:+$precision: } extra=()
    shift 3
    [ -z "$precision" ] || extra=(--precision "$precision")
    mkdir -p "$dir" && cp fresh/star.safetensors "$dir/"
    run_host train "$@" --embedding "$dir/star.safetensors" --max-steps 8 --learn-rate 0.05 --log-dir "$dir/logs" \
        --validation-dir data --validate-every 1 --preview-every 8 "${extra[@]}"
    expect_rc 0 "train every table$in"
    [ -z "$precision" ] ||
        expect_csv_precision "$(run_folder "$dir/logs" star)/textual_inversion_loss.csv" "$precision" "$precision"
    first=$(grep -m1 -oE 'step 1: validation loss [0-9.]+' "$ERR" | awk '{print $NF}')
    last=$(grep -oE 'step 8: validation loss [0-9.]+' "$ERR" | awk '{print $NF}')
    [ -n "$first" ] && [ -n "$last" ] || fail "${tag}no finite validation losses in the log"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
        fail "${tag}the validation loss did not go down on the training image: $first at step 1, $last at step 8"
    echo "${tag}validation loss $first at step 1, $last at step 8"
    expect_file "$(run_folder "$dir/logs" star)/images/star-8.png" "the preview of step 8$in"
    flow_expect_moved "$dir/star.safetensors" "$tables" "training every table$in"
}

# flow_check_every_table "TABLES" TRAIN_ARGS...: flow_train_every_table in all/, the default precision.
flow_check_every_table() { flow_train_every_table all "" "$@"; }

# flow_check_bf16 "TABLES" TRAIN_ARGS...: flow_train_every_table in bf16/ with --precision bf16 (the transformer's
# activations in bf16, as the encoders').
flow_check_bf16() { flow_train_every_table bf16 bf16 "$@"; }

# flow_check_fp16 "TABLES" TRAIN_ARGS...: --precision fp16 on a transformer family (which overflows fp16 at full size),
# 2 steps each (fresh/star.safetensors copied to fp16/ and fp16nobf/): where the device has bf16 (the CPU) the run
# trains in bf16 and says why in one log line; on a device without bf16 (the test plugin's SDTRAIN_DEVICE_NO_BF16)
# it stays fp16 with the transformer's activations in f32, says so, and trains: no fallback, every step fp16 in the
# CSV, every table of TABLES moves and stays finite.
flow_check_fp16() {
    local tables=$1
    shift
    mkdir -p fp16 fp16nobf && cp fresh/star.safetensors fp16/ && cp fresh/star.safetensors fp16nobf/
    run_host train "$@" --embedding fp16/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir fp16/logs \
        --preview-every 0 --precision fp16
    expect_rc 0 "train with --precision fp16"
    [ "$(grep -c "training in bf16 instead of fp16: .*'s transformer overflows in fp16" "$ERR")" = 1 ] ||
        fail "fp16 with bf16: the switch to bf16 is not said once"
    expect_csv_precision "$(run_folder fp16/logs star)/textual_inversion_loss.csv" bf16 "fp16 with bf16"
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_DEVICE_NO_BF16=1 run_host train "$@" --embedding fp16nobf/star.safetensors \
        --max-steps 2 --learn-rate 0.05 --log-dir fp16nobf/logs --preview-every 0 --precision fp16
    expect_rc 0 "train with --precision fp16 on a device without bf16"
    [ "$(grep -c "'s transformer overflows in fp16 .* no bf16: the weights stay in fp16 and the transformer computes its activations in fp32" "$ERR")" = 1 ] ||
        fail "fp16 without bf16: the fp32 transformer activations are not said once"
    grep -q "instead of fp16" "$ERR" && fail "fp16 without bf16: the run says it switched precision"
    expect_csv_precision "$(run_folder fp16nobf/logs star)/textual_inversion_loss.csv" fp16 "fp16 without bf16"
    run_host inspect fp16nobf/star.safetensors
    grep -q "finite:      yes" "$OUT" || fail "fp16 without bf16: the embedding is not finite"
    flow_expect_moved fp16nobf/star.safetensors "$tables" "fp16 without bf16"
}

# flow_check_t5_alone "CLIP_TABLES" TRAIN_ARGS...: T5 only with its own rate (fresh/star.safetensors copied to t5/):
# the CLIP tables keep their bytes, t5xxl moves, the state holds the table's own keys.
flow_check_t5_alone() {
    local clip_tables=$1 state
    shift
    mkdir -p t5 && cp fresh/star.safetensors t5/
    run_host train "$@" --embedding t5/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir t5/logs \
        --encoders t5xxl --lr-t5xxl 0.2 --preview-every 0
    expect_rc 0 "train the T5 table only"
    flow_expect_kept t5/star.safetensors "$clip_tables" "training T5 only"
    flow_expect_moved t5/star.safetensors t5xxl "training T5 only"
    state=$(run_folder t5/logs star)/star.state.safetensors
    table_bytes "$state" t5xxl.adamw_m >/dev/null 2>&1 || fail "the state has no t5xxl.adamw_m"
    table_bytes "$state" clip_l.adamw_m >/dev/null 2>&1 && fail "the state has moments of a table that did not train"
}

# flow_check_resume WHAT PREFIX TRAIN_ARGS...: 4 steps straight (PREFIXstraight/) equal 2 (PREFIXsplit/), then
# --resume to 4, bit for bit; WHAT names the file in the failure ("SD3.5 embedding").
flow_check_resume() {
    local what=$1 straight=${2}straight split=${2}split d
    shift 2
    for d in $straight $split; do mkdir -p $d && cp fresh/star.safetensors $d/; done
    run_host train "$@" --embedding $straight/star.safetensors --max-steps 4 --log-dir $straight/logs
    expect_rc 0 "train 4 steps ($what)"
    run_host train "$@" --embedding $split/star.safetensors --max-steps 2 --log-dir $split/logs
    expect_rc 0 "train 2 steps ($what)"
    local state
    state=$(run_folder $split/logs star)/star.state.safetensors
    expect_file "$state" "the state after 2 steps ($what)"
    run_host train "$@" --embedding $split/star.safetensors --max-steps 4 --log-dir $split/logs --resume "$state"
    expect_rc 0 "resume to 4 steps ($what)"
    cmp -s $split/star.safetensors $straight/star.safetensors ||
        fail "the resumed $what differs from the uninterrupted one"
}

# flow_check_divergence TRAIN_ARGS...: the divergence guard watches each table against its own encoder's token
# embedding: a t5xxl rate that blows up stops the run with a sentence naming the table.
flow_check_divergence() {
    mkdir -p dv && cp fresh/star.safetensors dv/
    run_host train "$@" --embedding dv/star.safetensors --max-steps 2 --learn-rate 0.01 --lr-t5xxl 100000 \
        --log-dir dv/logs --preview-every 0
    expect_rc 1 "a t5xxl table that diverges"
    grep -q 'the embedding diverged: .* vector (t5xxl) ' "$ERR" ||
        fail "the divergence is not named with its t5xxl table"
}
