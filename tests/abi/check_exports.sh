#!/bin/sh
# check_exports.sh LIB [SYMBOLS] - LIB exports exactly SYMBOLS (space-separated, sorted): sdtrain_entry
# for libsdtrain.so (docs/abi.md rule 1); the CUDA backend module's two entry points for it.
lib="$1"
want="${2:-sdtrain_entry}"
command -v nm >/dev/null 2>&1 || { echo "nm not found (binutils): skipping"; exit 77; }
exports=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u | tr '\n' ' ' | sed 's/ $//')
echo "exported: $exports"
if [ "$exports" != "$want" ]; then
    echo "FAIL: $lib must export only $want; hide the others (static, or the version script abi/sdtrain.map)"
    exit 1
fi
undefined_versions=$(nm -D "$lib" | grep -c ' U .*@GLIBCXX' || true)
[ "$want" != sdtrain_entry ] || [ "$undefined_versions" = 0 ] || { echo "FAIL: $lib needs libstdc++ symbols; the plugin must be C only"; exit 1; }
echo "ok"
