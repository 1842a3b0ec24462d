#!/usr/bin/env bash
# SD3.5 and Flux.1 embeddings for Forge (issue 30): `sdt-host convert FILE --for forge --out DIR` on tiny models.
# forge_embedding_loader.py loads folders as Forge's code does (EmbeddingDatabase, create_embedding_from_data, each
# CLIP engine's expected width; its docstring cites the files), so the test shows:
#  - the table file as sdtrain and ComfyUI have it loads in no Forge engine (Flux: "multiple terms", SD3.5: skipped
#    for its clip_l + clip_g width), which is why convert exists;
#  - convert's files load: Flux's CLIP-L engine gets the clip_l rows under the file's name, SD3.5's CLIP-L and CLIP-G
#    engines each get their table's rows, bit for bit; the T5 rows are dropped with a sentence;
#  - no file is overwritten without --overwrite, never the input; an SD 1.x embedding, a table file without clip_l
#    and a .pt table file are refused with one sentence each; usage errors for FILE, --for and --out.
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
LOADER=$E2E_DIR/forge_embedding_loader.py
source "$E2E_DIR/e2e_lib.sh"
source "$E2E_DIR/flow_train_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is not installed; skipping"; exit 77; }

mkdir -p models/t5_tokenizer
"$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --out models/sd35.safetensors >/dev/null || fail "tiny-sd3"
cp -r "$MODEL/tokenizer" models/tokenizer # the tiny CLIPs' rows fit the demo's vocabulary
flow_t5_tokenizer models/t5_tokenizer
# Flux: its transformer in BFL's layout with encoders as wide as it reads (context 24, pooled 12: token tables only)
python3 "$E2E_DIR/write_token_table.py" models/clip_l.safetensors text_model.embeddings.token_embedding.weight 1000 \
    12 40 || fail "the Flux CLIP-L's token table"
python3 "$E2E_DIR/write_token_table.py" models/t5xxl.safetensors shared.weight 32 24 41 || fail "the Flux T5's table"
"$SDT_MAKE_CHECKPOINT" --config tiny-flux --out flux-diffusers.safetensors >/dev/null || fail "tiny-flux"
"$SDT_MAKE_CHECKPOINT" --pack bfl-flux --transformer flux-diffusers.safetensors --out models/flux1.safetensors \
    >/dev/null || fail "pack bfl-flux"

run_host create-embedding --name star35 --vectors 2 --init-text "a cat" --model models/sd35.safetensors --out emb
expect_rc 0 "create an SD3.5 embedding"
run_host create-embedding --name starflux --vectors 3 --init-text "a cat" --model models/flux1.safetensors \
    --clip-l models/clip_l.safetensors --t5xxl models/t5xxl.safetensors --out emb
expect_rc 0 "create a Flux embedding"

# width KEY FILE: the table's width in the plugin's JSON
width() {
    run_host inspect --json "$2"
    python3 -c 'import json,sys; print([t["dim"] for t in json.load(open(sys.argv[1]))["tables"] if t["encoder"] == sys.argv[2]][0])' \
        "$OUT" "$1"
}
L=$(width clip_l emb/star35.safetensors)
G=$(width clip_g emb/star35.safetensors)
FL=$(width clip_l emb/starflux.safetensors)
[ -n "$L" ] && [ -n "$G" ] && [ "$L" != "$G" ] || fail "the tiny SD3.5 embedding's CLIP widths: '$L' and '$G'"

# forge_check DIR NAME SOURCE KEY=WIDTH...: every engine loads NAME from DIR with SOURCE's KEY rows, bit for bit
forge_check() {
    local dir=$1 name=$2 source=$3
    shift 3
    python3 "$LOADER" "$dir" "$@" >forge.json || { fail "the Forge loader failed on $dir"; return; }
    python3 - forge.json "$name" "$source" "$@" <<'PY' || fail "Forge does not load $name from $dir as $source's tables"
import json, sys
got = json.load(open(sys.argv[1]))
name, source = sys.argv[2], sys.argv[3]
import importlib.util, os
spec = importlib.util.spec_from_file_location("loader", os.environ["LOADER"])
loader = importlib.util.module_from_spec(spec); spec.loader.exec_module(loader)
tables = loader.read_safetensors(source)
ok = not got["errors"]
if got["errors"]:
    print("files Forge cannot load:", got["errors"])
for arg in sys.argv[4:]:
    key = arg.split("=")[0]
    rows = got["engines"][key]["loaded"].get(name)
    if rows != tables[key]["rows"]:
        print("engine %s: %s" % (key, "not loaded" if rows is None else "other values"))
        ok = False
sys.exit(0 if ok else 1)
PY
}
export LOADER

