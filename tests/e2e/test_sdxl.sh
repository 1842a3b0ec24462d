#!/usr/bin/env bash
# SDXL end to end through sdt-host on a tiny SDXL-architecture checkpoint, on the CPU (issue 16):
# create an embedding (clip_l + clip_g, both initialised from the init text), train it, resume it
# bit for bit, inspect it, generate with it; a hypernetwork with SDXL's K/V widths trained and
# applied; joint training; and the sentences for an embedding of the other family.
source "$(dirname "$0")/e2e_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }
"$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --out sdxl.safetensors >/dev/null || fail "sdt-make-checkpoint tiny-sdxl"
TOK=(--tokenizer "$MODEL/tokenizer") # the tiny model's vocabulary is the demo's
XL=(--model sdxl.safetensors "${TOK[@]}" --width 64 --height 64 --device cpu --seed "$SEED")
TRAIN=(train --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${XL[@]}" --preview-every 0
       --save-every 0 --csv-every 1)

# tensor shapes of a safetensors file, "name:d0xd1" sorted
shapes() {
    python3 - "$1" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
print(" ".join(sorted("%s:%s" % (k, "x".join(map(str, v["shape"]))) for k, v in h.items() if k != "__metadata__")))
PY
}

run_host create-embedding --name sxl --init-text "a cat" --vectors 2 --model sdxl.safetensors "${TOK[@]}" --out made
expect_rc 0 "create-embedding on SDXL"
[ "$(shapes made/sxl.safetensors)" = "clip_g:2x48 clip_l:2x32" ] ||
    fail "the SDXL embedding's tensors are '$(shapes made/sxl.safetensors)', expected clip_g [2, 48] and clip_l [2, 32]"
