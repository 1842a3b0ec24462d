#!/usr/bin/env bash
# Preview grids and samplers on the demo model: --preview-prompts FILE (blank lines and # comments
# skipped) by --preview-seeds writes one labelled grid per preview step in images/, of the size the
# layout promises (data/preview_grid.h: label margins + rows x cols cells); a cell is exactly the
# single preview of its prompt and seed (same sampler), and exactly what `sdt-host generate` renders
# with the trained embedding (one sampler for both); the samplers differ from each other and each is
# reproducible; bad prompts files, seeds and sampler names are one sentence naming them.
source "$(dirname "$0")/e2e_lib.sh"

for d in grid single; do new_embedding "$d" star 2; done
printf '# preview prompts, one per line\n\na photo of star\n   \n# a comment\na red circle\n' > prompts.txt
common=(--dataset "$DATASET" --template "$SDT_TEMPLATES/style_filewords.txt" "${TRAIN_COMMON[@]}" --max-steps 2
        --save-every 0 --csv-every 0 --preview-every 2 --preview-steps 4 --preview-cfg 3
        --preview-negative-prompt "blurry" --no-embedding-cards)

run_host train "${common[@]}" --embedding grid/star.safetensors --log-dir grid/logs --preview-prompts prompts.txt \
    --preview-seeds "11, 22" --preview-sampler euler_a
expect_rc 0 "train with a preview grid"
grid=$(run_folder grid/logs star)/images/star-2.png
expect_file "$grid" "the preview grid of step 2"
# 2 prompts x 2 seeds of 64 x 64. Left margin: the widest prompt, "a photo of star" (15 characters
# of 6 pixels less the last gap) + 2 x 4 padding = 97; top: the title line (7) + the one-line seed
# labels (7) + 4 x 4 padding = 30.
left=97 top=30
[ "$(od -An -tu1 -j16 -N8 "$grid" | tr -s ' ')" = " 0 0 0 225 0 0 0 158" ] ||
    fail "the grid is not $((left + 128)) x $((top + 128)): $(od -An -tu1 -j16 -N8 "$grid")"

run_host train "${common[@]}" --embedding single/star.safetensors --log-dir single/logs --preview-prompt "a photo of star" \
    --preview-seed 22 --preview-sampler euler_a
expect_rc 0 "train with a single preview"
single=$(run_folder single/logs star)/images/star-2.png
[ "$(od -An -tu1 -j16 -N8 "$single" | tr -s ' ')" = " 0 0 0 64 0 0 0 64" ] || fail "the single preview is not 64 x 64"
cmp -s <("$E2E_TOOL" png-crop "$grid" $((left + 64)) "$top" 64 64) <("$E2E_TOOL" png-crop "$single" 0 0 64 64) ||
    fail "the grid's cell (a photo of star, seed 22) is not the single preview of that prompt and seed"
cmp -s <("$E2E_TOOL" png-crop "$grid" "$left" "$top" 64 64) <("$E2E_TOOL" png-crop "$single" 0 0 64 64) &&
    fail "seeds 11 and 22 gave the same cell"
grep -qa "Sampler: euler_a" "$grid" || fail "the grid's PNG text does not name the sampler"

# sdt-host generate renders that cell from the trained embedding with the same sampler.
GEN=(generate --model "$MODEL" --prompt "a photo of star" --negative "blurry" --width 64 --height 64 --steps 4 --cfg 3
     --device cpu --embedding single/star.safetensors)
run_host "${GEN[@]}" --seed 22 --sampler euler_a --out gen_euler_a.png
expect_rc 0 "generate with euler_a"
cmp -s <("$E2E_TOOL" png-crop gen_euler_a.png 0 0 64 64) <("$E2E_TOOL" png-crop "$single" 0 0 64 64) ||
    fail "generate --sampler euler_a differs from the training preview of the same prompt, seed and embedding"
for s in ddim dpmpp_2m_karras; do
    run_host "${GEN[@]}" --seed 22 --sampler "$s" --out "gen_$s.png"
    expect_rc 0 "generate with $s"
    run_host "${GEN[@]}" --seed 22 --sampler "$s" --out "gen_$s.again.png"
    cmp -s "gen_$s.png" "gen_$s.again.png" || fail "$s: the same seed gave another image"
    cmp -s <("$E2E_TOOL" png-crop "gen_$s.png" 0 0 64 64) <("$E2E_TOOL" png-crop gen_euler_a.png 0 0 64 64) &&
        fail "$s gave euler_a's image"
done
run_host "${GEN[@]}" --seed 22 --out gen_default.png
cmp -s gen_default.png gen_ddim.png || fail "generate without --sampler is not DDIM"
run_host "${GEN[@]}" --seed 22 --sampler euler --out bad.png
expect_error "generate --sampler euler" "--sampler" "euler_a"
[ -e bad.png ] && fail "a bad sampler wrote an image"

# The panel file's keys, and a hypernetwork run: a grid with the DPM++ sampler named.
new_embedding panel star 2
printf '[train]\npreview-prompts=prompts.txt\npreview-seeds=5, 6\npreview-sampler=dpmpp_2m_karras\nflip=true\n' > panel.ini
run_host train "${common[@]}" --config panel.ini --embedding panel/star.safetensors --log-dir panel/logs
expect_rc 0 "train with the grid options in a panel file"
pgrid=$(run_folder panel/logs star)/images/star-2.png
grep -qa "Sampler: dpmpp_2m_karras" "$pgrid" || fail "the panel file's preview-sampler did not reach the grid"
[ "$(od -An -tu1 -j16 -N8 "$pgrid" | tr -s ' ')" = " 0 0 0 225 0 0 0 158" ] || fail "the panel file's grid is not 225 x 158"
run_host create-hypernetwork --name shapes --sizes 128,64 --out hn
expect_rc 0 "create-hypernetwork"
run_host train "${common[@]}" --hypernetwork hn/shapes.pt --log-dir hn/logs --preview-prompts prompts.txt --preview-seeds 2
expect_rc 0 "train a hypernetwork with a preview grid"
hgrid=$(run_folder hn/logs shapes)/images/shapes-2.png
# Two seeds drawn for the step (32 bits): "seed" and the number on two lines over each cell, so the
# top margin is one line (10 pixels) taller.
[ "$(od -An -tu1 -j16 -N8 "$hgrid" | tr -s ' ')" = " 0 0 0 225 0 0 0 168" ] || fail "the hypernetwork's grid is not 225 x 168"

# Bad inputs: one sentence naming the option or the file and line; nothing trained.
printf 'a photo of star\ncaf\xe9\n' > latin1.txt
run_host train "${common[@]}" --embedding grid/star.safetensors --log-dir bad/logs --max-steps 4 --preview-prompts latin1.txt
expect_error "a prompts file that is not UTF-8" "latin1.txt" "line 2"
printf '# nothing\n\n' > empty.txt
run_host train "${common[@]}" --embedding grid/star.safetensors --log-dir bad/logs --max-steps 4 --preview-prompts empty.txt
expect_error "a prompts file without prompts" "empty.txt" "no prompt"
run_host train "${common[@]}" --embedding grid/star.safetensors --log-dir bad/logs --max-steps 4 --preview-seeds 0
expect_error "--preview-seeds 0" "--preview-seeds"
run_host train "${common[@]}" --embedding grid/star.safetensors --log-dir bad/logs --max-steps 4 --preview-sampler euler
expect_error "--preview-sampler euler" "--preview-sampler" "dpmpp_2m_karras"
[ -d bad/logs ] && [ -n "$(find bad/logs -name '*.png')" ] && fail "a refused run wrote a preview"
e2e_finish
