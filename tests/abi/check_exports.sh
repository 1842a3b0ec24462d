#!/bin/sh
# check_exports.sh LIB - libsdtrain.so exports exactly one symbol, sdtrain_entry (docs/abi.md rule 1).
lib="$1"
command -v nm >/dev/null 2>&1 || { echo "nm not found (binutils): skipping"; exit 77; }
exports=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
echo "exported: $exports"
if [ "$exports" != "sdtrain_entry" ]; then
    echo "FAIL: $lib must export only sdtrain_entry; hide the others (static, or the version script abi/sdtrain.map)"
    exit 1
fi
undefined_versions=$(nm -D "$lib" | grep -c ' U .*@GLIBCXX' || true)
[ "$undefined_versions" = 0 ] || { echo "FAIL: $lib needs libstdc++ symbols; the plugin must be C only"; exit 1; }
echo "ok"