run_host inspect made/sxl.safetensors
expect_rc 0 "inspect the SDXL embedding"
grep -q "SDXL clip_l + clip_g" "$OUT" || fail "inspect does not call the embedding SDXL's"
python3 - made/sxl.safetensors <<'PY' || fail "create-embedding left a table of the SDXL embedding empty"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
for k in ("clip_l", "clip_g"):
    b0, b1 = h[k]["data_offsets"]; v = struct.unpack("<%df" % ((b1 - b0) // 4), raw[8 + n + b0:8 + n + b1])
    sys.exit(1) if max(abs(x) for x in v) == 0 else None
PY

for d in straight split; do mkdir -p "$d" && cp made/sxl.safetensors "$d/"; done
run_host "${TRAIN[@]}" --embedding straight/sxl.safetensors --max-steps 4 --log-dir straight/logs --preview-every 2 \
    --batch-size 2
expect_rc 0 "train an SDXL embedding 4 steps"
cmp -s straight/sxl.safetensors made/sxl.safetensors && fail "training left the SDXL embedding as it was created"
[ "$(shapes straight/sxl.safetensors)" = "clip_g:2x48 clip_l:2x32" ] || fail "the trained SDXL embedding lost a table"
expect_file "$(run_folder straight/logs sxl)/images/sxl-2.png" "the preview at step 2"
grep -q "^4," "$(run_folder straight/logs sxl)/textual_inversion_loss.csv" || fail "the loss CSV has no step 4"
run_host "${TRAIN[@]}" --embedding split/sxl.safetensors --max-steps 2 --log-dir split/logs --batch-size 2
expect_rc 0 "train 2 steps"
run_host "${TRAIN[@]}" --embedding split/sxl.safetensors --max-steps 4 --log-dir split/logs --batch-size 2 \
    --resume "$(run_folder split/logs sxl)/sxl.state.safetensors"
expect_rc 0 "resume to 4 steps"
cmp -s split/sxl.safetensors straight/sxl.safetensors || fail "the resumed SDXL embedding differs from the uninterrupted one"
card=$(run_folder straight/logs sxl)/image_embeddings/sxl-2.png
run_host inspect "$card"
expect_rc 0 "inspect the SDXL embedding's PNG card"
grep -qE "^vectors: +2 x 80 \(32 clip_l \+ 48 clip_g\)$" "$OUT" || fail "the PNG card does not hold both tables (2 x 32 + 48)"
grep -qE "^family: +SDXL" "$OUT" || fail "inspect does not give the card's family"
grep -qE "^name: +sxl$" "$OUT" || fail "the SDXL card lost its name (sdtrain's info chunk; the file is sxl-2.png)"
# the card as A1111 1.10 and Forge load it (their loader's logic, tests/ti/a1111_card_loader.py; needs torch)
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    loaded=$(/usr/bin/python3 "$(dirname "$0")/../ti/a1111_card_loader.py" "$card" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d.get("error") or " ".join("%s:%s" % (k, "x".join(map(str, v["shape"]))) for k, v in sorted(d["tensors"].items())))')
    [ "$loaded" = "clip_g:2x48 clip_l:2x32" ] || fail "A1111/Forge's loader does not take the SDXL card: $loaded"
fi

# the diffusers layout (text_encoder_2/) trains the same way
"$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --layout diffusers --out sdxl-diffusers >/dev/null || fail "tiny-sdxl diffusers"
mkdir -p dfolder && cp made/sxl.safetensors dfolder/
run_host "${TRAIN[@]/sdxl.safetensors/sdxl-diffusers}" --embedding dfolder/sxl.safetensors --max-steps 1 --log-dir dlogs
expect_rc 0 "train on an SDXL diffusers folder"
# that folder made a single file (--from): SDXL's single-file layout, bigG as conditioner.embedders.1.model.*
# (the generator's file less logit_scale, which no folder holds), and it trains as the generator's file does
"$SDT_MAKE_CHECKPOINT" --from sdxl-diffusers --layout ldm --out from-folder.safetensors >/dev/null ||
    fail "sdt-make-checkpoint --from the SDXL folder --layout ldm"
made_shapes=$(shapes from-folder.safetensors | tr ' ' '\n')
want_shapes=$(shapes sdxl.safetensors | tr ' ' '\n' | grep -vx 'conditioner.embedders.1.model.logit_scale:')
[ "$made_shapes" = "$want_shapes" ] || fail "the single file made from the SDXL folder has other tensors than the generator's: \
$(diff <(echo "$want_shapes") <(echo "$made_shapes") | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
for m in sdxl from-folder; do
    mkdir -p "one-$m" && cp made/sxl.safetensors "one-$m/"
    run_host "${TRAIN[@]/sdxl.safetensors/$m.safetensors}" --embedding "one-$m/sxl.safetensors" --max-steps 1 \
        --log-dir "one-$m/logs"
    expect_rc 0 "train one step on $m.safetensors"
done
python3 - one-sdxl/sxl.safetensors one-from-folder/sxl.safetensors <<'PY' ||
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
sys.exit(tensors(sys.argv[1]) != tensors(sys.argv[2]))
PY
    fail "one step on the single file made from the folder trains another embedding than on the generator's file"

run_host generate "${XL[@]}" --prompt "a sxl cat" --embedding straight/sxl.safetensors --steps 3 --out e.png
expect_rc 0 "generate with the SDXL embedding"
[ "$(od -An -tu1 -j16 -N8 e.png | tr -s ' ')" = " 0 0 0 64 0 0 0 64" ] || fail "e.png is not a 64 x 64 PNG"
run_host generate "${XL[@]}" --prompt "a sxl cat" --steps 3 --out plain.png
cmp -s e.png plain.png && fail "the embedding changed nothing in the image"

# an embedding of the other family, either way round: one sentence naming both shapes
new_embedding sd1 cat 1
run_host "${TRAIN[@]}" --embedding sd1/cat.safetensors --max-steps 1 --log-dir other
expect_error "an SD 1.x embedding on SDXL" sd1/cat.safetensors "clip_l 32 + clip_g 48" "another model family"
mkdir -p onsd1 && cp made/sxl.safetensors onsd1/
run_host train --dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" \
    --embedding onsd1/sxl.safetensors --max-steps 1 --log-dir other
expect_error "an SDXL embedding on SD 1.x" onsd1/sxl.safetensors "clip_l 32 + clip_g 48 values per vector"

# hypernetworks: SDXL's preset widths are named when they match nothing (the tiny model's are 80, 64)
run_host create-hypernetwork --name big --sizes sdxl --out hn
expect_rc 0 "create-hypernetwork --sizes sdxl"
run_host inspect hn/big.pt
grep -qE '^modules: +2048, 640, 1280$' "$OUT" || fail "--sizes sdxl did not give 2048, 640, 1280"
run_host "${TRAIN[@]}" --hypernetwork hn/big.pt --max-steps 1 --log-dir hnlogs
expect_error "a full-size SDXL hypernetwork on the tiny model" "match no attention" "80,64"
run_host create-hypernetwork --name style --sizes 80,64 --out hn
expect_rc 0 "create-hypernetwork 80,64"
cp hn/style.pt hn/style.pt.before
run_host "${TRAIN[@]}" --hypernetwork hn/style.pt --max-steps 2 --log-dir hnlogs --learn-rate 0.001
expect_rc 0 "train a hypernetwork on SDXL"
cmp -s hn/style.pt hn/style.pt.before && fail "training left the SDXL hypernetwork as it was created"
run_host generate "${XL[@]}" --prompt "a cat" --steps 3 --hypernetwork hn/style.pt --out h.png
expect_rc 0 "generate with the SDXL hypernetwork"
cmp -s h.png plain.png && fail "the hypernetwork changed nothing in the image"

# joint: both files train in one run
cp made/sxl.safetensors joint.safetensors
run_host create-hypernetwork --name jstyle --sizes 80,64 --out hn
run_host "${TRAIN[@]}" --embedding joint.safetensors --hypernetwork hn/jstyle.pt --max-steps 2 --log-dir jlogs \
    --learn-rate 0.001 --embedding-learn-rate 0.005
expect_rc 0 "joint training on SDXL"
cmp -s joint.safetensors made/sxl.safetensors && fail "joint training left the embedding as it was"
# fp16 on SDXL (its VAE overflows fp16): with bf16 the run trains in bf16; on a device without bf16 the VAE
# encodes and decodes in fp32 while the rest stays fp16 (no fallback); a VAE whose diffusers config says
# force_upcast false (the fp16-fix VAE's) keeps fp16 throughout
mkdir -p fp16-bf16 fp16-nobf16 fp16-fix
cp made/sxl.safetensors fp16-bf16/ && cp made/sxl.safetensors fp16-nobf16/ && cp made/sxl.safetensors fp16-fix/
run_host "${TRAIN[@]}" --embedding fp16-bf16/sxl.safetensors --max-steps 2 --precision fp16 --log-dir fp16-bf16/logs
expect_rc 0 "train SDXL with --precision fp16"
grep -q "training in bf16 instead of fp16: SDXL's VAE overflows in fp16" "$OUT" "$ERR" || fail "fp16 with bf16: the switch to bf16 is not said"
SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_DEVICE_NO_BF16=1 run_host "${TRAIN[@]}" --embedding fp16-nobf16/sxl.safetensors \
    --max-steps 2 --precision fp16 --log-dir fp16-nobf16/logs
expect_rc 0 "train SDXL in fp16 on a device without bf16"
grep -q "the VAE encodes and decodes in fp32, the rest trains in fp16" "$OUT" "$ERR" ||
    fail "fp16 without bf16: the fp32 VAE is not said"
expect_csv_precision "$(run_folder fp16-nobf16/logs sxl)/textual_inversion_loss.csv" fp16 "fp16 without bf16"
cp -r sdxl-diffusers sdxl-fp16fix
python3 - sdxl-fp16fix/vae/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["force_upcast"] = False
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
run_host "${TRAIN[@]/sdxl.safetensors/sdxl-fp16fix}" --embedding fp16-fix/sxl.safetensors --max-steps 2 --precision fp16 \
    --log-dir fp16-fix/logs
expect_rc 0 "train SDXL in fp16 with a force_upcast false VAE"
grep -q "training in fp16 as asked: the VAE's config says force_upcast false" "$OUT" "$ERR" ||
    fail "the fp16-fix VAE (force_upcast false) is not recognised"
expect_csv_precision "$(run_folder fp16-fix/logs sxl)/textual_inversion_loss.csv" fp16 "the fp16-fix run"

# an SDXL inpainting model (a 9-channel UNet: latent, mask, masked-image latent) trains, previews and generates as
# the SD 1.x inpainting models do: conditioned on a full mask over a grey image
"$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --unet-in-channels 9 --out sdxl-inpaint.safetensors >/dev/null ||
    fail "sdt-make-checkpoint tiny-sdxl --unet-in-channels 9"
run_host inspect sdxl-inpaint.safetensors
grep -qE '^unet in channels: +9$' "$OUT" || fail "inspect does not give the inpainting UNet's 9 input channels"
INPAINT=("${TRAIN[@]/sdxl.safetensors/sdxl-inpaint.safetensors}")
mkdir -p inpaint && cp made/sxl.safetensors inpaint/ && cp hn/style.pt.before inpaint/style.pt
run_host "${INPAINT[@]}" --embedding inpaint/sxl.safetensors --max-steps 2 --log-dir inpaint/logs --preview-every 2
expect_rc 0 "train an embedding on an SDXL inpainting model"
cmp -s inpaint/sxl.safetensors made/sxl.safetensors && fail "training on the inpainting model left the embedding as it was"
expect_file "$(run_folder inpaint/logs sxl)/images/sxl-2.png" "the inpainting model's preview at step 2"
run_host "${INPAINT[@]}" --hypernetwork inpaint/style.pt --max-steps 2 --log-dir inpaint/hnlogs --learn-rate 0.001
expect_rc 0 "train a hypernetwork on an SDXL inpainting model"
cmp -s inpaint/style.pt hn/style.pt.before && fail "training on the inpainting model left the hypernetwork as it was"
run_host generate "${XL[@]/sdxl.safetensors/sdxl-inpaint.safetensors}" --prompt "a sxl cat" --steps 3 \
    --embedding inpaint/sxl.safetensors --hypernetwork inpaint/style.pt --out inpaint.png
expect_rc 0 "generate with an SDXL inpainting model"
expect_file inpaint.png "the inpainting model's image"
e2e_finish
