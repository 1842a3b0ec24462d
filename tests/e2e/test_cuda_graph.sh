#!/usr/bin/env bash
# The captured step (train/step_capture.h, kernels/cuda/step_graph.cu): with --deterministic, a run whose
# steady-state UNet backward is captured as a CUDA graph and replayed writes the bytes of the same run with
# --cuda-graph off (the embedding file and every tensor of the state), in three cases:
#  - bf16, one shape: the log says which step captured it, and the --cuda-graph off run's log says nothing;
#  - --buckets with three shapes, batch 2: the shape changes mid-run, each new shape runs uncaptured once,
#    is captured when it repeats, and no graph is replayed on another shape;
#  - fp16 from a loss scale of 2^30: the scaler skips the overflowing steps and halves the scale each time
#    (dloss changes, so the graph is recorded again), then training goes on; the same skips and scales;
#  - fp16 with a NaN pixel (the test build's SDTRAIN_FAULT_NAN_PIXEL): the one-shot fallback to fp32 fires in
#    both runs, and the fp32 steps after it are captured again (the dtype is part of the graph's key).
# Skips (77) where no GPU or CUDA module is usable.
# shellcheck source=e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"

mkdir data
bucket_dataset data

new_embedding fresh cat 2
common=(--model "$MODEL" --width 64 --height 64 --seed "$SEED" --device cuda --deterministic --save-every 0
        --preview-every 0 --csv-every 1 --learn-rate 0.01)
case_args() {
    case $1 in
        bf16) echo "--dataset $DATASET --template $SDT_TEMPLATES/subject_filewords.txt --precision bf16 --max-steps 8" ;;
        buckets) echo "--dataset data --template $SDT_TEMPLATES/style_filewords.txt --precision bf16 --max-steps 12
                 --buckets --bucket-min-side 32 --bucket-max-side 128 --bucket-step 32 --batch-size 2" ;;
        fp16) echo "--dataset $DATASET --template $SDT_TEMPLATES/subject_filewords.txt --precision fp16
              --loss-scale-init 1073741824 --max-steps 20" ;;
        fallback) echo "--dataset $DATASET --template $SDT_TEMPLATES/subject_filewords.txt --precision fp16
                  --batch-size 12 --max-steps 6" ;;
    esac
}
for c in bf16 buckets fp16 fallback; do
    read -r -a args <<<"$(case_args $c | tr '\n' ' ')"
    for mode in graph plain; do
        d=$c-$mode
        mkdir -p $d && cp fresh/cat.safetensors $d/
        extra=(--cuda-graph on)
        [ $mode = plain ] && extra=(--cuda-graph off)
        if [ $c = fallback ]; then
            SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_NAN_PIXEL=demo_005.png run_host train "${common[@]}" \
                "${args[@]}" "${extra[@]}" --embedding $d/cat.safetensors --log-dir $d/logs
        else
            run_host train "${common[@]}" "${args[@]}" "${extra[@]}" --embedding $d/cat.safetensors --log-dir $d/logs
        fi
        if [ "$RC" -ne 0 ] && grep -q "device 'cuda' was asked for" "$ERR"; then
            echo "SKIP: no usable GPU: $(cat "$ERR")"
            exit 77
        fi
        expect_rc 0 "train $c ($mode)"
        [ $c = fallback ] && { grep -q "switches to fp32" "$ERR" || fail "fallback ($mode): the fp32 fallback did not fire"; }
        if [ $mode = graph ]; then
            grep -q "CUDA graph: step [0-9]* captured the UNet backward" "$ERR" ||
                { fail "$c: the log does not say a step was captured"; show_stderr; }
            grep "CUDA graph" "$ERR"
            if [ $c = buckets ]; then # each of the 3 shapes captured on its second pass, kept beside the others
                n=$(sed -n 's/.*CUDA graph: \([0-9]*\) captures.*/\1/p' "$ERR")
                [ "${n:-0}" -ge 3 ] || fail "buckets: $n captures for 3 shapes (each should be captured once)"
            fi
        else
            grep -q "CUDA graph" "$ERR" && fail "$c: --cuda-graph off still captured: $(grep "CUDA graph" "$ERR")"
        fi
    done
    cmp -s $c-graph/cat.safetensors $c-plain/cat.safetensors ||
        fail "$c: the captured run's embedding differs from the uncaptured one by $(emb_diff $c-graph/cat.safetensors $c-plain/cat.safetensors)"
    why=$(tensors_equal "$(run_folder $c-graph/logs cat)/cat.state.safetensors" \
                        "$(run_folder $c-plain/logs cat)/cat.state.safetensors") ||
        fail "$c: the captured and uncaptured runs' states differ in: $why"
    cmp -s <(cut -d, -f1-6 "$(run_folder $c-graph/logs cat)/textual_inversion_loss.csv") \
           <(cut -d, -f1-6 "$(run_folder $c-plain/logs cat)/textual_inversion_loss.csv") ||
        fail "$c: the loss CSVs of the captured and uncaptured runs differ"
done
e2e_finish
