#!/usr/bin/env bash
# Every file and every printed line is the same bytes in every locale. sdt-host calls setlocale(LC_ALL, "")
# as every GUI host does. The same session runs under LC_ALL=C and under four locales generated here with
# localedef, each breaking something else:
#   de_DE.UTF-8  a one-byte decimal comma: printf's "%g" writes "0,005", strtod reads "0.005" as 0;
#   tr_TR.UTF-8  Turkish case mapping: GLib's g_utf8_strdown lowers "Icon" to "ıcon" (CLIP does not),
#                tolower('I') stays 'I';
#   ps_AF.UTF-8  a two-byte decimal point "٫" (cJSON swaps only its first byte: files with a lone 0xAB,
#                JSON that does not parse back) and Arabic-Indic output digits;
#   fa_IR.UTF-8  Persian output and alternative digits, "." as the decimal point.
# The session: an embedding trained with an LR schedule through a template with capital I's (PNG cards,
# copies, the loss CSV, the state), a hypernetwork with a fractional layer and dropout structure (its .pt,
# .safetensors twin and metadata), a joint run, a panel file, a --metrics run with EMA resumed from its
# state, generate with FILE:0.5, inspect (text and --json) of every file, a PNG card, a state and the
# diffusers model folder (which every training loads too). Every file and every printed line must be
# byte-identical to C's (dates and timings aside), and the trained files moved. A tiny Flux.1 run and its
# refusals come out the same under de_DE and tr_TR as under C (tables, sentences).
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/e2e_lib.sh"

LOCALES=$WORK/locales
if ! command -v localedef >/dev/null || [ ! -e /usr/share/i18n/locales/de_DE ]; then
    echo "FAIL: localedef or glibc's locale sources are missing; install Debian's 'locales' package (bash .ci/install-deps.sh does)" >&2
    exit 1
fi
mkdir -p "$LOCALES"
TESTED=(de_DE tr_TR ps_AF fa_IR)
for l in "${TESTED[@]}"; do
    localedef -i "$l" -f UTF-8 "$LOCALES/$l.UTF-8" >/dev/null 2>&1
    [ -f "$LOCALES/$l.UTF-8/LC_NUMERIC" ] || { echo "FAIL: localedef could not generate $l.UTF-8" >&2; exit 1; }
done
in_locale() { LOCPATH=$LOCALES LC_ALL=$1.UTF-8 "${@:2}"; }
# Each generated locale really has what it is here for (else this test would prove nothing).
[ "$(in_locale de_DE locale decimal_point)" = "," ] || { echo "FAIL: the generated de_DE.UTF-8 does not use a decimal comma" >&2; exit 1; }
[ "$(in_locale tr_TR locale territory)" = Turkey ] || { echo "FAIL: the generated tr_TR.UTF-8 is not Turkish" >&2; exit 1; }
[ "$(in_locale ps_AF locale decimal_point)" = "٫" ] ||
    { echo "FAIL: the generated ps_AF.UTF-8 does not use the two-byte decimal point U+066B" >&2; exit 1; }
for l in ps_AF fa_IR; do
    [ "$(in_locale $l locale ctype-outdigit1_mb)" != 1 ] ||
        { echo "FAIL: the generated $l.UTF-8 does not have its own digits" >&2; exit 1; }
done

# Capital I's (and a dotted İ) in the prompts: Turkish lowering would change the tokens.
ICON_TEMPLATE=$WORK/icon-template.txt
printf '%s\n' "an Icon in the style of [name]" "a DIGITAL ICON of [name], İzmir Illustration" >"$ICON_TEMPLATE"
TEMPLATE=(--template "$ICON_TEMPLATE")

