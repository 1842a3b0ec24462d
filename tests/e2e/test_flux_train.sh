#!/usr/bin/env bash
# Flux.1 embeddings train end to end through sdt-host (issue 30) on the tiny Flux dev all-in-one file (ComfyUI's
# layout: sdt-make-checkpoint --config tiny-flux-dev; the demo's CLIP tokenizer in tokenizer/, T5's in t5_tokenizer/),
# T5's sequence cut to 64 tokens (--t5-max-length) to keep it seconds:
#  - every table (clip_l, t5xxl): the validation loss on the training image (fixed timesteps and noise) goes down,
#    previews render (Flux's Euler walk with the resolution shift and dev's guidance), both tables move;
#  - CLIP only (--encoders clip_l): the t5xxl table keeps its bytes, clip_l moves;
#  - --precision bf16 (the transformer's activations in bf16): the validation loss stays finite and goes down, every
#    table moves;
#  - T5 only with its own rate (--encoders t5xxl --lr-t5xxl): clip_l keeps its bytes, t5xxl moves, and the state's
#    keys are the table's (t5xxl.adamw_m ...);
#  - previews default to true CFG 1 (FluxPipeline's), the image of --preview-cfg 1; an explicit value is kept;
#  - resume is bit-exact on the CPU: 4 steps equal 2, then --resume to 4; also with --ema-result and --guidance;
#  - a template whose [name] falls past T5's sequence is refused naming the template and --t5-max-length;
#  - a t5xxl rate that blows up stops the run with the divergence guard's sentence naming the table;
#  - BFL's transformer-only file with --clip-l, --t5xxl and --vae part files, and a diffusers folder (with --vae),
#    train the same tables as the all-in-one file, byte for byte; --clip-g is refused by name;
#  - generate renders with the trained embedding (and without it, a different image);
#  - the shipped Flux demo model (models/demo_flux, diffusers' transformer file alone with its part files) trains
#    a step and its preview of "a red circle" is red.
source "$(dirname "$0")/e2e_lib.sh"
source "$(dirname "$0")/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

mkdir -p models/t5_tokenizer parts/t5_tokenizer data
"$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --out models/flux.safetensors >/dev/null || fail "tiny-flux-dev"
"$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --without clip_l,t5xxl,vae --out parts/flux1-dev.safetensors \
    >/dev/null || fail "tiny-flux-dev's transformer alone"
for p in clip_l t5xxl vae; do
    "$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --part $p --out parts/$p.safetensors >/dev/null ||
        fail "tiny-flux-dev's $p"
done
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part clip_g --out parts/clip_g.safetensors >/dev/null || fail "a CLIP-G"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIP-L's 1000 rows fit the demo's vocabulary
cp -r "$MODEL/tokenizer" parts/tokenizer
flow_t5_tokenizer models/t5_tokenizer
cp models/t5_tokenizer/tokenizer.json parts/t5_tokenizer/
cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" data/

run_host create-embedding --name star --vectors 2 --init-text "a cat" --model models/flux.safetensors --out fresh
expect_rc 0 "create a Flux embedding"

table_bytes fresh/star.safetensors clip_g >/dev/null 2>&1 && fail "a Flux embedding has a clip_g table"

common=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model models/flux.safetensors
        --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --csv-every 1 --t5-max-length 64)

# every table: the loss on the training image goes down, previews render, every table moves
flow_check_every_table "clip_l t5xxl" "${common[@]}"
grep -q 'resolution shift' "$ERR" || fail "the log does not name Flux's resolution shift"

# previews sample with FluxPipeline's true CFG 1 by default (no negative pass): the default's preview is the one of
# an explicit --preview-cfg 1, byte for byte; an explicit --preview-cfg 3 is kept (another image)
for c in default 1 3; do
    mkdir -p cfg$c && cp fresh/star.safetensors cfg$c/
    cfg_arg=(); [ $c = default ] || cfg_arg=(--preview-cfg $c)
    run_host train "${common[@]}" --embedding cfg$c/star.safetensors --max-steps 1 --learn-rate 0.05 \
        --log-dir cfg$c/logs --preview-every 1 --preview-steps 2 --preview-seed 7 "${cfg_arg[@]}"
    expect_rc 0 "a preview with --preview-cfg $c"
    expect_file "$(run_folder cfg$c/logs star)/images/star-1.png" "the preview with --preview-cfg $c"
done
cmp -s "$(run_folder cfgdefault/logs star)/images/star-1.png" "$(run_folder cfg1/logs star)/images/star-1.png" ||
    fail "the default Flux preview is not the one of --preview-cfg 1 (FluxPipeline's true CFG)"
