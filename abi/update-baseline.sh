#!/bin/sh
# update-baseline.sh [BUILD_DIR] - regenerates the ABI baselines from a build. Run it only when
# the ABI changed on purpose (a new factory, fields appended to a struct, a new minor version),
# review `git diff abi/`, and commit it with the header change.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build="${1:-$here/../build}"
cmake --build "$build" --target sdtrain sdtrain_abi_types
abidw --no-corpus-path --no-show-locs --headers-dir "$here" --drop-private-types "$build/plugin/libsdtrain.so" > "$here/libsdtrain.abi"
abidw --no-corpus-path --no-show-locs --headers-dir "$here" --drop-private-types "$build/tests/abi/libsdtrain_abi_types.so" > "$here/libsdtrain-types.abi"
echo "updated $here/libsdtrain.abi and $here/libsdtrain-types.abi; review with git diff abi/ and commit"
