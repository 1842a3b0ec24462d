#!/usr/bin/env bash
# The SD3.5 paths' bad inputs through sdt-host (issue 30), each one sentence naming the file and what to give,
# nothing written: the tiny SD3.5 model without its parts (sdt-make-checkpoint --config tiny-sd3 --without ...) and
# its parts as files of their own.
#  - CLIP-L and CLIP-G swapped, or CLIP-G given for both (the widths add up either way: refused by their order);
#  - a 4-channel VAE (SD 1.x's, diffusers' layout) for the 16-channel transformer; a truncated T5 file;
#  - fp8 storage reads and generates: T5 as e5m2, CLIP-L and a lone VAE file as e4m3;
#  - T5's tokenizer broken: tokenizer.json cut short, spiece.model of random bytes, an empty spiece.model;
#  - an embedding whose tables do not match the model's encoders: a Flux.1 embedding (no clip_g) and an SD3.5
#    embedding with a table of another width;
#  - --t5-max-length above the 512 T5 reads.
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
source "$E2E_DIR/e2e_lib.sh"
source "$E2E_DIR/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is not installed; skipping"; exit 77; }

mkdir -p models/t5_tokenizer data
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --without clip_l,clip_g,t5xxl,vae --out models/bare.safetensors \
    >/dev/null || fail "tiny-sd3 without its parts"
for part in clip_l clip_g t5xxl vae; do
    "$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part $part --out $part.safetensors >/dev/null || fail "the $part part"
done
cp -r "$MODEL/tokenizer" models/tokenizer
flow_t5_tokenizer models/t5_tokenizer
cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" data/

# gen OUT ARGS...: a 64x64 image in 2 steps from the bare model and the parts ARGS name
gen() {
    local out=$1
    shift
    run_host generate --model models/bare.safetensors --prompt "a cat" --width 64 --height 64 --steps 2 --out "$out" "$@"
}
gen ok.png --clip-l clip_l.safetensors --clip-g clip_g.safetensors --t5xxl t5xxl.safetensors --vae vae.safetensors
expect_rc 0 "generate from the parts"

gen swapped.png --clip-l clip_g.safetensors --clip-g clip_l.safetensors --t5xxl t5xxl.safetensors --vae vae.safetensors
expect_error "CLIP-L and CLIP-G swapped" "clip_g.safetensors" "clip_l.safetensors" "swapped"
gen both.png --clip-l clip_g.safetensors --clip-g clip_g.safetensors --t5xxl t5xxl.safetensors --vae vae.safetensors
expect_error "CLIP-G given for both" "one encoder was given for both"

"$SDT_MAKE_CHECKPOINT" --config tiny --layout diffusers --out sd1 >/dev/null || fail "a tiny SD 1.x folder"
gen vae4.png --clip-l clip_l.safetensors --clip-g clip_g.safetensors --t5xxl t5xxl.safetensors \
    --vae sd1/vae/diffusion_pytorch_model.safetensors
expect_error "a 4-channel VAE" "diffusion_pytorch_model.safetensors" "makes 4" "16-channel VAE"

head -c 3000 t5xxl.safetensors >t5_cut.safetensors
gen cut.png --clip-l clip_l.safetensors --clip-g clip_g.safetensors --t5xxl t5_cut.safetensors --vae vae.safetensors
expect_error "a truncated T5 file" "t5_cut.safetensors" "truncated"

"$SDT_MAKE_CHECKPOINT" --pack plain --t5xxl t5xxl.safetensors --fp8 e5m2 --out t5xxl_fp8_e5m2.safetensors >/dev/null ||
    fail "pack an fp8 (e5m2) T5"
gen fp8.png --clip-l clip_l.safetensors --clip-g clip_g.safetensors --t5xxl t5xxl_fp8_e5m2.safetensors \
    --vae vae.safetensors
expect_rc 0 "generate with an e5m2 T5"
# fp8 CLIP-L (e4m3) and an fp8 lone VAE file (ae.safetensors' layout, keys at the top) read too
"$SDT_MAKE_CHECKPOINT" --pack plain --clip-l clip_l.safetensors --fp8 e4m3 --out clip_l_fp8.safetensors >/dev/null ||
    fail "pack an fp8 CLIP-L"
"$SDT_MAKE_CHECKPOINT" --pack plain --vae vae.safetensors --fp8 e4m3 --out ae_fp8.safetensors >/dev/null ||
    fail "pack an fp8 VAE"
gen fp8b.png --clip-l clip_l_fp8.safetensors --clip-g clip_g.safetensors --t5xxl t5xxl.safetensors \
    --vae ae_fp8.safetensors
