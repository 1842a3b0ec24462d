#!/usr/bin/env bash
# Bad command lines: exit 2 with the reason and a pointer to --help, and nothing written.
source "$(dirname "$0")/e2e_lib.sh"

new_embedding emb cat
usage_case() { # WHAT TEXT -- ARGS...
    local what=$1 text=$2
    shift 3
    run_host "$@"
    expect_usage "$what" "$text"
}
usage_case "unknown command" "frobnicate" -- frobnicate
# A mistyped command or option: every command listed, the nearest suggested.
usage_case "mistyped command" "unknown command 'trian' (did you mean 'train'?)" -- trian
for cmd in demo create-embedding create-hypernetwork train inspect generate convert; do
    grep -qF -- "$cmd" "$ERR" || fail "the unknown-command sentence does not list $cmd"
done
usage_case "mistyped command after options" "did you mean 'train'?" -- --max-steps 4 trian
usage_case "mistyped train option" "did you mean --learn-rate?" -- train --lern-rate 0.1
usage_case "mistyped train option with =" "did you mean --embedding?" -- train --embeding=emb/cat.safetensors
usage_case "mistyped create option" "did you mean --name?" -- create-embedding --nmae x
usage_case "train without what to train" "--hypernetwork" -- train --dataset "$DATASET" --model "$MODEL"
usage_case "command after options" "comes first" -- --max-steps 4 train
usage_case "unknown demo option" "--bogus" -- --bogus
usage_case "demo --max-steps 0" "--max-steps" -- demo --max-steps 0
usage_case "demo --seed text" "--seed" -- demo --seed abc
usage_case "demo missing argument" "--out" -- demo --out
usage_case "demo unknown model family" "choose sd or flux" -- demo --model-family sdxl
usage_case "flux demo with a hypernetwork" "--model-family sd" -- demo --model-family flux --hypernetwork
usage_case "demo --encoders without flux" "--model-family flux" -- demo --encoders clip_l
usage_case "flux demo bad --encoders" "clip_l, t5xxl or both" -- demo --model-family flux --encoders clip_g
usage_case "create-embedding unknown option" "--bogus" -- create-embedding --name x --bogus
usage_case "create-embedding missing argument" "--name" -- create-embedding --name
usage_case "create-embedding without --name" "--name" -- create-embedding --model "$MODEL"
usage_case "create-embedding --vectors 0" "--vectors" -- create-embedding --name x --vectors 0
usage_case "create-embedding --vectors 76" "--vectors" -- create-embedding --name x --vectors 76
usage_case "create-embedding stray argument" "argument" -- create-embedding --name x stray
usage_case "train unknown option" "--bogus" -- train --bogus
usage_case "train missing argument" "--max-steps" -- train --embedding emb/cat.safetensors --max-steps
usage_case "train bad precision" "fp8" -- train --embedding emb/cat.safetensors --precision fp8
usage_case "train bad batch size" "--batch-size" -- train --embedding emb/cat.safetensors --batch-size many
usage_case "train bad number" "--tag-dropout" -- train --embedding emb/cat.safetensors --tag-dropout 0.1x
usage_case "train stray argument" "argument" -- train --embedding emb/cat.safetensors stray
usage_case "inspect without a file" "FILE" -- inspect
usage_case "inspect two files" "FILE" -- inspect a b
usage_case "inspect unknown option" "--bogus" -- inspect --bogus emb/cat.safetensors

leftovers=$(find "$WORK" -mindepth 1 -maxdepth 1 ! -name '.std*' ! -name emb)
[ -z "$leftovers" ] || fail "usage errors wrote files: $leftovers"
e2e_finish
