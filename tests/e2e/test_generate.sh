#!/usr/bin/env bash
# `sdt-host generate` on the demo model through the hypernetwork factory's applier (ABI 1.4): a PNG of the size
# asked; the same seed gives the same image; a hypernetwork at strength 0 gives exactly the image without it and at
# strength 1 another one; an embedding named in the prompt changes it and one not named does not; chaining a second one changes it again and the order matters; --out is never replaced
# without --overwrite; every bad value is one sentence (or a usage error) naming the option, and nothing is written.
source "$(dirname "$0")/e2e_lib.sh"

GEN=(generate --model "$MODEL" --prompt "a red square" --negative "blurry" --width 64 --height 64 --steps 3 --cfg 5
     --device cpu --seed "$SEED")

# Hypernetworks for the demo model: cross-attention 128 wide, self-attention at 64.
run_host create-hypernetwork --name one --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork one"
run_host create-hypernetwork --name two --sizes 128 --activation relu --layer-norm --out hn
expect_rc 0 "create-hypernetwork two"

run_host "${GEN[@]}" --out plain.png
expect_rc 0 "generate without a hypernetwork"
grep -qF "Generated: plain.png" "$OUT" || fail "generate does not print the image's path"
expect_file plain.png "the generated image"
head -c 8 plain.png | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a' || fail "plain.png is not a PNG"
[ "$(od -An -tu1 -j16 -N8 plain.png | tr -s ' ')" = " 0 0 0 64 0 0 0 64" ] || fail "plain.png is not 64 x 64"

run_host "${GEN[@]}" --out again.png
expect_rc 0 "generate again"
cmp -s plain.png again.png || fail "the same seed gave another image"

run_host "${GEN[@]}" --hypernetwork hn/one.pt:0 --out zero.png
expect_rc 0 "generate with a hypernetwork at strength 0"
cmp -s plain.png zero.png || fail "a hypernetwork at strength 0 changed the image"

run_host "${GEN[@]}" --hypernetwork hn/one.pt --out full.png
expect_rc 0 "generate with a hypernetwork at strength 1 (the default)"
cmp -s plain.png full.png && fail "a hypernetwork at strength 1 left the image as it was"
run_host "${GEN[@]}" --hypernetwork hn/one.pt:1 --out full1.png
cmp -s full.png full1.png || fail "FILE and FILE:1 gave different images"

run_host "${GEN[@]}" --hypernetwork hn/one.pt:1 --hypernetwork hn/two.pt:1.5 --out chain.png
expect_rc 0 "generate with a chain of two"
cmp -s full.png chain.png && fail "the second hypernetwork of the chain changed nothing"
run_host "${GEN[@]}" --hypernetwork hn/two.pt:1.5 --hypernetwork hn/one.pt:1 --out reversed.png
expect_rc 0 "generate with the chain reversed"
cmp -s chain.png reversed.png && fail "the chain's order made no difference"

# An embedding: its name in the prompt stands for its vectors; a prompt without the name is unchanged by it.
new_embedding emb tok 2
run_host "${GEN[@]}" --embedding emb/tok.safetensors --out emb_unused.png
expect_rc 0 "generate with an embedding the prompt does not name"
cmp -s plain.png emb_unused.png || fail "an embedding the prompt does not name changed the image"
GEN_TOK=("${GEN[@]}")
GEN_TOK[4]="a tok square"
run_host "${GEN_TOK[@]}" --out tok_word.png
expect_rc 0 "generate with the word tok"
run_host "${GEN_TOK[@]}" --embedding emb/tok.safetensors --out tok_emb.png
expect_rc 0 "generate with the embedding named in the prompt"
cmp -s tok_word.png tok_emb.png && fail "the embedding named in the prompt changed nothing"

keep_copy plain.png
run_host "${GEN[@]}" --out plain.png
expect_error "an existing --out" "plain.png" "already exists" "--overwrite"
expect_untouched plain.png "an existing --out"
run_host "${GEN[@]}" --hypernetwork hn/one.pt --out plain.png --overwrite
expect_rc 0 "--overwrite replaces --out"
cmp -s plain.png full.png || fail "--overwrite did not write the new image"

run_host "${GEN[@]}" --hypernetwork hn/missing.pt --out bad.png
expect_error "a missing hypernetwork" "hn/missing.pt"
run_host "${GEN[@]}" --hypernetwork hn/one.pt:nan --out bad.png
expect_usage "a NaN strength" "--hypernetwork" "finite"
run_host "${GEN[@]}" --width 60 --out bad.png
expect_error "a width the model cannot take" "multiple of"
run_host "${GEN[@]}" --steps 0 --out bad.png
expect_usage "zero steps" "--steps"
run_host "${GEN[@]}" --cfg 0.5 --out bad.png
expect_usage "a cfg below 1" "--cfg"
run_host "${GEN[@]}" --device tpu --out bad.png
expect_usage "an unknown device" "--device" "tpu"
run_host generate --prompt x --out bad.png
expect_usage "no --model" "--model"
run_host "${GEN[@]}"
expect_usage "no --out" "--out"
run_host generate --model "$WORK/nothing_here" --prompt x --width 64 --height 64 --device cpu --out bad.png
expect_error "a missing model" "nothing_here"
[ ! -e bad.png ] || fail "a refused generate left bad.png"
e2e_finish
