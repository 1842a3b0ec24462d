#!/usr/bin/env bash
# `sdt-host generate --t5-max-length N` (ABI 1.10, sdt_generate_request.t5_max_length; issue 30) on the tiny SD3.5
# and Flux.1 all-in-one files (sdt-make-checkpoint; the demo's CLIP tokenizer in tokenizer/, T5's in t5_tokenizer/):
#  - left out, each family renders at its pipeline's T5 length: the image is the one of an explicit --t5-max-length
#    of Flux dev's 512, schnell's 256 and SD3.5's 256, byte for byte;
#  - another length reaches the T5 encoder: its image differs (Flux dev at 16, SD3.5 at 16; T5's padding tokens take
#    part in the joint attention, so the sequence's length changes the picture);
#  - --t5-max-length outside 0..512 is a usage error naming the option and the range; on an SD 1.x model it is
#    refused by name (the plugin's request.t5_max_length, renamed) and no image is written.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer
for c in tiny-flux-dev tiny-flux-schnell tiny-sd3; do
    "$SDT_MAKE_CHECKPOINT" --config $c --out models/$c.safetensors >/dev/null || fail "$c"
done
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' 1000 rows fit the demo's vocabulary
flow_t5_tokenizer models/t5_tokenizer

gen() { # MODEL OUT [ARGS...]
    local model=$1 out=$2
    shift 2
    run_host generate --model "models/$model.safetensors" --prompt "a yellow star cat" --negative "a dog" \
        --width 64 --height 64 --device cpu --seed "$SEED" --steps 2 --cfg 2 --out "$out" "$@"
}

# left out: the family's length, byte for byte
for case in "tiny-flux-dev 512" "tiny-flux-schnell 256" "tiny-sd3 256"; do
    set -- $case
    gen "$1" "$1-default.png"
    expect_rc 0 "generate on $1 at the family's T5 length"
    gen "$1" "$1-$2.png" --t5-max-length "$2"
    expect_rc 0 "generate on $1 with --t5-max-length $2"
    expect_file "$1-$2.png" "the image of $1 at $2 T5 tokens"
    cmp -s "$1-default.png" "$1-$2.png" || fail "$1 without --t5-max-length does not render at its family's $2 tokens"
done

# another length changes the picture
for m in tiny-flux-dev tiny-sd3; do
    gen $m $m-16.png --t5-max-length 16
    expect_rc 0 "generate on $m with --t5-max-length 16"
    expect_file $m-16.png "the image of $m at 16 T5 tokens"
    cmp -s $m-default.png $m-16.png && fail "--t5-max-length 16 on $m renders the image of the family's length"
done

# refusals
for n in 513 -1; do
    gen tiny-flux-dev bad.png --t5-max-length $n
    expect_usage "--t5-max-length $n" "--t5-max-length $n" "1..512"
done
[ -e bad.png ] && fail "a refused --t5-max-length wrote an image"
run_host generate --model "$MODEL" --prompt "a red square" --width 64 --height 64 --steps 2 --device cpu \
    --t5-max-length 64 --out sd1.png
expect_error "--t5-max-length on an SD 1.x model" "--t5-max-length 64" "no T5 encoder" "UNet"
grep -qF "request." "$ERR" && fail "the refusal names the request's field, not the option: $(cat "$ERR")"
[ -e sd1.png ] && fail "the refused SD 1.x generate wrote an image"

e2e_finish
