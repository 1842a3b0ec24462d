#!/usr/bin/env bash
# SD3/SD3.5 files as people have them, through sdt-host inspect (issue 30): SAI's all-in-one layout with T5 and
# without, and a lone fp8 T5 file (t5xxl_fp8_e4m3fn.safetensors), made by sdt-make-checkpoint --pack from the
# tiny generators. inspect names the family, the variant, what the file carries and, for what it lacks, the
# option that supplies it (test_transformer_files checks the rest in C: Flux, folders, fp8 values).
source "$(dirname "$0")/e2e_lib.sh"
[ -n "${SDT_MAKE_CHECKPOINT:-}" ] || { echo "sdt-make-checkpoint is not built; skipping"; exit 77; }

"$SDT_MAKE_CHECKPOINT" --config tiny-mmdit --out mmdit.safetensors >/dev/null || fail "tiny-mmdit"
"$SDT_MAKE_CHECKPOINT" --config tiny-t5 --out t5.safetensors >/dev/null || fail "tiny-t5"
"$SDT_MAKE_CHECKPOINT" --pack sai-sd3 --transformer mmdit.safetensors --t5xxl t5.safetensors \
    --out sd35.safetensors >/dev/null || fail "pack sai-sd3 with T5"
"$SDT_MAKE_CHECKPOINT" --pack sai-sd3 --transformer mmdit.safetensors --out sd35_no_t5.safetensors >/dev/null ||
    fail "pack sai-sd3"
"$SDT_MAKE_CHECKPOINT" --pack plain --t5xxl t5.safetensors --fp8 e4m3 --out t5xxl_fp8_e4m3fn.safetensors \
    >/dev/null || fail "pack an fp8 T5"

run_host inspect --json sd35.safetensors
expect_rc 0 "inspect an SAI SD3.5 file"
[ "$(json_get "$OUT" family)" = sd3 ] || fail "inspect: family is '$(json_get "$OUT" family)'"
grep -q '"layout":.*Stability AI' "$OUT" || fail "inspect does not name SAI's layout"
grep -q '"carries":.*"t5xxl"' "$OUT" || fail "inspect does not say the file carries T5"
grep -q '"missing":.*--clip-l FILE.*--clip-g FILE.*--vae FILE' "$OUT" || fail "inspect does not name the options"

run_host inspect sd35_no_t5.safetensors
expect_rc 0 "inspect an SAI SD3.5 file without T5 (text)"
grep -qE '^variant: +SD3.5' "$OUT" || fail "inspect's text has no variant line"
grep -qE '^missing: .*T5-XXL with --t5xxl FILE' "$OUT" || fail "inspect's text does not name --t5xxl"
grep -qE '^carries: +none$' "$OUT" || fail "inspect's text does not say the file carries no encoder"
grep -q '^[{}]' "$OUT" && fail "inspect's text prints the model as raw JSON"

run_host inspect t5xxl_fp8_e4m3fn.safetensors
expect_rc 0 "inspect an fp8 T5 file"
grep -qE '^format: +text encoder file' "$OUT" || fail "an fp8 T5 file is not a text encoder file"
grep -qE '^use: .*--t5xxl FILE' "$OUT" || fail "inspect does not say how the T5 file is given"

e2e_finish