cmp -s "$(run_folder cfg3/logs star)/images/star-1.png" "$(run_folder cfg1/logs star)/images/star-1.png" &&
    fail "an explicit --preview-cfg 3 was not kept: its preview is the one of cfg 1"

# CLIP only: t5xxl keeps its bytes
mkdir -p clip && cp fresh/star.safetensors clip/
run_host train "${common[@]}" --embedding clip/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir clip/logs \
    --encoders clip_l --preview-every 0
expect_rc 0 "train the CLIP-L table only"
flow_expect_kept clip/star.safetensors t5xxl "training CLIP only"
flow_expect_moved clip/star.safetensors clip_l "training CLIP only"

# bf16 (--precision bf16): the loss stays finite and goes down, every table moves
flow_check_bf16 "clip_l t5xxl" "${common[@]}"

# fp16 (--precision fp16): bf16 instead where the device has it, said once; without bf16 (the test hook) fp16 weights
# with the transformer's activations in f32, said once, every step fp16, every table moves
flow_check_fp16 "clip_l t5xxl" "${common[@]}"

# T5 only with its own rate: clip_l keeps its bytes; the state holds the table's own keys
flow_check_t5_alone "clip_l" "${common[@]}"

# resume: 4 steps straight equal 2, then --resume to 4, bit for bit
rcommon=("${common[@]}" --learn-rate "0.05:3, 0.01" --lr-t5xxl 0.1 --preview-every 0)
flow_check_resume "Flux embedding" "" "${rcommon[@]}"

# resume with the average as the result, another guidance, and CLIP-L alone training
ecommon=("${common[@]}" --learn-rate 0.02 --ema 0.9 --ema-result --encoders clip_l --guidance 2.5 --preview-every 0)
flow_check_resume "Flux average" e "${ecommon[@]}"

# the divergence guard watches each table against its own encoder's token embedding
flow_check_divergence "${common[@]}"

# a template that puts [name] past T5's sequence (--t5-max-length 8) is refused at prepare naming the template,
# t5_max_length and the fix (it ended on "every gradient is exactly zero", naming CLIP's window); with the t5xxl
# table not training, T5's cut does not matter and the run trains
mkdir -p t5cut && cp fresh/star.safetensors t5cut/
cut=("${common[@]}" --embedding t5cut/star.safetensors --max-steps 1 --learn-rate 0.05 --log-dir t5cut/logs
     --preview-every 0 --t5-max-length 8)
run_host train "${cut[@]}"
expect_error "[name] past T5's sequence" "style_filewords.txt" "T5's sequence of 8 tokens" "t5-max-length" \
    "cuts the embedding 'star' out" "shorter template"
cmp -s t5cut/star.safetensors fresh/star.safetensors || fail "a refused run changed the embedding"
run_host train "${cut[@]}" --encoders clip_l
expect_rc 0 "the CLIP-L table alone with [name] past T5's sequence"

# BFL's transformer-only file with the part files as people have them
mkdir -p bfl && cp fresh/star.safetensors bfl/
pcommon=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --model parts/flux1-dev.safetensors
         --clip-l parts/clip_l.safetensors --t5xxl parts/t5xxl.safetensors --vae parts/vae.safetensors
         --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --t5-max-length 64 --preview-every 0)
run_host train "${pcommon[@]}" --embedding bfl/star.safetensors --max-steps 2 --learn-rate 0.05 --log-dir bfl/logs
expect_rc 0 "train on the transformer-only file with its part files"
# the same model as a diffusers folder (transformer/ in diffusers' names, text_encoder/ CLIP-L, text_encoder_2/ T5,
# tokenizer_2/ T5's vocabulary; the VAE given as ae.safetensors) and as the all-in-one file: the same tables
mkdir -p folder/f/transformer folder/f/text_encoder folder/f/text_encoder_2 folder/f/tokenizer_2 aio
"$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --part transformer \
    --out folder/f/transformer/diffusion_pytorch_model.safetensors >/dev/null || fail "the transformer alone"
cp parts/clip_l.safetensors folder/f/text_encoder/model.safetensors
cp parts/t5xxl.safetensors folder/f/text_encoder_2/model.safetensors
cp models/t5_tokenizer/tokenizer.json folder/f/tokenizer_2/
printf '%s' '{"_class_name": "FluxTransformer2DModel"}' >folder/f/transformer/config.json
printf '%s' '{"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],'\
' "text_encoder": ["transformers", "CLIPTextModel"], "text_encoder_2": ["transformers", "T5EncoderModel"]}' \
    >folder/f/model_index.json
cp fresh/star.safetensors folder/ && cp fresh/star.safetensors aio/
fcommon=(--dataset data --template "$SDT_TEMPLATES/style_filewords.txt" --width 64 --height 64 --device cpu
         --seed "$SEED" --save-every 0 --t5-max-length 64 --preview-every 0 --max-steps 2 --learn-rate 0.05)
