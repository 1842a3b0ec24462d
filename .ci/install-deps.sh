#!/usr/bin/env bash
# Installs sdtrain's build and test dependencies from Debian's packages.
# Idempotent: skips packages that are already installed. Used by README and .ci/run.
# Besides what the build needs, what CI (.ci/run) needs, unless --build-only is given:
#   clang, libclang-rt-14-dev   libFuzzer and the sanitizer runtimes for .ci/run's fuzzing
#   clang-format                the style check (.ci/format.sh --check; Debian 12's is clang-format 14)
#   python3-torch               CPU torch for the parity tests (tests/parity; skipped without it)
#   python3-venv, python3-pip   the Python binding's install test (its wheel and pip install ./python into a
#                               plain venv, offline; no setuptools or wheel needed)
#   ninja-build, dpkg-dev       the Ninja build check and CPack's .deb (dpkg-shlibdeps)
#   chromium, nodejs, npm, curl sdt-host serve's tests: the page in headless Chromium (puppeteer-core,
#                               which the test installs with npm ci from tests/e2e/serve/package-lock.json)
#                               and the security rules over HTTP
# libsoup-3.0-dev builds `sdt-host serve` (the training panel in a browser); without it sdt-host has no serve.
# locales (glibc's locale sources) is for the locale test, which generates de_DE.UTF-8 with localedef.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git libsoup-3.0-dev
      libglib2.0-dev libpng-dev zlib1g-dev libstb-dev libwebp-dev
      libopenblas-dev libcjson-dev abigail-tools python3 locales)
[ "${1:-}" = "--build-only" ] || pkgs+=(clang clang-format libclang-rt-14-dev python3-torch python3-venv python3-pip
                                         ninja-build dpkg-dev chromium curl)
# node and npm: Debian's nodejs and npm, unless a node with its npm is already installed (NodeSource's
# nodejs carries npm and conflicts with Debian's npm package)
if [ "${1:-}" != "--build-only" ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then pkgs+=(nodejs npm); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