# session DIR: the whole session in DIR, every command's stdout and stderr kept as DIR/NN-what.{out,err}.
session() {
    mkdir -p "$1"
    (
        cd "$1" || exit 1
        n=0
        step() { # WHAT ARGS...
            local what=$1
            shift
            n=$((n + 1))
            "$SDT_HOST" "$@" </dev/null >"$(printf '%02d' $n)-$what.out" 2>"$(printf '%02d' $n)-$what.err"
            echo "$?" >"$(printf '%02d' $n)-$what.rc"
        }
        step create-embedding create-embedding --name tok --init-text "a cat" --vectors 2 --model "$MODEL" --out emb
        cp emb/tok.safetensors created-tok.safetensors
        step train-embedding train --embedding emb/tok.safetensors --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
            --learn-rate "0.005:2, 1e-3" --max-steps 3 --save-every 2 --preview-every 3 --csv-every 1 --log-dir logs \
            --preview-cfg 6.5 --lr-backoff 0.25
        step create-hypernetwork create-hypernetwork --name hn --sizes 128,64 --layer-structure 1,1.5,1 \
            --dropout --dropout-structure 0,0.05,0 --out hn
        cp hn/hn.pt created-hn.pt
        step train-hypernetwork train --hypernetwork hn/hn.pt --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
            --learn-rate 0.0005 --max-steps 2 --save-every 1 --preview-every 0 --csv-every 1 --log-dir logs
        step create-joint-embedding create-embedding --name jt --init-text "a dog" --vectors 1 --model "$MODEL" --out emb
        step create-joint-hypernetwork create-hypernetwork --name jhn --sizes 128 --layer-structure 1,2.5,1 --out hn
        step train-joint train --hypernetwork hn/jhn.pt --embedding emb/jt.safetensors --dataset "$DATASET" "${TEMPLATE[@]}" \
            "${TRAIN_COMMON[@]}" --learn-rate 0.001 --max-steps 2 --save-every 0 --preview-every 2 --csv-every 1 --log-dir logs \
            --preview-hypernetworks hn/hn.pt:0.5 --weight-decay 0.0125
        cat >panel.ini <<INI
[train]
embedding=emb/tok.safetensors
dataset=$DATASET
template=$SDT_TEMPLATES/style_filewords.txt
model=$MODEL
learn-rate=0.0025
max-steps=4
log-dir=panel-logs
width=64
height=64
device=cpu
seed=$SEED
save-every=0
preview-every=0
csv-every=1
INI
        step train-panel train --config panel.ini
        step generate generate --model "$MODEL" --prompt "a red square" --width 64 --height 64 --steps 2 --cfg 7.5 \
            --device cpu --seed "$SEED" --hypernetwork hn/hn.pt:0.5 --out gen.png
        step create-metrics-embedding create-embedding --name met --init-text "an icon" --vectors 1 --model "$MODEL" --out emb
        step train-metrics train --embedding emb/met.safetensors --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
            --learn-rate 0.004 --max-steps 2 --save-every 2 --preview-every 0 --csv-every 1 --log-dir mlogs --metrics --ema 0.9
        step resume-metrics train --embedding emb/met.safetensors --dataset "$DATASET" "${TEMPLATE[@]}" "${TRAIN_COMMON[@]}" \
            --learn-rate 0.004 --max-steps 3 --save-every 3 --preview-every 0 --csv-every 1 --log-dir mlogs --metrics --ema 0.9 \
            --resume mlogs
        for f in emb/tok.safetensors emb/jt.safetensors emb/met.safetensors emb/met-ema.safetensors hn/hn.pt logs/*/hn/hn.safetensors \
            hn/jhn.pt logs/*/tok/image_embeddings/*.png "$MODEL"; do
            step "inspect-$(basename "$f")" inspect "$f"
            step "inspect-json-$(basename "$f")" inspect --json "$f"
        done
        for f in logs/*/tok/*.state.safetensors logs/*/hn/*.state.safetensors logs/*/jhn/*.state.safetensors \
            mlogs/*/met/*.state.safetensors; do
            step "inspect-state-$(basename "$f")" inspect "$f"
        done
    )
}

LC_ALL=C session c
# LC_MESSAGES stays C so that strerror's sentences (translated, as they should be) compare too.
for l in "${TESTED[@]}"; do
    (unset LC_ALL; LOCPATH=$LOCALES LANG=$l.UTF-8 LC_MESSAGES=C session "$l") &
done
wait

for d in c "${TESTED[@]}"; do
    for rc in "$d"/*.rc; do
        [ "$(cat "$rc")" = 0 ] || { fail "$d: ${rc#"$d"/} exit $(cat "$rc")"; sed 's/^/    | /' "${rc%.rc}.err" | tail -5 >&2; }
    done
done

# Times, dates and speeds are the only things two runs may print or write differently.
normalise() { # FILE: the text with timings, speeds and dates replaced
    # Progress lines are printed by the clock (which steps show varies), so they are left out.
    grep -v '^step [0-9]*/' "$1" | sed -E -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}([ T_-][0-9:-]+(\.[0-9]+)?)?(_[0-9]+)?/DATE/g' \
        -e 's/([0-9.]+) (img\/s|s|ms|it\/s)\b/N \2/g' -e 's/ETA [^ ]+/ETA T/g' \
        -e 's/(in|took|after) [0-9.]+ ?(s|ms|min)/\1 T/g'
}
# The loss CSV's last column is images/s, a timing; metrics.jsonl's lines carry the step's seconds.
csv_without_speed() { cut -d, -f1-8 "$1"; }
jsonl_without_time() { sed -E 's/"images_per_s":[^,}]*/"images_per_s":T/g' "$1"; }

compare_with_c() { # LOCALE: every file the C session wrote, against the same file in LOCALE's session
    local l=$1 f rel other compared=0
    while IFS= read -r -d '' f; do
        rel=${f#c/}
        other=$l/$rel
        # The run folder is named after the day; a settings file after the second it was written (the
        # resumed run writes a second one: the n-th of C's pairs with the n-th of the locale's, even
        # where a name happens to match: the two sessions' seconds fall differently).
        if [ ! -e "$other" ] || [[ $rel == */settings-*.json ]]; then
            local nth=1 pattern
            case $rel in */settings-*.json) nth=$(find "$(dirname "$f")" -name 'settings-*.json' | LC_ALL=C sort | grep -nxF "$f" | cut -d: -f1) ;; esac
            pattern=$(echo "$rel" | sed -E 's#/[0-9]{4}-[0-9]{2}-[0-9]{2}/#/*/#; s#settings-[^/]*\.json#settings-*.json#')
            other=$(find "$l" -path "$l/$pattern" | LC_ALL=C sort | sed -n "${nth}p")
        fi
        if [ -z "$other" ] || [ ! -e "$other" ]; then
            fail "$rel was written under C but not under $l.UTF-8"
            continue
        fi
        compared=$((compared + 1))
        case $rel in
        *.csv)
            cmp -s <(csv_without_speed "$f") <(csv_without_speed "$other") ||
                { fail "$rel differs between C and $l.UTF-8"; diff <(csv_without_speed "$f") <(csv_without_speed "$other") | head -6 >&2; } ;;
        *.jsonl)
            cmp -s <(jsonl_without_time "$f") <(jsonl_without_time "$other") ||
                { fail "$rel differs between C and $l.UTF-8"; diff <(jsonl_without_time "$f") <(jsonl_without_time "$other") | head -6 >&2; } ;;
        *.out | *.err | *settings-*.json | *.json | *.txt | *.ini)
            cmp -s <(normalise "$f") <(normalise "$other") ||
                { fail "$rel differs between C and $l.UTF-8"; diff <(normalise "$f") <(normalise "$other") | head -6 >&2; } ;;
        *)
            cmp -s "$f" "$other" || fail "$rel: the bytes differ between C and $l.UTF-8" ;;
        esac
    done < <(find c -type f ! -name '*.rc' ! -name '*.lock' -print0 | sort -z)
    [ "$compared" -gt 40 ] || fail "$l: only $compared files were compared; the sessions did not write what they should"
}

