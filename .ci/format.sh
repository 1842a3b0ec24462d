#!/usr/bin/env bash
# The project's C/CUDA style is .clang-format, applied by clang-format 14 (Debian 12's).
#   bash .ci/format.sh          reformats every tracked .c/.h/.cu/.cuh file in place
#   bash .ci/format.sh --check  lists the files that differ and fails (CI's stage 0)
# Another clang-format major version formats some constructs differently, so both modes refuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
  echo "format: clang-format is not installed; install Debian's clang-format (14) with: bash .ci/install-deps.sh" >&2
  exit 1
fi
major=$("$fmt" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [ "$major" != "14" ]; then
  echo "format: $fmt is clang-format $major; the tree is formatted by clang-format 14 (Debian 12's clang-format-14)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  # One process for the whole tree; each differing line is one "file:line:col: error:" diagnostic.
  mapfile -t bad < <("$fmt" --style=file --dry-run "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: \(warning\|error\): code should be clang-formatted.*/\1/p' | sort -u)
  if [ ${#bad[@]} -ne 0 ]; then
    printf 'format: %s is not in the style of .clang-format\n' "${bad[@]}" >&2
    echo "format: ${#bad[@]} file(s) differ; run: bash .ci/format.sh (then review and commit)" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files in the style of .clang-format"
else
  "$fmt" --style=file -i "${files[@]}"
  echo "format: ${#files[@]} files formatted"
fi
