#!/usr/bin/env bash
# sdt-demo-eval draws and scores a transformer model's grid (issue 30: the Flux demo's evaluation), here on the tiny
# SD3.5 all-in-one file (sdt-make-checkpoint --config tiny-sd3; the demo's CLIP tokenizer in tokenizer/, a small T5
# vocabulary in t5_tokenizer/), as generate draws it (flow-matching Euler, the family's shift, CFG):
#  - the embedding grid's three rows are scored ("score words|initial|learned MEAN HITS N") and the PNG written;
#  - the table embedding's rows reach both encoders' slots: the same file as --initial and --learned scores the same,
#    and the run repeats its bytes (seeded);
#  - --t5-max-length changes what T5 reads (the prompt's length), and is refused on a UNet model, which has no T5;
#  - a hypernetwork grid of a transformer model is refused by name.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
: "${SDT_DEMO_EVAL:?SDT_DEMO_EVAL must name sdt-demo-eval}"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' 1000 rows fit the demo's vocabulary
flow_t5_tokenizer models/t5_tokenizer \
    '["▁a",-1.5],["▁on",-1],["▁yellow",-4],["▁star",-4],["▁background",-3],["▁center",-3]'
run_host create-embedding --name sdtrain-demo --vectors 2 --init-text "a star" --model models/sd35.safetensors \
    --out emb
expect_rc 0 "create an SD3.5 embedding"
emb=emb/sdtrain-demo.safetensors

# eval OUT_STEM ARGS...: sdt-demo-eval on the tiny SD3.5 model; OUT_STEM.txt (stdout), OUT_STEM.err
eval_case() {
    local stem=$1
    shift
    "$SDT_DEMO_EVAL" --model models/sd35.safetensors --seeds 2 --steps 3 --seed "$SEED" "$@" >"$stem.txt" 2>"$stem.err"
}
row_of() { sed -n "s/^score $2 \(.*\)$/\1/p" "$1.txt"; }

eval_case a --initial "$emb" --learned "$emb" --t5-max-length 16 --grid a.png ||
    fail "sdt-demo-eval on the SD3.5 model failed: $(cat a.err)"
for row in words initial learned; do
    line=$(row_of a "$row")
    printf '%s\n' "$line" | grep -qE '^[01]\.[0-9]{3} [0-2] 2$' ||
        fail "the $row row's score line is '$line', expected 'MEAN HITS 2'"
done
[ "$(row_of a initial)" = "$(row_of a learned)" ] || fail "one embedding scores differently in two rows"
head -c 8 a.png | od -An -c | grep -q 'P   N   G' || fail "the grid is not a PNG"

eval_case b --initial "$emb" --learned "$emb" --t5-max-length 16 --grid b.png || fail "the second run failed: $(cat b.err)"
cmp -s a.png b.png || fail "the same request drew different grids"

# T5's length is what T5 reads: 4 tokens cut the prompt, so the pictures differ.
eval_case c --learned "$emb" --t5-max-length 4 --grid c.png || fail "--t5-max-length 4 failed: $(cat c.err)"
eval_case d --learned "$emb" --t5-max-length 16 --grid d.png || fail "--t5-max-length 16 failed: $(cat d.err)"
cmp -s c.png d.png && fail "--t5-max-length did not change what T5 read"

eval_case e --hypernetwork nowhere.pt
[ $? = 1 ] || fail "a hypernetwork grid of a transformer model did not fail"
grep -qF "hypernetworks to SD3.5/Flux" e.err || fail "the hypernetwork refusal does not say why: $(cat e.err)"
"$SDT_DEMO_EVAL" --model "$MODEL/sdtrain-demo.safetensors" --t5-max-length 16 --seeds 1 >f.txt 2>f.err
[ $? = 1 ] || fail "--t5-max-length on a UNet model did not fail"
grep -qF "no T5" f.err || fail "the --t5-max-length refusal does not say why: $(cat f.err)"
e2e_finish
