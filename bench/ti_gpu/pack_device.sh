#!/usr/bin/env bash
# Packs a worktree and its build folder for a GPU host that has CUDA but not this machine's
# libraries, keeping the absolute paths the build folder records (extract with `tar -xJf TAR -C /`):
# the sources (git's tracked and untracked, not ignored, files), the build folder without object
# files and without the CPU-only test programs (and without the source copies of the demo models,
# which the build holds), and the run-time libraries of the plugin and
# sdt-host that a bare CUDA image lacks (under BUILD_DIR/device-libs: put it on LD_LIBRARY_PATH).
#   bench/ti_gpu/pack_device.sh WORKTREE BUILD_DIR OUT.tar.xz [--no-tree]
set -euo pipefail
tree=$(cd "${1:?worktree}" && pwd); build=$(cd "${2:?build dir}" && pwd); tar_out=${3:?output .tar.xz}
libs="$build/device-libs"
mkdir -p "$libs"
for lib in libglib-2.0.so.0 libgmodule-2.0.so.0 libpcre2-8.so.0 libcjson.so.1 libpng16.so.16 libwebp.so.7 \
           libwebpdemux.so.2 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libgomp.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$libs/" 2>/dev/null || cp -L "/lib/x86_64-linux-gnu/$lib" "$libs/"
done
# everything else sdt-host and the plugin link (sdt-host serve's libsoup and its closure), glibc's own aside
ldd "$build/host-sim/sdt-host" "$build/plugin/libsdtrain.so" | awk '$3 ~ /^\// { print $3 }' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\.so' | while read -r path; do
    [ -e "$libs/$(basename "$path")" ] || cp -L "$path" "$libs/"
  done
list=$(mktemp)
# the tree, unless --no-tree (a device call that copies the working tree to the same path has it already,
# and tree + pack must stay under what one call carries)
[ "${4:-}" = --no-tree ] || (cd "$tree" && git ls-files --cached --others --exclude-standard | grep -vE "^models/demo_(model|flux)/.*\.safetensors$" | sed "s|^|$tree/|") > "$list"
# the build: everything but object files, CMake's internals, the web panel test's npm packages and the
# CPU-only test programs (the GPU tests, gpu_* in any folder such as tests/trainer/gpu_inproc, stay, and so do
# the parity drivers: tests/parity/run_gpu_host.sh runs them against PyTorch on the GPU host), without the
# models CPU tests generate under tests/
(cd "$build" && find . \( -type f -o -type l \) ! -name '*.o' ! -name '*.a' ! -path '*/CMakeFiles/*' ! -path './serve-npm/*' \
    ! \( -path './tests/*' -perm -u+x ! -path './tests/gpu/*' ! -path './tests/e2e/*' ! -path './tests/parity/*' \
    ! -name hn_step_cli ! -name 'gpu_*' \) ! \( -path './tests/*' -name '*.safetensors' \) \
    ! \( -path './host-sim/demo/model*' -name '*.safetensors' \) ! -name 'libsdtrain*.so.1.*' | sed "s|^\.|$build|") >> "$list"
# the shared object's current soname target only (older versions linger in a long-lived build folder)
real=$(readlink -f "$build/plugin/libsdtrain.so"); echo "$real" >> "$list"
# the demo models' weights are copies of the tree's models/demo_* files or made from them: left out (the tree
# travels with the device call anyway) and made again there by device-restore.sh, which a device script runs first
cat > "$build/device-restore.sh" <<RESTORE
#!/bin/sh
# Written by pack_device.sh: the demo models' weights the pack leaves out, made from the tree as the build does.
set -e
d=$build/host-sim/demo; m=$build/models/tools/sdt-make-checkpoint
cp "$tree/models/demo_model/sdtrain-demo.safetensors" "\$d/model/"
rm -rf "\$d/model/unet" "\$d/model/text_encoder" "\$d/model/vae"
"\$m" --from "\$d/model/sdtrain-demo.safetensors" --layout diffusers --dtype f32 --out "\$d/model" > /dev/null
for f in clip_l t5xxl ae; do cp "$tree/models/demo_flux/\$f.safetensors" "\$d/model-flux/"; done
"\$m" --pack bfl-flux --transformer "$tree/models/demo_flux/transformer.safetensors" \
    --out "\$d/model-flux/flux1-demo.safetensors" > /dev/null
RESTORE
chmod +x "$build/device-restore.sh"; echo "$build/device-restore.sh" >> "$list"
tar -cf - --files-from="$list" | xz -T2 -6 > "$tar_out"
rm -f "$list"
ls -la "$tar_out"
