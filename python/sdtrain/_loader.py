"""Finding libsdtrain.so: an explicit path, else $SDTRAIN_PLUGIN, else pkg-config's `plugin`
variable of sdtrain.pc (packaging/sdtrain.pc.in: the file `cmake --install` puts in the libdir)."""
import os
import shutil
import subprocess

from .errors import SdtrainError

_NOT_FOUND = -12


def _pkg_config_plugin():
    """pkg-config --variable=plugin sdtrain, or (None, why)."""
    tool = shutil.which("pkg-config") or shutil.which("pkgconf")
    if not tool:
        return None, "pkg-config is not installed"
    try:
        done = subprocess.run([tool, "--variable=plugin", "sdtrain"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return None, "pkg-config failed (%s)" % e
    path = done.stdout.strip()
    if done.returncode != 0 or not path:
        return None, "pkg-config knows no sdtrain package (is sdtrain.pc on PKG_CONFIG_PATH?)"
    return path, None


def find_plugin(path=None):
    """The plugin file to open, by the binding's locating rule; SdtrainError (NOT_FOUND) naming
    every place tried when none exists."""
    tried = []
    if path is not None:
        path = os.fspath(path)
        if os.path.isfile(path):
            return path
        raise SdtrainError(_NOT_FOUND, "The plugin %s does not exist; pass the path of libsdtrain.so." % path)
    env = os.environ.get("SDTRAIN_PLUGIN")
    if env:
        if os.path.isfile(env):
            return env
        tried.append("$SDTRAIN_PLUGIN names %s, which does not exist" % env)
    else:
        tried.append("$SDTRAIN_PLUGIN is not set")
    found, why = _pkg_config_plugin()
    if found:
        if os.path.isfile(found):
            return found
        tried.append("pkg-config's plugin variable names %s, which does not exist" % found)
    else:
        tried.append(why)
    raise SdtrainError(_NOT_FOUND, "libsdtrain.so was not found: %s. Pass its path to sdtrain.Plugin(path), set "
                       "SDTRAIN_PLUGIN, or install sdtrain so that `pkg-config --variable=plugin sdtrain` names it."
                       % "; ".join(tried))
