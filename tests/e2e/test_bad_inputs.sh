#!/usr/bin/env bash
# Bad inputs, one case per run (the case name is the argument): each is a clear one-sentence
# error naming the file or field and the fix, exit 1 (2 for usage), and the embedding file
# that was there before keeps its bytes. Dataset problems that spare some images are warnings
# naming each bad file, and training goes on with the good ones.
source "$(dirname "$0")/e2e_lib.sh"
E2E_CASE=${1:?give the case to run}

new_embedding emb cat 2
EMB=emb/cat.safetensors
keep_copy "$EMB"

# train_with DATASET TEMPLATE [MORE...]: a short training of emb/cat.safetensors.
train_with() {
    local dataset=$1 template=$2
    shift 2
    run_host train --embedding "$EMB" --dataset "$dataset" --template "$template" "${TRAIN_COMMON[@]}" \
        --max-steps 3 --log-dir logs --save-every 0 --preview-every 0 "$@"
}
# A small dataset of good demo images.
good_dataset() { # DIR COUNT
    mkdir -p "$1"
    local i
    for ((i = 0; i < $2; i++)); do cp "$DATASET"/demo_00"$i".png "$DATASET"/demo_00"$i".txt "$1"/; done
}
STYLE=$SDT_TEMPLATES/style.txt

# unprivileged: permissions must stop writes, which they do not for root (CI runs as root), so
# run_as runs sdt-host as nobody there (skipped, 77, without setpriv); otherwise as ourselves.
unprivileged() {
    as_user=()
    if [ "$(id -u)" = 0 ]; then
        command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null ||
            { echo "SKIP: running as root without setpriv"; exit 77; }
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        chmod 0755 "$WORK" && chmod -R a+rX "$WORK" || exit 77
        "${as_user[@]}" test -r "$SDT_HOST" && "${as_user[@]}" test -r "$MODEL" || {
            echo "SKIP: the unprivileged user cannot read the build folder"
            exit 77
        }
    fi
}
run_as() {
    "${as_user[@]}" "$SDT_HOST" "$@" </dev/null >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="sdt-host $*"
}

case $E2E_CASE in
missing_dataset)
    train_with no_such_folder "$STYLE"
    expect_error "missing dataset folder" no_such_folder
    ;;
corrupt_and_empty_images)
    good_dataset ds 3
    head -c 200 "$DATASET/demo_004.png" >ds/truncated.png
    printf 'this is not an image' >ds/garbage.jpg
    : >ds/zero.png
    train_with ds "$STYLE" --csv-every 1
    expect_rc 0 "training with some bad images"
    for bad in truncated.png garbage.jpg zero.png; do
        grep -i "warning" "$ERR" | grep -qF "$bad" || fail "the bad file $bad is not reported by name"
    done
    grep -qF "3 training images" "$ERR" || fail "expected the 3 good images to be used: $(grep -i 'images' "$ERR")"
    [ "$(csv_last_step "$(run_folder logs cat)/textual_inversion_loss.csv")" = 3 ] || fail "training did not run 3 steps"
    cmp -s "$EMB" "$EMB.before" && fail "the embedding was not trained"
    run_host inspect --json "$EMB"
    [ "$(json_get "$OUT" finite)" = true ] || fail "the trained embedding is not finite"
    TRAINED=1
    ;;
huge_png_header)
    good_dataset ds 2
    "$E2E_TOOL" png-header 100000 100000 ds/huge.png
    train_with ds "$STYLE"
    expect_rc 0 "a 100000x100000 PNG header beside good images"
    grep -i "warning" "$ERR" | grep -qF "huge.png" || fail "huge.png is not reported by name"
    grep -qF "2 training images" "$ERR" || fail "expected the 2 good images to be used"
    TRAINED=1
    ;;
only_bad_images)
    mkdir ds
    "$E2E_TOOL" png-header 100000 100000 ds/huge.png
    : >ds/zero.png
    train_with ds "$STYLE"
    expect_error "a dataset with no usable image" ds
    grep -qF "huge.png" "$ERR" || fail "huge.png is not reported by name"
    ;;
missing_model_or_embedding)
    good_dataset ds 2
    run_host train --embedding "$EMB" --dataset ds --template "$STYLE" --model no_such_model --max-steps 3 \
        --width 64 --height 64 --device cpu --log-dir logs
    expect_error "a model path that does not exist" no_such_model
    train_with ds "$STYLE" --embedding emb/no_such.safetensors
    expect_error "an embedding file that does not exist" no_such.safetensors
    ;;
