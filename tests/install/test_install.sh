#!/bin/sh
# test_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` into a temporary prefix gives a host
# author what README's "Installing" promises: the library with its SONAME, sdtrain.h, a
# pkg-config file and a CMake package that a small host builds against, and a plugin that
# trains (3 steps on the installed demo model; 2 more through the trainer factory, install_trainer_host.c);
# the installed sdt-host finds the plugin by itself.
set -eu
build=$1
src=$2
here=$src/tests/install
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sdt-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v pkg-config >/dev/null || { echo "pkg-config not installed: skipping"; exit 77; }
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"

pc=$(find "$prefix" -name sdtrain.pc)
[ -n "$pc" ] || { echo "FAIL: no sdtrain.pc installed"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
plugin=$(pkg-config --variable=plugin sdtrain)
major=$(sed -n 's/^#define SDT_ABI_VERSION_MAJOR \([0-9]*\).*/\1/p' "$src/abi/sdtrain.h")
echo "pkg-config: sdtrain $(pkg-config --modversion sdtrain), plugin $plugin"
[ -f "$plugin" ] || { echo "FAIL: the plugin named by sdtrain.pc does not exist"; exit 1; }
soname=$(objdump -p "$plugin" | sed -n 's/^ *SONAME *//p')
[ "$soname" = "libsdtrain.so.$major" ] || { echo "FAIL: SONAME is '$soname', expected libsdtrain.so.$major"; exit 1; }
libdir=$(pkg-config --variable=libdir sdtrain)
[ -L "$libdir/libsdtrain.so" ] || { echo "FAIL: no libsdtrain.so link in $libdir"; exit 1; }
[ -f "$(pkg-config --variable=includedir sdtrain)/sdtrain.h" ] || { echo "FAIL: sdtrain.h not installed"; exit 1; }
if [ -f "$build/plugin/libsdtrain_cuda.so" ] && [ ! -f "$libdir/libsdtrain_cuda.so" ]; then
    echo "FAIL: libsdtrain_cuda.so was built but not installed beside libsdtrain.so"; exit 1
fi

# The Python binding, imported from the wheel installed in share/sdtrain/python (a pure-Python
# wheel imports from the zip), finds the installed plugin through the same pkg-config variable.
if command -v python3 >/dev/null; then
    wheel=$(ls "$prefix"/share/sdtrain/python/sdtrain-*-py3-none-any.whl) || { echo "FAIL: no wheel installed"; exit 1; }
    found=$(unset SDTRAIN_PLUGIN; PYTHONPATH=$wheel PYTHONDONTWRITEBYTECODE=1 python3 -c \
            'import sdtrain; p = sdtrain.Plugin(); print(p.path); p.close()')
    [ "$found" = "$plugin" ] || { echo "FAIL: the Python binding opened '$found', not $plugin"; exit 1; }
    echo "python: sdtrain.Plugin() opened $found"
fi

# A host built through pkg-config trains a few steps with the installed plugin and demo assets.
share=$prefix/share/sdtrain
# The Flux demo model (sdt-host demo --model-family flux) is installed beside the SD one, tokenizers included.
for f in flux1-demo.safetensors clip_l.safetensors t5xxl.safetensors ae.safetensors t5_tokenizer/tokenizer.json \
    tokenizer/vocab.json tokenizer/merges.txt; do
    [ -f "$share/demo/model-flux/$f" ] || { echo "FAIL: the Flux demo model's $f is not installed"; exit 1; }
done
# shellcheck disable=SC2046 # pkg-config's flags are words
${CC:-cc} -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags sdtrain) "$here/install_host.c" "$here/install_host_common.c" -o "$tmp/host" -ldl
mkdir "$tmp/out"
"$tmp/host" "$plugin" "$share/demo/model" "$share/demo/dataset" "$share/templates/subject_filewords.txt" "$tmp/out" 3
# The same on the trainer factory (1.7), as README shows it; the host above keeps the deprecated
# textual-inversion factory, as a host built against an earlier 1.x does.
# shellcheck disable=SC2046 # pkg-config's flags are words
${CC:-cc} -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags sdtrain) "$here/install_trainer_host.c" "$here/install_host_common.c" -o "$tmp/trainer-host" -ldl
"$tmp/trainer-host" "$plugin" "$share/demo/model" "$share/demo/dataset" "$share/templates/subject_filewords.txt" "$tmp/out" 2

# The installed sdt-host finds the plugin relative to itself (no --plugin, no SDTRAIN_PLUGIN).
(unset SDTRAIN_PLUGIN; "$prefix/bin/sdt-host" inspect "$tmp/out/installed.safetensors") >"$tmp/inspect.txt"
grep -q "installed" "$tmp/inspect.txt" || { echo "FAIL: installed sdt-host inspect:"; cat "$tmp/inspect.txt"; exit 1; }
echo "installed sdt-host: inspect works without --plugin"

# The same host through the CMake package (find_package(sdtrain CONFIG), sdtrain::sdtrain).
cmake -S "$here/cmake_host" -B "$tmp/cmake-host" -DCMAKE_PREFIX_PATH="$prefix" -DHOST_SOURCE="$here/install_host.c;$here/install_host_common.c" \
      >"$tmp/cmake-host.log" 2>&1 || { cat "$tmp/cmake-host.log"; echo "FAIL: find_package(sdtrain)"; exit 1; }
cmake --build "$tmp/cmake-host" >>"$tmp/cmake-host.log" 2>&1 || { cat "$tmp/cmake-host.log"; exit 1; }
cmake_plugin=$(cat "$tmp/cmake-host/sdtrain_plugin.txt")
mkdir "$tmp/out2"
"$tmp/cmake-host/install_host" "$cmake_plugin" "$share/demo/model" "$share/demo/dataset" \
    "$(cat "$tmp/cmake-host/sdtrain_templates.txt")/subject_filewords.txt" "$tmp/out2" 1
echo "ok: installed tree usable through pkg-config and the CMake package"
