#!/usr/bin/env bash
# The demo learns (issue 11): a short demo run with a fixed seed trains the embedding of the
# held-out concept (a yellow star) on the shipped demo model, and the concept score of the
# learned embedding's pictures rises clearly above the initial embedding's. The shipped model
# converted to a diffusers folder draws the same pictures, byte for byte. (Resuming mid-way to
# the same result on this model is e2e_resume_bit_exact.)
source "$(dirname "$0")/e2e_lib.sh"
: "${SDT_DEMO_EVAL:?SDT_DEMO_EVAL must name sdt-demo-eval}"
: "${SDT_MAKE_CHECKPOINT:?SDT_MAKE_CHECKPOINT must name sdt-make-checkpoint}"

# Fixed settings, so the numbers are the same on every run: 100 steps at 0.05, 3 seeds.
run_host --out demo --max-steps 100 --learn-rate 0.05 --seed 0 --grid-seeds 3
expect_rc 0 "demo --max-steps 100"
score_of() { sed -n "s/^  $1[^:]*: *\([0-9.]*\) (.*/\1/p" "$OUT" | head -n 1; }
before=$(score_of "before")
after=$(score_of "after")
echo "concept score: before $before, after $after (3 seeds)"
[ -n "$before" ] && [ -n "$after" ] || fail "the demo printed no concept scores: $(tail -n 5 "$OUT")"
expect_file demo/demo_grid.png "the comparison grid"
if [ -n "$before" ] && [ -n "$after" ]; then
    awk -v b="$before" -v a="$after" 'BEGIN { exit !(a >= 0.5 && a >= b + 0.3) }' ||
        fail "the concept score rose from $before to only $after (expected at least 0.5 and 0.3 above the start)"
fi

# The same model as a diffusers folder (tokenizer inside): identical pictures and scores.
SINGLE=$MODEL/sdtrain-demo.safetensors
"$SDT_MAKE_CHECKPOINT" --from "$SINGLE" --layout diffusers --out diffusers >/dev/null 2>make.err ||
    fail "converting $SINGLE to a diffusers folder failed: $(cat make.err)"
cp -r "$MODEL/tokenizer" diffusers/tokenizer
learned=demo/embeddings/sdtrain-demo.safetensors
"$SDT_DEMO_EVAL" --model "$SINGLE" --learned "$learned" --seeds 2 --steps 8 --grid single.png >single.txt 2>&1 ||
    fail "sdt-demo-eval on the single file failed: $(cat single.txt)"
"$SDT_DEMO_EVAL" --model diffusers --learned "$learned" --seeds 2 --steps 8 --grid folder.png >folder.txt 2>&1 ||
    fail "sdt-demo-eval on the diffusers folder failed: $(cat folder.txt)"
cmp -s single.png folder.png || fail "the diffusers copy draws different pictures than the single file"
cmp -s single.txt folder.txt || fail "the diffusers copy scores differently: $(cat single.txt) vs $(cat folder.txt)"
e2e_finish
