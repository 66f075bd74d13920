"""Torch-free argument checks of flashmlir.attention (CPU only)."""

import math
import subprocess
import sys

import pytest

from flashmlir import _validate as V


def test_options_defaults():
    o = V.check_options(False, None, None, None, 128)
    assert o.mask == (-1, -1) and not o.causal and o.softcap is None
    assert o.scale == pytest.approx(1 / math.sqrt(128)) and not o.scale_given
    o = V.check_options(True, None, 0.5, 30, 64)
    assert o.mask == (-1, 0) and o.causal and o.scale == 0.5 and o.softcap == 30.0
    assert V.check_options(True, (-1, -1), None, None, 64).mask == (-1, 0)
    assert V.check_options(True, [128, 0], None, None, 64).mask == (128, 0)
    assert V.check_options(False, (-1, 0), None, None, 64).causal


@pytest.mark.parametrize("args,exc,match", [
    (("yes", None, None, None), TypeError, "causal must be a bool"),
    ((False, (1,), None, None), TypeError, "window must be None or a pair"),
    ((False, "ab", None, None), TypeError, "window must be None or a pair"),
    ((False, (1.0, 2), None, None), TypeError, "window bounds must be integers"),
    ((False, (True, 2), None, None), TypeError, "window bounds must be integers"),
    ((False, (-2, 0), None, None), ValueError, "window bounds must be >= 0, or -1"),
    ((False, (0, -5), None, None), ValueError, "window bounds must be >= 0, or -1"),
    ((False, (2**31, 0), None, None), ValueError, "window bounds must be at most 2147483647"),
    ((False, (0, 2**63 - 1), None, None), ValueError, "window bounds must be at most 2147483647"),
    ((True, (16, 4), None, None), ValueError, "right bound must be 0"),
    ((False, None, 0.0, None), ValueError, "scale must be a finite number > 0"),
    ((False, None, -1.0, None), ValueError, "scale must be a finite number > 0"),
    ((False, None, math.nan, None), ValueError, "scale must be"),
    ((False, None, math.inf, None), ValueError, "scale must be"),
    ((False, None, "0.1", None), TypeError, "scale must be a real number"),
    ((False, None, True, None), TypeError, "scale must be a real number"),
    ((False, None, None, 0.0), ValueError, "softcap must be None or a finite number > 0"),
    ((False, None, None, -3), ValueError, "softcap must be"),
    ((False, None, None, math.inf), ValueError, "softcap must be"),
    ((False, None, None, "1"), TypeError, "softcap must be a real number"),
])
def test_option_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        V.check_options(*args, head_dim=64)


def test_layout():
    assert V.check_layout("bhsd") == "bhsd" and V.check_layout("BSHD") == "bshd"
    for bad in ("bsd", None, 3):
        with pytest.raises(ValueError, match="layout must be"):
            V.check_layout(bad)


def test_shapes():
    d = V.check_shapes((2, 8, 100, 64), (2, 2, 300, 64), (2, 2, 300, 128), "bhsd")
    assert d == V.Dims(2, 8, 2, 100, 300, 64, 128)
    assert d.env() == {"B": 2, "Hq": 8, "Hkv": 2, "Nq": 100, "Nk": 300, "D": 64, "Dv": 128, "G": 4}
    d = V.check_shapes((2, 100, 8, 64), (2, 300, 2, 64), (2, 300, 2, 64), "bshd")
    assert d == V.Dims(2, 8, 2, 100, 300, 64, 64)
    assert V.check_shapes((0, 8, 100, 64), (0, 8, 1, 64), (0, 8, 1, 64), "bhsd").empty_output
    assert V.check_shapes((1, 8, 0, 64), (1, 8, 5, 64), (1, 8, 5, 64), "bhsd").empty_output
    assert not V.check_shapes((1, 8, 3, 64), (1, 8, 0, 64), (1, 8, 0, 64), "bhsd").empty_output


@pytest.mark.parametrize("q,k,v,match", [
    ((2, 8, 100), (2, 8, 100, 64), (2, 8, 100, 64), "q must have 4 dimensions"),
    ((2, 8, 100, 64), (2, 8, 100, 64, 1), (2, 8, 100, 64), "k must have 4 dimensions"),
    ((2, 8, 100, 64), (3, 8, 100, 64), (2, 8, 100, 64), "batch sizes differ"),
    ((2, 8, 100, 64), (2, 8, 100, 64), (2, 4, 100, 64), "same number of heads"),
    ((2, 8, 100, 64), (2, 8, 100, 64), (2, 8, 99, 64), "same sequence length"),
    ((2, 8, 100, 64), (2, 8, 100, 128), (2, 8, 100, 64), "same head dim"),
    ((2, 8, 100, 64), (2, 3, 100, 64), (2, 3, 100, 64), r"query heads \(8\) must be a multiple"),
    ((2, 8, 100, 64), (2, 0, 100, 64), (2, 0, 100, 64), "0 heads"),
    ((2, 8, 100, 60), (2, 8, 100, 60), (2, 8, 100, 64), "unsupported head dim 60"),
    ((2, 8, 100, 512), (2, 8, 100, 512), (2, 8, 100, 64), "unsupported head dim 512"),
    ((2, 8, 100, 64), (2, 8, 100, 64), (2, 8, 100, 0), "unsupported head dim 0 of v"),
])
def test_shape_errors(q, k, v, match):
    with pytest.raises(ValueError, match=match):
        V.check_shapes(q, k, v, "bhsd")


def test_strided():
    V.check_strided("q", (2, 8, 100, 64), (51200, 6400, 64, 1), 0x1000, 2)
    V.check_strided("q", (2, 100, 8, 64), (51200, 512, 64, 1), 0x1000, 2)
    V.check_strided("q", (2, 8, 100, 64), (51200, 0, 64, 1), 0x1000, 2)  # expanded heads
    V.check_strided("q", (1, 8, 1, 64), (3, 64, 5, 1), 0x1000, 2)       # size-1 dims: any stride
    V.check_strided("q", (0, 8, 100, 64), (0, 0, 0, 7), 0x1001, 2)      # empty: nothing to check
    with pytest.raises(ValueError, match="last dimension must be contiguous"):
        V.check_strided("k", (2, 8, 100, 64), (51200, 6400, 1, 100), 0x1000, 2)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        V.check_strided("v", (2, 8, 100, 64), (51200, 6400, 64, 1), 0x1002, 2)
    with pytest.raises(ValueError, match="stride 100 of dimension 2 is not a multiple of 8"):
        V.check_strided("q", (2, 8, 100, 64), (51200, 6400, 100, 1), 0x1000, 2)
    with pytest.raises(ValueError, match="multiple of 4 elements"):
        V.check_strided("x", (2, 8, 100), (802, 101, 1), 0x1000, 4)
    # lse rows need no alignment: a contiguous [B, H, Nq] with odd Nq passes
    V.check_strided("lse", (2, 4, 1), (4, 1, 1), 0x1000, 4, rows_aligned=False)
    V.check_strided("lse", (2, 4, 17), (68, 17, 1), 0x1000, 4, rows_aligned=False)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        V.check_strided("lse", (2, 4, 17), (68, 17, 1), 0x1004, 4, rows_aligned=False)


def test_package_imports_without_torch():
    # The torch-free modules must not pull torch in (this machine has none;
    # on a machine with torch the check still holds).
    code = ("import sys; import flashmlir, flashmlir._kernels, flashmlir._launch, "
            "flashmlir._cuda, flashmlir._manifest, flashmlir._validate, flashmlir.__main__; "
            "print('torch' in sys.modules)")
    import os
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
