#!/bin/sh
# test_install.sh PYTHON PACKAGE_DIR PLUGIN: `pip install ./python` into a temporary venv, offline
# (--no-index, --no-build-isolation: Debian's setuptools and wheel build it), then the installed
# package (not the source tree) opens the plugin and runs the loss scaler without torch imported,
# and pip uninstalls it cleanly. Skips (77) without the interpreter, venv or setuptools.
set -eu
py=$1 src=$2 plugin=$3
[ -x "$py" ] || { echo "SKIP: $py is not installed"; exit 77; }
"$py" -c "import ensurepip, venv" 2>/dev/null || { echo "SKIP: python3-venv is not installed"; exit 77; }
"$py" -c "import setuptools, wheel" 2>/dev/null || { echo "SKIP: python3-setuptools or python3-wheel is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy: setuptools writes build/ and *.egg-info beside the sources it builds.
mkdir "$work/src"
cp -r "$src/pyproject.toml" "$src/README.md" "$src/sdtrain" "$work/src/"
find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
"$py" -m venv --system-site-packages "$work/venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
unset PYTHONPATH
"$work/venv/bin/python" -m pip install --no-index --no-build-isolation -q "$work/src"
cd "$work"
SDTRAIN_PLUGIN=$plugin VENV=$work/venv "$work/venv/bin/python" - <<'PYEOF'
import array, os, sys
import sdtrain
where = os.path.realpath(sdtrain.__file__)
assert where.startswith(os.path.realpath(os.environ["VENV"])), "imported from %s, not the venv" % where
with sdtrain.Plugin() as plugin:
    print("installed sdtrain", sdtrain.__version__, "opened", plugin)
    with plugin.loss_scaler(init_scale=4.0) as s:
        assert s.scale_loss(1.5) == 6.0
        grads = array.array("f", [4.0, -8.0])
        assert s.unscale(0, [grads]) is False and list(grads) == [1.0, -2.0], grads
        assert s.should_step(0) is True
        s.update()
        try:
            s.update()
            raise SystemExit("update twice was not refused")
        except sdtrain.ScalerMisuseError as e:
            assert "No inf checks" in e.sentence, e.sentence
assert "torch" not in sys.modules, "importing and using sdtrain imported torch"
print("OK: the installed package works")
PYEOF
"$work/venv/bin/python" -m pip show sdtrain | grep -q '^Version: ' || { echo "FAIL: pip show sdtrain"; exit 1; }
"$work/venv/bin/python" -m pip uninstall -y -q sdtrain
if "$work/venv/bin/python" -c "import sdtrain" 2>/dev/null; then echo "FAIL: sdtrain still imports after uninstall"; exit 1; fi
echo "OK: pip install ./python, import, use, uninstall"