expect_rc 0 "generate with an fp8 CLIP-L and an fp8 VAE"

# T5's tokenizer, broken three ways (generate reads it beside the model)
cp models/t5_tokenizer/tokenizer.json tokenizer.json.good
head -c 80 tokenizer.json.good >models/t5_tokenizer/tokenizer.json
run_host generate --model models/sd35.safetensors --prompt "a cat" --width 64 --height 64 --steps 2 --out tok1.png
expect_error "a cut tokenizer.json" "tokenizer.json" "not valid JSON"
rm models/t5_tokenizer/tokenizer.json
head -c 512 /dev/urandom >models/t5_tokenizer/spiece.model
printf '\x0a' | dd of=models/t5_tokenizer/spiece.model bs=1 count=1 conv=notrunc 2>/dev/null # a field, then garbage
run_host generate --model models/sd35.safetensors --prompt "a cat" --width 64 --height 64 --steps 2 --out tok2.png
expect_rc 1 "a spiece.model of random bytes"
grep -q 'spiece.model' "$ERR" || fail "a broken spiece.model: the sentence does not name the file"
: >models/t5_tokenizer/spiece.model
run_host generate --model models/sd35.safetensors --prompt "a cat" --width 64 --height 64 --steps 2 --out tok3.png
expect_error "an empty spiece.model" "spiece.model" "no pieces"
rm models/t5_tokenizer/spiece.model
cp tokenizer.json.good models/t5_tokenizer/tokenizer.json
for png in swapped both vae4 cut tok1 tok2 tok3; do [ -e $png.png ] && fail "a refused generate wrote $png.png"; done

# embeddings whose tables do not match the model's encoders
python3 "$E2E_DIR/write_token_table.py" flux_clip_l.safetensors text_model.embeddings.token_embedding.weight 1000 \
    12 50 || fail "a Flux CLIP-L token table"
python3 "$E2E_DIR/write_token_table.py" flux_t5.safetensors shared.weight 32 24 51 || fail "a Flux T5 token table"
"$SDT_MAKE_CHECKPOINT" --config tiny-flux --out flux-diffusers.safetensors >/dev/null || fail "tiny-flux"
"$SDT_MAKE_CHECKPOINT" --pack bfl-flux --transformer flux-diffusers.safetensors --out models/flux1.safetensors \
    >/dev/null || fail "pack bfl-flux"
run_host create-embedding --name fluxcat --vectors 2 --init-text "" --model models/flux1.safetensors \
    --clip-l flux_clip_l.safetensors --t5xxl flux_t5.safetensors --out emb
expect_rc 0 "create a Flux embedding"
run_host generate --model models/sd35.safetensors --embedding emb/fluxcat.safetensors --prompt "a fluxcat" \
    --width 64 --height 64 --steps 2 --out fluxemb.png
expect_error "a Flux embedding on SD3.5" "fluxcat.safetensors" "no clip_g table" "Flux.1 embedding"
run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out emb
expect_rc 0 "create an SD3.5 embedding"
python3 - emb/star.safetensors emb/wide.safetensors <<'PY' || fail "writing an embedding with a wider t5xxl table"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); body = raw[8 + n:]
out, data = {}, b""
for k, v in h.items():
    if k == "__metadata__":
        continue
    b0, b1 = v["data_offsets"]
    rows, cols = v["shape"]
    chunk = body[b0:b1]
    if k == "t5xxl":  # every row 8 values wider
        chunk = b"".join(chunk[r * cols * 4:(r + 1) * cols * 4] + b"\0" * 32 for r in range(rows))
        cols += 8
    out[k] = {"dtype": "F32", "shape": [rows, cols], "data_offsets": [len(data), len(data) + len(chunk)]}
    data += chunk
header = json.dumps(out).encode()
header += b" " * (-len(header) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(header)) + header + data)
PY
run_host generate --model models/sd35.safetensors --embedding emb/wide.safetensors --prompt "a wide" \
    --width 64 --height 64 --steps 2 --out wide.png
expect_error "a t5xxl table of another width" "wide.safetensors" "t5xxl table is [2, 104]" "takes 96"

run_host train --model models/sd35.safetensors --embedding emb/star.safetensors --dataset data --max-steps 1 \
    --width 64 --height 64 --device cpu --seed "$SEED" --t5-max-length 513 --log-dir logs
expect_error "--t5-max-length 513" "--t5-max-length" "512"
[ -e logs ] && fail "a refused train wrote its log folder"

e2e_finish