template_without_name)
    good_dataset ds 2
    printf 'a photo of [filewords]\nart, [filewords]\n' >no_name.txt
    train_with ds no_name.txt
    expect_error "template without [name]" no_name.txt "[name]"
    ;;
malformed_lr_schedule)
    good_dataset ds 2
    train_with ds "$STYLE" --learn-rate "0.005:abc"
    expect_error "learning rate 0.005:abc" "0.005:abc" "learn"
    ;;
name_with_dotdot)
    run_host create-embedding --name "../escape" --model "$MODEL" --out emb
    expect_error "create-embedding --name ../escape" "../escape"
    [ ! -e escape.safetensors ] && [ ! -e emb/../escape.safetensors ] || fail "a file was written outside emb/"
    ;;
existing_without_overwrite)
    run_host create-embedding --name cat --init-text "a dog" --model "$MODEL" --out emb
    expect_error "create-embedding over an existing file" "$EMB" "--overwrite"
    ;;
readonly_output_folder)
    unprivileged
    good_dataset ds 2
    chmod -R a+rX ds
    mkdir -m 0555 readonly
    mkdir -m 0777 writable
    run_as create-embedding --name dog --model "$MODEL" --out readonly
    expect_error "create-embedding into a read-only folder" readonly
    mkdir -m 0777 writable/emb
    cp -p "$EMB" writable/emb/
    keep_copy writable/emb/cat.safetensors
    run_as train --embedding writable/emb/cat.safetensors --dataset ds --template "$STYLE" "${TRAIN_COMMON[@]}" \
        --max-steps 3 --log-dir readonly/logs
    expect_error "train with a read-only log folder" readonly/logs
    expect_untouched writable/emb/cat.safetensors "train with a read-only log folder"
    # The embedding's own folder (where the trained file goes) is read-only: refused before any step.
    run_as train --embedding "$EMB" --dataset ds --template "$STYLE" "${TRAIN_COMMON[@]}" --max-steps 3 \
        --log-dir writable/logs --csv-every 1
    expect_error "train an embedding whose folder is read-only" emb
    [ -z "$(csv_last_step "$(run_folder writable/logs cat)/textual_inversion_loss.csv")" ] ||
        fail "training ran before finding that the embedding cannot be saved"
    ;;
embedding_folder_turns_readonly)
    # The folder was writable at the start and is not at the end: the final save fails, the
    # previous embedding file stays whole, and the training state is saved to resume from.
    unprivileged
    good_dataset ds 2
    mkdir -m 0777 run run/emb
    cp -p "$EMB" run/emb/
    keep_copy run/emb/cat.safetensors
    chmod -R a+rX ds run
    chmod 0777 run/emb
    OUT=$WORK/.stdout
    ERR=$WORK/.stderr
    "${as_user[@]}" "$SDT_HOST" train --embedding run/emb/cat.safetensors --dataset ds --template "$STYLE" \
        "${TRAIN_COMMON[@]}" --max-steps 100000 --save-every 0 --preview-every 0 --csv-every 1 --log-dir run/logs \
        </dev/null >"$OUT" 2>"$ERR" &
    pid=$!
    for ((i = 0; i < 600; i++)); do
        step=$(csv_last_step "$(run_folder run/logs cat)/textual_inversion_loss.csv")
        [ -n "$step" ] && [ "$step" -ge 2 ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    chmod 0555 run/emb
    kill -INT "$pid"
    wait "$pid"
    RC=$?
    LAST_CMD="sdt-host train ... (embedding folder made read-only, then Ctrl-C)"
    expect_error "final save into a folder that turned read-only" run/emb/cat.safetensors "state"
    expect_untouched run/emb/cat.safetensors "$E2E_CASE"
    state=$(run_folder run/logs cat)/cat.state.safetensors
    expect_file "$state" "the training state after the failed final save"
    run_host inspect --json "$state"
    [ "$(json_get "$OUT" step)" -ge 2 ] 2>/dev/null || fail "the saved state is not at step 2 or later"
    [ -z "$(find run -name '*.tmp-*')" ] || fail "temporary files were left behind: $(find run -name '*.tmp-*')"
    ;;
output_under_a_file)
    printf 'not a folder' >plain_file
    run_host create-embedding --name dog --model "$MODEL" --out plain_file/sub
    expect_error "create-embedding --out under a regular file" plain_file/sub
    good_dataset ds 2
    train_with ds "$STYLE" --log-dir plain_file/logs
    expect_error "train --log-dir under a regular file" plain_file
    ;;