# The table files as they are: Forge loads neither (this is what convert is for)
mkdir -p forge-raw && cp emb/star35.safetensors emb/starflux.safetensors forge-raw/
python3 "$LOADER" forge-raw clip_l="$L" clip_g="$G" >raw.json || fail "the Forge loader on the table files"
python3 - raw.json <<'PY' || fail "Forge's loader took a table file as it is"
import json, sys
got = json.load(open(sys.argv[1]))
assert any(e.endswith("starflux.safetensors") for e in got["errors"]), got["errors"]  # "multiple terms"
for key in ("clip_l", "clip_g"):
    assert not got["engines"][key]["loaded"], got["engines"][key]
    assert "star35" in got["engines"][key]["skipped"], got["engines"][key]  # clip_l + clip_g wide
PY

# Flux: the CLIP-L rows alone, named as the file
run_host convert emb/starflux.safetensors --for forge --out forge-flux
expect_rc 0 "convert a Flux embedding for Forge"
grep -qF "Wrote: forge-flux/starflux.safetensors (the clip_l rows, 3 x $FL" "$OUT" || { fail "convert's Flux output"; cat "$OUT" >&2; }
grep -qF "Dropped: the t5xxl rows" "$OUT" || fail "convert does not say the T5 rows are dropped"
[ -e forge-flux/clip_g ] && fail "a Flux export wrote a clip_g folder"
forge_check forge-flux starflux emb/starflux.safetensors clip_l="$FL"
run_host inspect forge-flux/starflux.safetensors
expect_rc 0 "inspect the Forge file"
grep -qE "^vectors: +3 x $FL\$" "$OUT" || fail "the Forge file is not one table of 3 x $FL"

# SD3.5: CLIP-L and CLIP-G each in a file of the same name (clip_g/ below)
run_host convert emb/star35.safetensors --for forge --out forge-sd35
expect_rc 0 "convert an SD3.5 embedding for Forge"
grep -qF "Wrote: forge-sd35/clip_g/star35.safetensors (the clip_g rows, 2 x $G" "$OUT" || fail "convert's SD3.5 output"
forge_check forge-sd35 star35 emb/star35.safetensors clip_l="$L" clip_g="$G"

# Nothing overwritten unless asked, never the input
keep_copy forge-sd35/star35.safetensors
run_host convert emb/star35.safetensors --for forge --out forge-sd35
expect_error "an existing Forge file" "forge-sd35/star35.safetensors exists" "--overwrite"
expect_untouched forge-sd35/star35.safetensors "the refused convert"
run_host convert emb/star35.safetensors --for forge --out forge-sd35 --overwrite
expect_rc 0 "convert with --overwrite"
run_host convert emb/starflux.safetensors --for forge --out emb --overwrite
expect_error "the input as the output" "is the embedding being converted"
run_host inspect --json emb/starflux.safetensors
[ "$(json_get "$OUT" family)" = flux ] || fail "convert into the input's folder damaged the input"

# What convert refuses
new_embedding sd1 cat
run_host convert sd1/cat.safetensors --for forge --out forge-sd1
expect_error "an SD 1.x embedding" "loads as it is"
[ -e forge-sd1 ] && fail "a refused convert made its folder"
python3 - emb/starflux.safetensors t5only.safetensors <<'PY' || fail "writing a T5-only table file"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); body = raw[8 + n:]
b0, b1 = h["t5xxl"]["data_offsets"]
out = json.dumps({"t5xxl": {"dtype": h["t5xxl"]["dtype"], "shape": h["t5xxl"]["shape"], "data_offsets": [0, b1 - b0]}}).encode()
out += b" " * (-len(out) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(out)) + out + body[b0:b1])
PY
run_host convert t5only.safetensors --for forge --out forge-t5
expect_error "a table file without clip_l" "no clip_l table" "Forge reads only CLIP-L"
if [ -n "${E2E_TORCH:-}" ]; then # the same tables as a torch.save dict: inspect reads it, convert asks for .safetensors
    "$E2E_TORCH" tensor-dict emb/starflux.safetensors starflux.pt || fail "writing the .pt table file"
    run_host inspect --json starflux.pt
    [ "$(json_get "$OUT" family)" = flux ] || fail "the .pt table file is not read as a Flux.1 embedding"
    run_host convert starflux.pt --for forge --out forge-pt
    expect_error "a .pt table file" "starflux.pt" "save this one as .safetensors"
    [ -e forge-pt ] && fail "a refused convert made its folder"
fi
run_host convert --for forge --out x
expect_usage "no FILE" "exactly one embedding FILE"
run_host convert emb/starflux.safetensors --out x
expect_usage "no --for" "--for is required"
run_host convert emb/starflux.safetensors --for comfyui --out x
expect_usage "--for comfyui" "ComfyUI loads the file as it is"
run_host convert emb/starflux.safetensors --for forge
expect_usage "no --out" "--out DIR is required"

e2e_finish
