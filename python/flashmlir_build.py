"""The in-tree PEP 517 build backend of the flashmlir package: it needs
nothing but the standard library, so `pip install ./python` works offline
(pip's isolated build environment has nothing to download).

The wheel (py3-none-any) holds flashmlir/**/*.py and, when present, the
kernels in flashmlir/kernels/ (PTX + JSON manifests, built there by
`python3 -m flashmlir compile --default-set`); the package finds them
without environment variables. An editable install (`pip install -e
./python`) puts this folder on sys.path instead.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG = "flashmlir"
_SUFFIXES = (".py", ".json", ".ptx")


def _version() -> str:
    with open(os.path.join(_HERE, _PKG, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    return m.group(1)


def _metadata() -> str:
    readme = ""
    path = os.path.join(_HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {_PKG}",
        f"Version: {_version()}",
        "Summary: Exact attention compiled with MLIR into FlashAttention-class GPU kernels, "
        "called from PyTorch",
        "Requires-Python: >=3.9",
        "Provides-Extra: torch",
        'Requires-Dist: torch>=2.4; extra == "torch"',
        "Provides-Extra: transformers",
        'Requires-Dist: torch>=2.4; extra == "transformers"',
        'Requires-Dist: transformers>=4.48; extra == "transformers"',
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ])


def _files():
    """(archive name, path) of every file of the package, sorted."""
    out = []
    root = os.path.join(_HERE, _PKG)
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
        for f in sorted(files):
            if f.endswith(_SUFFIXES):
                path = os.path.join(d, f)
                out.append((os.path.relpath(path, _HERE).replace(os.sep, "/"), path))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, entries) -> str:
    """entries: (archive name, bytes). Adds the dist-info and RECORD."""
    version = _version()
    dist_info = f"{_PKG}-{version}.dist-info"
    wheel = ("Wheel-Version: 1.0\nGenerator: flashmlir_build\nRoot-Is-Purelib: true\n"
             "Tag: py3-none-any\n")
    entry_points = "[console_scripts]\nflashmlir = flashmlir.__main__:main\n"
    entries = list(entries) + [
        (f"{dist_info}/METADATA", _metadata().encode()),
        (f"{dist_info}/WHEEL", wheel.encode()),
        (f"{dist_info}/entry_points.txt", entry_points.encode()),
        (f"{dist_info}/top_level.txt", f"{_PKG}\n".encode()),
    ]
    name = f"{_PKG}-{version}-py3-none-any.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    record = [_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries:
            zi = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
        z.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return name


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# -- PEP 517 hooks ----------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(n, _read(p)) for n, p in _files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(f"{_PKG}_editable.pth", (_HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{_PKG}-{_version()}"
    name = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    members = [("pyproject.toml", os.path.join(_HERE, "pyproject.toml")),
               ("flashmlir_build.py", os.path.join(_HERE, "flashmlir_build.py"))]
    if os.path.exists(os.path.join(_HERE, "README.md")):
        members.append(("README.md", os.path.join(_HERE, "README.md")))
    members += _files()
    pkg_info = _metadata().encode()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for arc, path in members:
            tar.add(path, arcname=f"{base}/{arc}", recursive=False)
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name
