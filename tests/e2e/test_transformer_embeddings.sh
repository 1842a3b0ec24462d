#!/usr/bin/env bash
# SD3.5 and Flux.1 embeddings through sdt-host (issue 30): create-embedding on a tiny SAI SD3.5 all-in-one file
# (CLIP-L, CLIP-G and T5 inside) and on a tiny BFL Flux transformer with --clip-l and --t5xxl, T5's tokenizer from
# t5_tokenizer/ beside the model; inspect (text and JSON) names the family and each table; a missing encoder is
# one sentence naming its option; encoder files for an SD 1.x model are refused, and so are encoders that do not meet
# the transformer (a T5 of another width, CLIP-G's file as CLIP-L, SD3.5's two CLIPs swapped), no file written. The values are checked in C
# (tests/ti/test_create_tables.c).
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
source "$E2E_DIR/e2e_lib.sh"
source "$E2E_DIR/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models
# SD3.5: the tiny all-in-one file in SAI's layout (CLIP-L 32, CLIP-G 48, T5 96 inside, meeting its transformer),
# the demo's CLIP tokenizer beside it (the tiny CLIPs' 1000 rows fit its vocabulary)
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part t5xxl --out t5.safetensors >/dev/null || fail "the tiny T5 part"
# Flux: the tiny transformer in BFL's layout reads a context 24 wide and CLIP-L's pooled output of 12, so its
# encoders are files of those widths (create reads only their token embeddings)
"$SDT_MAKE_CHECKPOINT" --config tiny-flux --out flux-diffusers.safetensors >/dev/null || fail "tiny-flux"
"$SDT_MAKE_CHECKPOINT" --pack bfl-flux --transformer flux-diffusers.safetensors --out models/flux1.safetensors \
    >/dev/null || fail "pack bfl-flux"
python3 "$E2E_DIR/write_token_table.py" clip_l_flux.safetensors text_model.embeddings.token_embedding.weight 1000 12 \
    30 || fail "the Flux CLIP-L's token table"
python3 "$E2E_DIR/write_token_table.py" t5_flux.safetensors shared.weight 32 24 31 || fail "the Flux T5's token table"
CLIP=clip_l_flux.safetensors
# T5's vocabulary (transformers' tokenizer.json) where ComfyUI users have it: t5_tokenizer/ beside the model
mkdir -p models/t5_tokenizer
flow_t5_tokenizer models/t5_tokenizer

run_host create-embedding --name sd35-cat --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out emb
expect_rc 0 "create an SD3.5 embedding"
run_host inspect --json emb/sd35-cat.safetensors
expect_rc 0 "inspect the SD3.5 embedding (JSON)"
[ "$(json_get "$OUT" family)" = sd3 ] || fail "SD3.5 embedding: family '$(json_get "$OUT" family)'"
[ "$(json_get "$OUT" vectors)" = 2 ] || fail "SD3.5 embedding: $(json_get "$OUT" vectors) vectors"
for table in clip_l clip_g t5xxl; do
    grep -q "\"encoder\":.*\"$table\"" "$OUT" || fail "the SD3.5 embedding's JSON does not list its $table table"
done
run_host inspect emb/sd35-cat.safetensors
expect_rc 0 "inspect the SD3.5 embedding (text)"
grep -qE '^vectors: +2 x [0-9]+ \([0-9]+ clip_l \+ [0-9]+ clip_g \+ [0-9]+ t5xxl\)$' "$OUT" ||
    fail "inspect's text does not give the tables' widths"
grep -qE '^family: +SD3.5 ' "$OUT" || fail "inspect's text does not name SD3.5"
grep -qE '^init text: +a cat$' "$OUT" || fail "inspect's text lost the init text"

run_host create-embedding --name flux-cat --vectors 3 --init-text "a cat" --model models/flux1.safetensors --out emb
expect_error "Flux without its encoders" "--clip-l FILE" "--t5xxl FILE"
run_host create-embedding --name flux-cat --vectors 3 --init-text "a cat" --model models/flux1.safetensors \
    --clip-l "$CLIP" --t5xxl t5_flux.safetensors --out emb
expect_rc 0 "create a Flux embedding from separate encoder files"
run_host inspect --json emb/flux-cat.safetensors
[ "$(json_get "$OUT" family)" = flux ] || fail "Flux embedding: family '$(json_get "$OUT" family)'"
grep -q '"encoder":.*"clip_g"' "$OUT" && fail "a Flux embedding has a clip_g table"
run_host inspect emb/flux-cat.safetensors
grep -qE '^vectors: +3 x [0-9]+ \([0-9]+ clip_l \+ [0-9]+ t5xxl\)$' "$OUT" || fail "Flux: inspect's widths"
grep -qE '^family: +Flux.1 ' "$OUT" || fail "inspect's text does not name Flux.1"

# T5 stored in fp8 (t5xxl_fp8_e4m3fn.safetensors): read and upcast
"$SDT_MAKE_CHECKPOINT" --pack plain --t5xxl t5_flux.safetensors --fp8 e4m3 --out t5xxl_fp8_e4m3fn.safetensors >/dev/null ||
    fail "pack an fp8 T5"
run_host create-embedding --name flux-fp8 --vectors 2 --init-text "a cat" --model models/flux1.safetensors \
    --clip-l "$CLIP" --t5xxl t5xxl_fp8_e4m3fn.safetensors --out emb
expect_rc 0 "create a Flux embedding with an fp8 T5"
run_host inspect --json emb/flux-fp8.safetensors
[ "$(json_get "$OUT" finite)" = true ] || fail "the fp8 T5's rows are not finite"
# a file that is not the encoder its option takes
run_host create-embedding --name wrong --model models/flux1.safetensors --clip-l t5_flux.safetensors \
    --t5xxl t5_flux.safetensors --out emb
expect_error "a T5 file given as --clip-l" "--clip-l FILE" "t5_flux.safetensors"
# encoders of another model: SD3.5's tiny T5 (96 wide) for this Flux (context 24), CLIP-G's for CLIP-L
run_host create-embedding --name wrong --model models/flux1.safetensors --clip-l "$CLIP" --t5xxl t5.safetensors \
    --out emb
expect_error "a T5 of another width" "t5.safetensors" "context 24" "--t5xxl"
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part clip_g --out clip_g.safetensors >/dev/null || fail "the CLIP-G part"
run_host create-embedding --name wrong --model models/flux1.safetensors --clip-l clip_g.safetensors \
    --t5xxl t5_flux.safetensors --out emb
expect_error "CLIP-G given as --clip-l" "clip_g.safetensors" "pooled output of 12" "--clip-l"
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --without clip_l,clip_g --out models/sd35-no-clip.safetensors >/dev/null ||
    fail "tiny-sd3 without its CLIPs"
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part clip_l --out clip_l.safetensors >/dev/null || fail "the CLIP-L part"
run_host create-embedding --name wrong --model models/sd35-no-clip.safetensors --clip-l clip_g.safetensors \
    --clip-g clip_l.safetensors --out emb
expect_error "SD3.5's CLIPs swapped" "swapped" "--clip-l" "--clip-g"
[ -e emb/wrong.safetensors ] && fail "a refused create wrote a file"

# the encoder options belong to SD3.5 and Flux.1
run_host create-embedding --name sd1 --model "$MODEL" --t5xxl t5.safetensors --out emb
expect_error "--t5xxl for an SD 1.x model" "--t5xxl" "SD3.5"
[ -e emb/sd1.safetensors ] && fail "a refused create wrote a file"

e2e_finish