for l in "${TESTED[@]}"; do
    compare_with_c "$l"
    # What the reviews saw: in de_DE the learning rate parsed as 0 and nothing trained; in ps_AF every
    # diffusers folder was refused, so nothing trained either.
    cmp -s "$l/created-tok.safetensors" "$l/emb/tok.safetensors" && fail "$l.UTF-8: the embedding did not move (learning rate 0?)"
    cmp -s "$l/created-hn.pt" "$l/hn/hn.pt" && fail "$l.UTF-8: the hypernetwork did not move (learning rate 0?)"
    grep -q 'lr 1.00e-03' "$l/02-train-embedding.out" "$l/02-train-embedding.err" ||
        fail "$l.UTF-8: the progress line does not show 'lr 1.00e-03'"
    grep -rqE '[0-9],[0-9]{2}e[-+]' "$l"/*.out "$l"/*.err && fail "$l.UTF-8: a number was printed with a decimal comma"
    csv=$(run_folder "$l/logs" tok)/textual_inversion_loss.csv
    awk -F, 'NR > 1 && NF != 10 { bad = 1 } END { exit bad }' "$csv" || fail "$l.UTF-8: the loss CSV has rows that are not 10 fields"
    [ "$(tail -n +2 "$csv" | head -n 1 | cut -d, -f5)" = 0.005 ] || fail "$l.UTF-8: step 1's learning rate in the CSV is not 0.005"
    # Every line sdt-host printed and every text file written is UTF-8 (ps_AF's lone 0xAB byte was not).
    while IFS= read -r -d '' f; do
        iconv -f UTF-8 -t UTF-8 "$f" >/dev/null 2>&1 || fail "$l.UTF-8: ${f#"$l"/} is not valid UTF-8"
    done < <(find "$l" -type f \( -name '*.out' -o -name '*.err' -o -name '*.json' -o -name '*.jsonl' -o -name '*.csv' \) -print0)
done
# The panel (sdt-host serve, where it is built): its setup and a model's description, as JSON replies.
if command -v curl >/dev/null && "$SDT_HOST" serve --help >/dev/null 2>&1; then
    source "$HERE/serve_lib.sh"
    for l in C ps_AF; do
        if [ $l = C ]; then LC_ALL=C start_serve; else LOCPATH=$LOCALES LC_ALL=$l.UTF-8 LC_MESSAGES=C start_serve; fi
        curl -s "$SERVE_BASE/api/setup" >"panel-$l-setup.json"
        curl -s "$SERVE_BASE/api/model?path=model" >"panel-$l-model.json"
        stop_serve
    done
    grep -q '"layout":.*"diffusers folder"' panel-C-model.json || fail "the panel did not describe the demo model under C"
    for what in setup model; do
        cmp -s "panel-C-$what.json" "panel-ps_AF-$what.json" ||
            { fail "the panel's /api/$what differs between C and ps_AF.UTF-8"; diff "panel-C-$what.json" "panel-ps_AF-$what.json" | head -6 >&2; }
    done
fi
# SD3.5 and Flux.1 (issue 30), on the tiny Flux.1 dev file (sdt-make-checkpoint --config tiny-flux-dev): 2 steps
# with fractional options (a --learn-rate schedule, --lr-t5xxl, --guidance: de_DE's strtod would read "2.5" as 2)
# train the same tables under de_DE.UTF-8 and tr_TR.UTF-8 as under C, and the transformer paths' refusals (T5's
# length past 512, [name] past T5's sequence, a CLIP-G for Flux) print the same sentence, numbers with '.'.
if [ -n "${SDT_MAKE_CHECKPOINT:-}" ] && command -v python3 >/dev/null; then
    source "$HERE/flow_train_lib.sh"
    mkdir -p flow/models flow/data
    "$SDT_MAKE_CHECKPOINT" --config tiny-flux-dev --out flow/models/flux.safetensors >/dev/null || fail "tiny-flux-dev"
    "$SDT_MAKE_CHECKPOINT" --config tiny-sd3 --part clip_g --out flow/clip_g.safetensors >/dev/null || fail "a CLIP-G"
    cp -r "$MODEL/tokenizer" flow/models/tokenizer
    flow_t5_tokenizer flow/models/t5_tokenizer
    cp "$DATASET/demo_000.png" "$DATASET/demo_000.txt" flow/data/
    run_host create-embedding --name star --vectors 2 --init-text "a cat" --model flow/models/flux.safetensors \
        --out flow/fresh
    expect_rc 0 "create a Flux embedding"
    FLOW=(--dataset ../flow/data --template "$SDT_TEMPLATES/style_filewords.txt" --model ../flow/models/flux.safetensors
          --width 64 --height 64 --device cpu --seed "$SEED" --save-every 0 --preview-every 0 --max-steps 2
          --embedding star.safetensors --log-dir logs)
    # host_in LOCALE ARGS...: run_host with sdt-host alone under LOCALE (C, or one generated above: through a
    # wrapper, as this shell cannot switch to the generated locales itself)
    printf '#!/bin/sh\nexec env LOCPATH="%s" LC_ALL="$FLOW_LOCALE" LC_MESSAGES=C "%s" "$@"\n' "$LOCALES" "$SDT_HOST" \
        >"$WORK/host-in-locale"
    chmod +x "$WORK/host-in-locale"
    host_in() {
        local l=$1
        shift
        if [ "$l" = C ]; then LC_ALL=C run_host "$@"; else FLOW_LOCALE=$l.UTF-8 SDT_HOST=$WORK/host-in-locale run_host "$@"; fi
    }
    for l in C de_DE tr_TR; do
        name=$l.UTF-8 && [ $l != C ] || name=C
        mkdir -p "flow-$l" && cp flow/fresh/star.safetensors "flow-$l/"
        cd "flow-$l" || exit 1 # the same relative paths in every locale: the sentences name them
        host_in $l train "${FLOW[@]}" --learn-rate 0.05 --t5-max-length 513
        expect_error "$name: --t5-max-length 513" "--t5-max-length" "512"
        grep '^sdt-host: ' "$ERR" >refusals
        host_in $l train "${FLOW[@]}" --learn-rate 0.05 --t5-max-length 8
        expect_error "$name: [name] past T5's sequence" "style_filewords.txt" "T5's sequence of 8 tokens" \
            "t5-max-length"
        grep '^sdt-host: ' "$ERR" >>refusals
        host_in $l train "${FLOW[@]}" --learn-rate 0.05 --clip-g ../flow/clip_g.safetensors
        expect_error "$name: a CLIP-G for Flux" "clip_g_path" "no CLIP-G"
        grep '^sdt-host: ' "$ERR" >>refusals
        host_in $l train "${FLOW[@]}" --learn-rate "0.05:1, 0.01" --lr-t5xxl 0.2 --guidance 2.5 --t5-max-length 64
        expect_rc 0 "$name: 2 Flux steps with fractional options"
        for k in clip_l t5xxl; do table_bytes star.safetensors $k; done >tables
        cd "$WORK" || exit 1
    done
    for l in de_DE tr_TR; do
        cmp -s flow-C/tables flow-$l/tables ||
            fail "$l.UTF-8: 2 Flux steps with fractional options trained other tables than under C"
        cmp -s flow-C/refusals flow-$l/refusals ||
            { fail "$l.UTF-8: the Flux refusals differ from C's"; diff flow-C/refusals flow-$l/refusals | head -6 >&2; }
    done
    cmp -s flow-C/tables <(for k in clip_l t5xxl; do table_bytes flow/fresh/star.safetensors $k; done) &&
        fail "2 Flux steps left the embedding's tables as they were"
fi
[ "$(wc -l <"$(run_folder c/mlogs met)/metrics.jsonl")" = 3 ] || fail "C: the resumed --metrics run's metrics.jsonl does not hold 3 steps"
e2e_finish
