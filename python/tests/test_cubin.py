"""fa-compile keeps the cubin ptxas made of the PTX while counting spills
(manifest "cubin"); the loader takes it on a device of exactly the
manifest's chip, the PTX (JIT) anywhere else or when the cubin is missing
or older than the PTX."""

import os

import pytest

from flashmlir import _kernels
from flashmlir import _manifest as M
from flashmlir._errors import ManifestError
from helpers import forward_manifest


def spec_with(tmp_path, chip="sm_90a", cubin="k.cubin"):
    m = forward_manifest("k", chip=chip, d=128)
    if cubin is not None:
        m["cubin"] = cubin
    (tmp_path / "k.ptx").write_text("// ptx\n")
    return M.parse_manifest(m, json_path=str(tmp_path / "k.json"), check_files=False)


def test_cubin_for_the_exact_chip(tmp_path):
    spec = spec_with(tmp_path)
    assert spec.cubin_path == str(tmp_path / "k.cubin")
    assert _kernels._cubin_for(spec, (9, 0)) is None          # (missing)
    (tmp_path / "k.cubin").write_bytes(b"\x7fELF")
    assert _kernels._cubin_for(spec, (9, 0)) == b"\x7fELF"
    assert _kernels._cubin_for(spec, (10, 0)) is None
    assert _kernels._cubin_for(spec, (8, 0)) is None
    st = os.stat(tmp_path / "k.ptx")
    os.utime(tmp_path / "k.cubin", ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    assert _kernels._cubin_for(spec, (9, 0)) is None          # older than the PTX


def test_no_cubin(tmp_path):
    spec = spec_with(tmp_path, cubin=None)
    assert spec.cubin_path is None and _kernels._cubin_for(spec, (9, 0)) is None


@pytest.mark.parametrize("bad", ["", "../k.cubin", 3])
def test_bad_cubin_field(tmp_path, bad):
    with pytest.raises(ManifestError, match="'cubin' must be a file name"):
        spec_with(tmp_path, cubin=bad)
