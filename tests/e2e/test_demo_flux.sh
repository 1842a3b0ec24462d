#!/usr/bin/env bash
# The Flux demo, small (issue 30): `sdt-host demo --model-family flux` trains the embedding of the held-out yellow
# star on the shipped Flux demo model (build/host-sim/demo/model-flux/: models/demo_flux/'s files in BFL's layout)
# for a few steps and draws its grid with the concept score of each row. Whether it learns takes minutes and is
# measured in models/demo_flux/README.md; this checks that the demo runs and says what it learned:
#  - the model's files are in the demo folder, where sdt-host finds them;
#  - the default (both tables): the embedding has a clip_l and a t5xxl table, both moved, the initial copy kept,
#    the grid drawn and the three score lines printed;
#  - --encoders clip_l and t5xxl: the other table keeps its initial bytes.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh" # table_bytes

FLUX=$SDT_DEMO/model-flux
for f in flux1-demo.safetensors clip_l.safetensors t5xxl.safetensors ae.safetensors t5_tokenizer/tokenizer.json \
    tokenizer/vocab.json tokenizer/merges.txt; do
    expect_file "$FLUX/$f" "the Flux demo model's $f"
done

score_of() { sed -n "s/^  $1[^:]*: *\([0-9.]*\) (.*/\1/p" "$OUT" | head -n 1; }

run_host demo --model-family flux --out both --max-steps 3 --save-every 3 --learn-rate 0.05 --seed "$SEED" --grid-seeds 1
expect_rc 0 "demo --model-family flux"
grep -qF "Trained the Flux embedding's clip_l and t5xxl tables" "$OUT" || fail "the Flux demo does not say which tables trained"
final=both/embeddings/sdtrain-demo.safetensors
initial=both/embeddings/sdtrain-demo-initial.safetensors
expect_file "$final" "the Flux embedding"
expect_file "$initial" "the initial copy"
expect_file both/demo_grid.png "the comparison grid"
for s in before after "the words"; do
    [ -n "$(score_of "$s")" ] || fail "no '$s' concept score: $(tail -n 6 "$OUT")"
done
run_host inspect --json "$final"
expect_rc 0 "inspect the Flux embedding"
[ "$(json_get "$OUT" family)" = flux ] || fail "inspect does not call the embedding a Flux one: $(cat "$OUT")"
for k in clip_l t5xxl; do
    [ "$(table_bytes "$final" $k)" != "$(table_bytes "$initial" $k)" ] || fail "training both tables left $k unchanged"
done

# One table at a time: the other keeps its bytes.
for only in clip_l t5xxl; do
    other=$([ $only = clip_l ] && echo t5xxl || echo clip_l)
    run_host demo --model-family flux --encoders $only --out $only --max-steps 2 --save-every 2 --learn-rate 0.05 --seed "$SEED" \
        --grid-seeds 0
    expect_rc 0 "demo --model-family flux --encoders $only"
    grep -qF "Trained the Flux embedding's $only table" "$OUT" || fail "--encoders $only: the demo does not say which table trained"
    f=$only/embeddings/sdtrain-demo.safetensors i=$only/embeddings/sdtrain-demo-initial.safetensors
    [ "$(table_bytes "$f" $only)" != "$(table_bytes "$i" $only)" ] || fail "--encoders $only left $only unchanged"
    [ "$(table_bytes "$f" $other)" = "$(table_bytes "$i" $other)" ] || fail "--encoders $only changed $other"
done
e2e_finish