caption_pushes_name_out)
    good_dataset ds 2
    words=$(for i in $(seq 1 400); do printf 'word%d ' "$i"; done)
    printf '%s\n' "$words" >ds/demo_001.txt
    printf '[filewords], [name]\n' >name_last.txt
    train_with ds name_last.txt
    expect_error "caption pushing [name] past the last 75-token chunk" demo_001 "600"
    ;;
missing_required_option)
    run_host train --dataset "$DATASET" --template "$STYLE" "${TRAIN_COMMON[@]}"
    expect_usage "train without --embedding" "--embedding"
    run_host train --embedding "$EMB" --template "$STYLE" "${TRAIN_COMMON[@]}"
    expect_usage "train without --dataset" "--dataset"
    run_host train --embedding "$EMB" --dataset "$DATASET" --template "$STYLE" --max-steps 2
    expect_usage "train without --model" "--model"
    run_host create-embedding --name dog --out emb
    expect_error "create-embedding without --model" "--model"
    ;;
invalid_option_values)
    # Values the plugin refuses: the error names the option (not the ABI's config field).
    good_dataset ds 2
    train_with ds "$STYLE" --width 65
    expect_error "--width 65" "--width" "65"
    train_with ds "$STYLE" --clip-skip 0
    expect_error "--clip-skip 0" "--clip-skip"
    train_with ds "$STYLE" --tag-dropout 1.5
    expect_error "--tag-dropout 1.5" "--tag-dropout"
    train_with ds "$STYLE" --max-steps 0
    expect_error "--max-steps 0" "--max-steps"
    grep -qF "config." "$ERR" && fail "an error still names a config field: $(grep '^sdt-host' "$ERR")"
    ;;
prediction_flags)
    # --epsilon overrides detection and the log says so; beside --v-prediction it is one sentence
    # naming both options.
    good_dataset ds 2
    train_with ds "$STYLE" --epsilon --v-prediction
    expect_error "--epsilon with --v-prediction" "--epsilon" "--v-prediction" "contradict"
    expect_untouched "$EMB" "$E2E_CASE"
    train_with ds "$STYLE" --epsilon
    expect_rc 0 "--epsilon"
    grep -qF "predicts the noise (epsilon) (as asked)" "$OUT" "$ERR" || { fail "--epsilon: the log does not say it was asked"; show_stderr; }
    TRAINED=1
    ;;
device_cuda_without_gpu)
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        echo "SKIP: this machine has a GPU"
        exit 77
    fi
    train_with "$DATASET" "$STYLE" --device cuda
    expect_error "--device cuda without a GPU" "device 'cuda' was asked for"
    grep -q "CPU instead" "$ERR" && fail "--device cuda without a GPU still says it trains on the CPU instead"
    expect_untouched "$EMB" "$E2E_CASE"
    ;;
panel_file_binary)
    printf '[train]\nmax-steps=1\n\033[31m\000\377garbage\n' >panel.ini
    run_host train --config panel.ini
    expect_error "a panel file with binary garbage" panel.ini "not a text file"
    LC_ALL=C grep -q "$(printf '\033')" "$ERR" && fail "the panel file's escape sequence reached the terminal raw"
    ;;
diffusers_without_unet)
    cp -r "$MODEL" partial && rm -rf partial/unet
    run_host train --embedding "$EMB" --model partial --dataset "$DATASET" --template "$STYLE" --width 64 --height 64 \
        --device cpu --max-steps 1 --log-dir logs
    expect_error "a diffusers folder without unet/" partial "no unet/ folder"
    grep -q "model.diffusion_model" "$ERR" && fail "the missing unet/ is reported with LDM key names"
    expect_untouched "$EMB" "$E2E_CASE"
    ;;
