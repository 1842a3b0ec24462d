#!/bin/sh
# test_install.sh WHEEL_DIR PACKAGE_DIR PLUGIN PYTHON...: the Python binding installed into a
# plain venv (no --system-site-packages, setuptools and wheel removed from it), offline, with
# each interpreter given (the python3 on PATH and Debian's /usr/bin/python3; one that is missing
# or lacks venv is skipped, and the test skips (77) when none is left):
#   - the wheel the build wrote (WHEEL_DIR/sdtrain-*-py3-none-any.whl);
#   - pip install ./python (the package's own stdlib-only build backend), leaving the source
#     folder as it was;
#   - pip install -e ./python, and the sdist that backend writes (with the first interpreter only).
# Each time the installed package (not the source tree, except for -e) opens the plugin and runs
# the loss scaler without torch imported, and pip uninstalls it cleanly.
set -eu
wheel_dir=$1 src=$(cd "$2" && pwd) plugin=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL

found=
for py in "$@"; do command -v "$py" >/dev/null 2>&1 && found=1; done
[ -n "$found" ] || { echo "SKIP: none of these is installed: $*"; exit 77; }
wheels=$(ls "$wheel_dir"/sdtrain-*-py3-none-any.whl 2>/dev/null || true)
[ "$(printf '%s\n' "$wheels" | grep -c .)" -eq 1 ] || {
    echo "FAIL: want one $wheel_dir/sdtrain-*-py3-none-any.whl (the build writes it), found: ${wheels:-none}"; exit 1; }
wheel=$wheels

# check VENV WHERE: the venv's sdtrain imports from WHERE and works.
check() {
    SDTRAIN_PLUGIN=$plugin WHERE=$2 "$1/bin/python" - <<'PYEOF'
import array, os, sys
import sdtrain
where = os.path.realpath(sdtrain.__file__)
assert where.startswith(os.path.realpath(os.environ["WHERE"]) + os.sep), "imported from %s, not %s" % (where, os.environ["WHERE"])
with sdtrain.Plugin() as plugin:
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
print("  installed sdtrain", sdtrain.__version__, "works, from", os.path.dirname(where))
PYEOF
}

# uninstall VENV: pip removes it (by its RECORD) and it no longer imports.
uninstall() {
    "$1/bin/python" -m pip uninstall -y -q sdtrain
    if (cd "$work" && "$1/bin/python" -c "import sdtrain" 2>/dev/null); then
        echo "FAIL: sdtrain still imports after uninstall"; exit 1
    fi
}

tested=0 seen=
for py in "$@"; do
    if ! command -v "$py" >/dev/null 2>&1; then echo "SKIP $py: not installed"; continue; fi
    real=$(readlink -f "$(command -v "$py")")
    case " $seen " in *" $real "*) continue ;; esac
    seen="$seen $real"
    if ! "$py" -c "import ensurepip, venv" 2>/dev/null; then echo "SKIP $py: no venv/ensurepip (python3-venv)"; continue; fi
    echo "== $py ($("$py" --version 2>&1))"
    venv=$work/venv
    rm -rf "$venv"
    "$py" -m venv "$venv"
    # Nothing beyond pip and the standard library: the failure reported was setuptools' missing bdist_wheel.
    "$venv/bin/python" -m pip uninstall -y -q setuptools wheel 2>/dev/null || true
    if "$venv/bin/python" -c "import setuptools" 2>/dev/null || "$venv/bin/python" -c "import wheel" 2>/dev/null; then
        echo "FAIL: the venv still has setuptools or wheel"; exit 1
    fi
    site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

    "$venv/bin/python" -m pip install --no-index -q "$wheel"
    check "$venv" "$site"
    uninstall "$venv"

    before=$(cd "$src" && find . | sort)
    (cd "$work" && "$venv/bin/python" -m pip install --no-index -q "$src")
    check "$venv" "$site"
    uninstall "$venv"
    [ "$(cd "$src" && find . | sort)" = "$before" ] || { echo "FAIL: pip install ./python wrote into $src"; exit 1; }

    tested=$((tested + 1))
    [ $tested -eq 1 ] || continue  # the backend's other two ways, once: they depend on no interpreter
    (cd "$work" && "$venv/bin/python" -m pip install --no-index -q -e "$src")
    check "$venv" "$src"
    uninstall "$venv"

    sdist=$(cd "$work" && "$venv/bin/python" -c "import sys; sys.path.insert(0, sys.argv[1]); import sdtrain_wheel; print(sdtrain_wheel.build_sdist(sys.argv[2]))" "$src" "$work/dist")
    (cd "$work" && "$venv/bin/python" -m pip install --no-index -q "$work/dist/$sdist")
    check "$venv" "$site"
    uninstall "$venv"
done
[ $tested -gt 0 ] || { echo "SKIP: no Python interpreter with venv among: $*"; exit 77; }
echo "OK: the wheel, pip install ./python, -e and the sdist, in a plain venv, with $tested interpreter(s)"
