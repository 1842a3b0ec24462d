"""Builds the sdtrain package's wheel with the standard library only, so installing it needs no
setuptools or wheel (a plain venv, offline). Two ways in:

  - the PEP 517 build backend of pyproject.toml: `pip install ./python` (build_wheel, build_sdist,
    build_editable);
  - `python3 sdtrain_wheel.py DIST_DIR`: what the CMake build runs to write
    DIST_DIR/sdtrain-<version>-py3-none-any.whl (PEP 427), which `pip install --no-index` takes
    as it is.

The version is the ABI's, from sdtrain/_abi.py, so the package cannot claim another. The
archive is reproducible: sorted entries, fixed timestamps and modes."""
import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile

NAME = "sdtrain"
SUMMARY = ("Python binding of sdtrain (ctypes over its C ABI): train textual-inversion embeddings and "
           "hypernetworks, and its loss scaler with torch.amp.GradScaler's calls")
REQUIRES_PYTHON = ">=3.8"
CLASSIFIERS = ("Programming Language :: Python :: 3", "Operating System :: POSIX :: Linux")
EXTRAS = {"torch": ("torch",)}

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.join(_HERE, NAME)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same bytes from every build
_SDIST_FILES = ("pyproject.toml", "README.md", "sdtrain_wheel.py")


def version():
    """MAJOR.MINOR.PATCH from sdtrain/_abi.py's ABI_VERSION_* (the header's, checked by python_struct_layout)."""
    path = os.path.join(_PACKAGE_DIR, "_abi.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^ABI_VERSION_%s = (\d+)$" % part, text, re.M)
        if not m:
            raise SystemExit("%s: no line `ABI_VERSION_%s = <number>`; the package version is read from it."
                             % (path, part))
        parts.append(m.group(1))
    return ".".join(parts)


def _package_files():
    """(archive name, path) of every module of the package, sorted; caches and editor files left out."""
    out = []
    for root, dirs, files in os.walk(_PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                out.append((os.path.relpath(path, _HERE).replace(os.sep, "/"), path))
    return sorted(out)


def _metadata():
    with open(os.path.join(_HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + version(), "Summary: " + SUMMARY,
             "Requires-Python: " + REQUIRES_PYTHON]
    lines += ["Classifier: " + c for c in CLASSIFIERS]
    for extra, requirements in sorted(EXTRAS.items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in requirements]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def wheel_name():
    return "%s-%s-py3-none-any.whl" % (NAME, version())


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _write_wheel(directory, contents):
    """Writes directory/wheel_name() from contents, a list of (archive name, bytes), adding the
    dist-info (METADATA, WHEEL, RECORD). Returns the file's name."""
    dist_info = "%s-%s.dist-info" % (NAME, version())
    wheel_meta = "Wheel-Version: 1.0\nGenerator: sdtrain_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    contents = list(contents) + [(dist_info + "/METADATA", _metadata().encode("utf-8")),
                                 (dist_info + "/WHEEL", wheel_meta.encode("utf-8"))]
    record = "".join("%s,%s,%d\n" % (name, _record_hash(data), len(data)) for name, data in contents)
    contents.append((dist_info + "/RECORD", (record + dist_info + "/RECORD,,\n").encode("utf-8")))
    name = wheel_name()
    os.makedirs(directory, exist_ok=True)
    partial = os.path.join(directory, name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        for entry, data in contents:
            info = zipfile.ZipInfo(entry, _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(partial, os.path.join(directory, name))
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 ---------------------------------------------------------------------------------------------

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(name, _read(path)) for name, path in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel whose .pth puts this folder on sys.path, so edits to sdtrain/ take effect."""
    return _write_wheel(wheel_directory, [(NAME + ".pth", (_HERE + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, version())
    name = base + ".tar.gz"
    entries = [(f, os.path.join(_HERE, f)) for f in _SDIST_FILES] + _package_files()
    members = [(base + "/PKG-INFO", _metadata().encode("utf-8"))]
    members += [(base + "/" + arc, _read(path)) for arc, path in entries]
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arc, data in sorted(members):
            info = tarfile.TarInfo(arc)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return name


def main(argv):
    if len(argv) != 2:
        print("usage: %s DIST_DIR  (writes DIST_DIR/%s)" % (os.path.basename(argv[0]), wheel_name()), file=sys.stderr)
        return 2
    directory = argv[1]
    # One wheel in the folder: a version change leaves no older wheel for `pip install sdtrain-*.whl`.
    if os.path.isdir(directory):
        for old in os.listdir(directory):
            if old.startswith(NAME + "-") and old.endswith(".whl") and old != wheel_name():
                os.remove(os.path.join(directory, old))
    print(os.path.join(directory, build_wheel(directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