sdxl_model)
    # An SDXL checkpoint is described, and an SD 1.x embedding trained on it is refused with one
    # sentence naming the file and both shapes (not a shape error from deep inside a network),
    # the embedding untouched. (SDXL training itself: e2e_sdxl.)
    [ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }
    "$SDT_MAKE_CHECKPOINT" --config tiny-sdxl --out sdxl.safetensors >/dev/null || fail "sdt-make-checkpoint tiny-sdxl"
    run_host inspect --json sdxl.safetensors
    expect_rc 0 "inspect an SDXL checkpoint"
    grep -q '"vae_scaling_factor":.*0.13025' "$OUT" || fail "inspect does not give SDXL's VAE scale"
    run_host train --embedding "$EMB" --model sdxl.safetensors --tokenizer "$MODEL/tokenizer" --dataset "$DATASET" \
        --template "$STYLE" --width 64 --height 64 --device cpu --max-steps 1 --log-dir logs
    expect_error "an SD 1.x embedding on SDXL" "$(basename "$EMB")" "clip_l 32 + clip_g 48" "another model family"
    expect_untouched "$EMB" "$E2E_CASE"
    ;;
special_files)
    # A FIFO named as a caption, the panel file, the template or the model would block the run
    # forever (and Ctrl-C would not free it); /dev/zero would be read until memory ran out. Each
    # is refused with a sentence naming the file and what it is; a bad caption skips its image.
    good_dataset ds 3
    mkfifo panel.ini
    run_host train --config panel.ini
    expect_error "a FIFO as the panel file" panel.ini "named pipe (FIFO)"
    ln -s /dev/zero zero_template.txt
    train_with ds zero_template.txt
    expect_error "a template linked to /dev/zero" zero_template.txt "character device"
    mkfifo piped_model.safetensors
    train_with ds "$STYLE" --model piped_model.safetensors
    expect_error "a FIFO as the model" piped_model.safetensors "named pipe (FIFO)"
    expect_untouched "$EMB" "FIFO and device inputs"
    rm ds/demo_001.txt && mkfifo ds/demo_001.txt
    train_with ds "$STYLE"
    expect_rc 0 "a FIFO as a caption beside good images"
    grep -i "warning" "$ERR" | grep -F "demo_001.txt" | grep -qF "named pipe (FIFO)" ||
        { fail "the FIFO caption is not reported by name as a FIFO"; show_stderr; }
    grep -qF "2 training images" "$ERR" || fail "expected the 2 other images to be used"
    TRAINED=1
    ;;
disk_full_card)
    # The disk fills up when the final PNG card is written, after the embedding was replaced:
    # the run fails (it exited 0 with a warning), the sentence says "No space left on device"
    # (libpng said "Write Error") and that the embedding was already replaced.
    good_dataset ds 2
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_ENOSPC=.png train_with ds "$STYLE"
    expect_error "a full disk at the final PNG card" "No space left on device" "already written" "$EMB"
    cmp -s "$EMB" "$EMB.before" && fail "the embedding was not replaced before the card failed"
    [ -z "$(find . -name '*.tmp-*')" ] || fail "temporary files were left behind: $(find . -name '*.tmp-*')"
    TRAINED=1
    ;;
disk_full_midrun)
    # The disk fills up during training. The loss CSV's row at step 1 stops the run (it went on
    # with a warning per row and per copy); the last good state is saved and the sentence names
    # what was written. Then a full disk for every .safetensors: the copy at step 2 stops the run,
    # the last good state cannot be saved either, and the sentence says both.
    good_dataset ds 2
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_ENOSPC=.csv train_with ds "$STYLE" --csv-every 1 --max-steps 50
    expect_error "a full disk at the loss CSV" "No space left on device" "training stopped" "last good state was saved" \
        "$EMB" "cat.state.safetensors"
    cmp -s "$EMB" "$EMB.before" && fail "the last good state did not replace the embedding"
    keep_copy "$EMB"
    SDTRAIN_PLUGIN=$SDT_TEST_PLUGIN SDTRAIN_FAULT_ENOSPC=.safetensors train_with ds "$STYLE" --save-every 2 \
        --max-steps 50 --log-dir logs2
    expect_error "a full disk at a copy" "No space left on device" "step 2" "training stopped" "also failed"
    expect_untouched "$EMB" "a full disk at a copy"
    [ -z "$(find . -name '*.tmp-*')" ] || fail "temporary files were left behind: $(find . -name '*.tmp-*')"
    TRAINED=1
    ;;
*)
    echo "unknown case $E2E_CASE" >&2
    exit 2
    ;;
esac

[ -n "${TRAINED:-}" ] || expect_untouched "$EMB" "$E2E_CASE"
e2e_finish
