#!/usr/bin/env bash
# Numbers mean the same in every locale. sdt-host calls setlocale(LC_ALL, "") as every GUI host does;
# in a comma-decimal locale (de_DE.UTF-8, generated here with localedef) printf writes "0,005" and
# strtod reads "0.005" as 0. The same session runs under LC_ALL=C and under de_DE.UTF-8:
#   an embedding trained with an LR schedule (PNG cards, copies, the loss CSV, the state), a hypernetwork with a
#   fractional layer and dropout structure (its .pt, .safetensors twin and metadata), a joint run, a panel file,
#   generate with FILE:0.5, inspect (text and --json)
# and every file and every printed line must be byte-identical (dates and timings aside); the trained files moved.
source "$(dirname "$0")/e2e_lib.sh"

LOCALES=$WORK/locales
if ! command -v localedef >/dev/null || [ ! -e /usr/share/i18n/locales/de_DE ]; then
    echo "FAIL: localedef or glibc's locale sources are missing; install Debian's 'locales' package (bash .ci/install-deps.sh does)" >&2
    exit 1
fi
mkdir -p "$LOCALES"
localedef -i de_DE -f UTF-8 "$LOCALES/de_DE.UTF-8" >/dev/null 2>&1
[ -f "$LOCALES/de_DE.UTF-8/LC_NUMERIC" ] || { echo "FAIL: localedef could not generate de_DE.UTF-8" >&2; exit 1; }
# The generated locale really uses a comma (else this test would prove nothing).
[ "$(LOCPATH=$LOCALES LC_ALL=de_DE.UTF-8 locale decimal_point)" = "," ] ||
    { echo "FAIL: the generated de_DE.UTF-8 does not use a decimal comma" >&2; exit 1; }

TEMPLATE=(--template "$SDT_TEMPLATES/style.txt")

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
        for f in emb/tok.safetensors emb/jt.safetensors hn/hn.pt logs/*/hn/hn.safetensors hn/jhn.pt; do
            step "inspect-$(basename "$f")" inspect "$f"
            step "inspect-json-$(basename "$f")" inspect --json "$f"
        done
        for f in logs/*/tok/*.state.safetensors logs/*/hn/*.state.safetensors logs/*/jhn/*.state.safetensors; do
            step "inspect-state-$(basename "$f")" inspect "$f"
        done
    )
}

LC_ALL=C session c
# LC_MESSAGES stays C so that strerror's sentences (translated, as they should be) compare too.
(unset LC_ALL; LOCPATH=$LOCALES LANG=de_DE.UTF-8 LC_MESSAGES=C session de)

for rc in c/*.rc; do
    [ "$(cat "$rc")" = 0 ] || { fail "C locale: ${rc#c/} exit $(cat "$rc")"; sed 's/^/    | /' "${rc%.rc}.err" | tail -5 >&2; }
done
for rc in de/*.rc; do
    [ "$(cat "$rc")" = 0 ] || { fail "de_DE.UTF-8: ${rc#de/} exit $(cat "$rc")"; sed 's/^/    | /' "${rc%.rc}.err" | tail -5 >&2; }
done

# Times, dates and speeds are the only things two runs may print or write differently.
normalise() { # FILE: the text with timings, speeds and dates replaced
    # Progress lines are printed by the clock (which steps show varies), so they are left out.
    grep -v '^step [0-9]*/' "$1" | sed -E -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}([ T_-][0-9:.-]+)?/DATE/g' \
        -e 's/([0-9.]+) (img\/s|s|ms|it\/s)\b/N \2/g' -e 's/ETA [^ ]+/ETA T/g' \
        -e 's/(in|took|after) [0-9.]+ ?(s|ms|min)/\1 T/g'
}
# The loss CSV's last column is images/s, a timing.
csv_without_speed() { cut -d, -f1-8 "$1"; }
# metrics.jsonl (written by default) holds the same timing.
jsonl_without_speed() { sed -E 's/"images_per_s":[^,}]*/"images_per_s":N/' "$1"; }

compared=0
while IFS= read -r -d '' f; do
    rel=${f#c/}
    other=de/$rel
    # The run folder is named after the day; the settings file after the second it was written.
    [ -e "$other" ] || other=$(find de -path "de/$(echo "$rel" | sed -E 's#/[0-9]{4}-[0-9]{2}-[0-9]{2}/#/*/#; s#settings-[^/]*\.json#settings-*.json#')" | head -n 1)
    if [ -z "$other" ] || [ ! -e "$other" ]; then
        fail "$rel was written under C but not under de_DE.UTF-8"
        continue
    fi
    compared=$((compared + 1))
    case $rel in
    *.csv)
        cmp -s <(csv_without_speed "$f") <(csv_without_speed "$other") ||
            { fail "$rel differs between C and de_DE.UTF-8"; diff <(csv_without_speed "$f") <(csv_without_speed "$other") | head -6 >&2; } ;;
    *.jsonl)
        cmp -s <(jsonl_without_speed "$f") <(jsonl_without_speed "$other") ||
            { fail "$rel differs between C and de_DE.UTF-8"; diff <(jsonl_without_speed "$f") <(jsonl_without_speed "$other") | head -6 >&2; } ;;
    *.out | *.err | *settings-*.json | *.json | *.txt | *.ini)
        cmp -s <(normalise "$f") <(normalise "$other") ||
            { fail "$rel differs between C and de_DE.UTF-8"; diff <(normalise "$f") <(normalise "$other") | head -6 >&2; } ;;
    *)
        cmp -s "$f" "$other" || fail "$rel: the bytes differ between C and de_DE.UTF-8" ;;
    esac
done < <(find c -type f ! -name '*.rc' ! -name '*.lock' -print0 | sort -z)
[ "$compared" -gt 30 ] || fail "only $compared files were compared; the sessions did not write what they should"

# What the review saw in de_DE: the learning rate parsed as 0 and nothing trained.
cmp -s de/created-tok.safetensors de/emb/tok.safetensors && fail "de_DE.UTF-8: the embedding did not move (learning rate 0?)"
cmp -s de/created-hn.pt de/hn/hn.pt && fail "de_DE.UTF-8: the hypernetwork did not move (learning rate 0?)"
grep -q 'lr 1.00e-03' de/02-train-embedding.out de/02-train-embedding.err ||
    fail "de_DE.UTF-8: the progress line does not show 'lr 1.00e-03'"
grep -rqE '[0-9],[0-9]{2}e[-+]' de/*.out de/*.err && fail "de_DE.UTF-8: a number was printed with a decimal comma"
csv=$(run_folder de/logs tok)/textual_inversion_loss.csv
awk -F, 'NR > 1 && NF != 10 { bad = 1 } END { exit bad }' "$csv" || fail "de_DE.UTF-8: the loss CSV has rows that are not 10 fields"
[ "$(tail -n +2 "$csv" | head -n 1 | cut -d, -f5)" = 0.005 ] || fail "de_DE.UTF-8: step 1's learning rate in the CSV is not 0.005"
e2e_finish