run_host train "${fcommon[@]}" --model folder/f --vae parts/vae.safetensors --tokenizer models/tokenizer \
    --embedding folder/star.safetensors --log-dir folder/logs
expect_rc 0 "train on the diffusers folder"
run_host train "${fcommon[@]}" --model models/flux.safetensors --embedding aio/star.safetensors --log-dir aio/logs
expect_rc 0 "train 2 steps on the all-in-one file"
for k in clip_l t5xxl; do
    [ "$(table_bytes bfl/star.safetensors $k)" = "$(table_bytes aio/star.safetensors $k)" ] ||
        fail "BFL's transformer with its part files trains another $k than the all-in-one file"
    [ "$(table_bytes folder/star.safetensors $k)" = "$(table_bytes aio/star.safetensors $k)" ] ||
        fail "the diffusers folder trains another $k than the all-in-one file"
    [ "$(table_bytes aio/star.safetensors $k)" != "$(table_bytes fresh/star.safetensors $k)" ] ||
        fail "2 steps on the all-in-one file left $k unchanged"
done
mkdir -p clipg && cp fresh/star.safetensors clipg/
run_host train "${pcommon[@]}" --embedding clipg/star.safetensors --max-steps 1 --log-dir clipg/logs \
    --clip-g parts/clip_g.safetensors
expect_error "a CLIP-G for Flux" "clip_g_path" "no CLIP-G"
cmp -s clipg/star.safetensors fresh/star.safetensors || fail "a refused run changed the embedding"

# generate: the trained embedding in the prompt changes the image
run_host generate --model models/flux.safetensors --prompt "a star cat" --embedding all/star.safetensors --width 64 \
    --height 64 --device cpu --seed "$SEED" --steps 3 --out gen_star.png
expect_rc 0 "generate with the Flux embedding"
expect_file gen_star.png "the generated image"
run_host generate --model models/flux.safetensors --prompt "a star cat" --width 64 --height 64 --device cpu \
    --seed "$SEED" --steps 3 --out gen_plain.png
expect_rc 0 "generate without the embedding"
cmp -s gen_star.png gen_plain.png && fail "the embedding did not change the generated image"

# the shipped Flux demo model (models/demo_flux: diffusers' transformer file alone, CLIP-L, T5 and ae part files,
# trained with T5's sequence at 32) renders its world through sdtrain's Flux path: a preview of "a red circle"
# (Flux's sigmas, the resolution shift, no cfg) is red
DEMO_FLUX="$(cd "$(dirname "$0")/../../models/demo_flux" && pwd)"
mkdir -p demo && printf '%s\n' '[name], [filewords]' >demo/template.txt
run_host create-embedding --name star --vectors 1 --init-text "a star" --model "$DEMO_FLUX/transformer.safetensors" \
    --clip-l "$DEMO_FLUX/clip_l.safetensors" --t5xxl "$DEMO_FLUX/t5xxl.safetensors" --tokenizer models/tokenizer \
    --out demo
expect_rc 0 "create an embedding for the Flux demo model"
run_host train --dataset data --template demo/template.txt --model "$DEMO_FLUX/transformer.safetensors" \
    --clip-l "$DEMO_FLUX/clip_l.safetensors" --t5xxl "$DEMO_FLUX/t5xxl.safetensors" --vae "$DEMO_FLUX/ae.safetensors" \
    --tokenizer models/tokenizer --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 \
    --embedding demo/star.safetensors --max-steps 1 --learn-rate 0.00001 --log-dir demo/logs --t5-max-length 32 \
    --preview-every 1 --preview-prompt "a red circle, grey background" --preview-cfg 1 --preview-steps 30
expect_rc 0 "a step and a preview on the Flux demo model"
preview="$(run_folder demo/logs star)/images/star-1.png"
expect_file "$preview" "the Flux demo model's preview"
"$E2E_TOOL" png-crop "$preview" 0 0 64 64 >demo/preview.rgb || fail "reading the preview"
python3 - demo/preview.rgb <<'PY' || fail "the Flux demo model's 'a red circle' is not red"
import sys
raw = open(sys.argv[1], "rb").read()
px = [raw[i:i + 3] for i in range(0, len(raw), 3)]
red = sum(1 for r, g, b in px if r > 128 and r > 2 * g and r > 2 * b) / len(px)
other = sum(1 for r, g, b in px if (g > 128 and g > 2 * r) or (b > 128 and b > 2 * r)) / len(px)
print("the preview's red pixels: %.3f, green or blue ones: %.3f" % (red, other))
sys.exit(0 if red > 0.05 and other < 0.01 else 1)
PY

e2e_finish
