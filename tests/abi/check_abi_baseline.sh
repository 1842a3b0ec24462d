#!/bin/sh
# check_abi_baseline.sh SRC_DIR PLUGIN_SO TYPES_SO - the built ABI equals the committed baseline.
# abi/libsdtrain.abi covers the exported symbol and what it reaches; abi/libsdtrain-types.abi
# covers every public type of sdtrain.h (via tests/abi/abi_types_anchor.c). A difference fails:
# changing the ABI is a deliberate act (abi/update-baseline.sh, reviewed, committed).
src="$1"; plugin="$2"; types="$3"
command -v abidiff >/dev/null 2>&1 || { echo "abidiff not installed (Debian package abigail-tools): skipping"; exit 77; }
status=0
check() {
    baseline="$src/abi/$1"; built="$2"
    if [ ! -f "$baseline" ]; then
        echo "FAIL: no baseline $baseline; create it with abi/update-baseline.sh and commit it"
        status=1; return
    fi
    abidiff --no-show-locs "$baseline" "$built"; rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $built differs from $baseline (abidiff exit $rc: 4 = ABI change, 8 = incompatible change)."
        echo "      If the change is deliberate and additive, run abi/update-baseline.sh <build dir> and commit the result."
        status=1
    else
        echo "ok: $built matches $baseline"
    fi
}
check libsdtrain.abi "$plugin"
check libsdtrain-types.abi "$types"
exit $status
