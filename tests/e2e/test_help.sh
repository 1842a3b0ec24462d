#!/usr/bin/env bash
# --help on sdt-host and on every subcommand: exit 0, a usage text on stdout, nothing written.
source "$(dirname "$0")/e2e_lib.sh"

for args in "--help" "-h" "demo --help" "create-embedding --help" "create-hypernetwork --help" "train --help" "inspect --help" \
            "--plugin /nowhere/libsdtrain.so train --help"; do
    # shellcheck disable=SC2086 # the words are separate arguments on purpose
    run_host $args
    expect_rc 0 "sdt-host $args"
    grep -qi "usage" "$OUT" || fail "sdt-host $args: no usage text on stdout"
    grep -qF -- "--plugin" "$OUT" || fail "sdt-host $args: --help does not mention --plugin"
done

run_host --help
for cmd in demo create-embedding create-hypernetwork train inspect; do
    grep -qF "$cmd" "$OUT" || fail "sdt-host --help does not list the command $cmd"
done

run_host train --help
for opt in --embedding --dataset --template --model --learn-rate --batch-size --grad-accum --max-steps \
           --log-dir --precision --config --resume --hypernetwork --weight-decay --strength --embedding-learn-rate \
           --loss-type --huber-delta --min-snr-gamma --noise-offset --noise-offset-random-strength --timestep-min \
           --timestep-max --zero-terminal-snr --lr-scheduler --lr-cycles --warmup-steps \
           --validation-dir --validation-split --validate-every --stop-after-no-improvement --ema --ema-every --ema-result \
           --ema-previews --metrics --no-metrics --buckets --bucket-max-area --bucket-min-side --bucket-max-side --bucket-step \
           --random-crop --gpus --in-process --comm-timeout; do
    grep -qF -- "$opt" "$OUT" || fail "sdt-host train --help does not list $opt"
done
grep -qF "templates" "$OUT" || fail "sdt-host train --help does not say where bare template names are looked up"

run_host create-embedding --help
for opt in --name --init-text --vectors --model --out --overwrite; do
    grep -qF -- "$opt" "$OUT" || fail "sdt-host create-embedding --help does not list $opt"
done
run_host create-hypernetwork --help
for opt in --name --sizes --layer-structure --activation --init --layer-norm --dropout --dropout-structure \
           --activate-output --out --overwrite; do
    grep -qF -- "$opt" "$OUT" || fail "sdt-host create-hypernetwork --help does not list $opt"
done
run_host demo --help
for opt in --out --max-steps --seed; do
    grep -qF -- "$opt" "$OUT" || fail "sdt-host demo --help does not list $opt"
done
run_host inspect --help
grep -qF -- "--json" "$OUT" || fail "sdt-host inspect --help does not list --json"

# Every option's --help line says its default (or that it is required); train's come from the plugin.
for cmd in demo create-embedding create-hypernetwork train inspect generate convert; do
    run_host $cmd --help
    undocumented=$(grep -E '^  --' "$OUT" | grep -viE 'default|required')
    [ -z "$undocumented" ] || fail "sdt-host $cmd --help: options without their default: $undocumented"
done
run_host train --help
for shown in "--csv-every=N .*(default 500)" "--batch-size=N .*(default 1)" "--precision=.*(default fp32)" \
             "--learn-rate=.*(default 0.005; with --hypernetwork 0.00001)" "--weight-decay=W .*(default 0.01)" \
             "--log-dir=.*(default textual_inversion; with --hypernetwork hypernetworks)"; do
    grep -qE -- "$shown" "$OUT" || fail "sdt-host train --help lacks the plugin's default: $shown"
done

written=$(find "$WORK" -mindepth 1 ! -name '.std*')
[ -z "$written" ] || fail "--help wrote files: $written"
e2e_finish
