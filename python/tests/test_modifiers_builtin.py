"""A score_mod that states the softcap (c * tanh(s / c)) compiles into the
built-in softcap kernel (fa-recognize-builtin-modifiers, run by fa-compile
too): the manifest builds in c, the kernel serves the modified call without
a softcap option, and the launch binds scale / c as the built-in kernel's
launch does. Real fa-compile output (skipped when it is not built)."""

import os
import subprocess

import pytest

from flashmlir import _kernels
from flashmlir import _manifest as M

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "c" * 64
SOFTCAP_MODULE = """
func.func @attention(%q: tensor<1x2x64x64xf16>, %k: tensor<1x2x64x64xf16>,
                     %v: tensor<1x2x64x64xf16>)
    -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>) {
  %o, %l = fa.attention %q, %k, %v
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.000000e+01 : f32
        %d = arith.divf %s, %c : f32
        %t = math.tanh %d : f32
        %r = arith.mulf %c, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>)
        -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>)
  return %o, %l : tensor<1x2x64x64xf16>, tensor<1x2x64xf32>
}
"""


def _fa_compile():
    path = os.path.join(os.environ.get("FA_BUILD_DIR", os.path.join(_REPO, "build")), "bin",
                        "fa-compile")
    if not os.path.exists(path):
        pytest.skip("fa-compile not built")
    return path


@pytest.mark.parametrize("kind", ["forward", "backward"])
def test_softcap_score_mod_is_the_builtin_kernel(tmp_path, kind):
    compiler = _fa_compile()
    mods = tmp_path / "mods.mlir"
    mods.write_text(SOFTCAP_MODULE)
    common = [f"--kind={kind}", "--head-dim=64", "--dtype=bf16", "--chip=sm_90a",
              "-o", str(tmp_path)]
    subprocess.run([compiler, f"--modifiers={mods}", f"--modifiers-key={KEY}", "--name=mod",
                    *common], check=True, capture_output=True)
    subprocess.run([compiler, "--softcap", "--name=builtin", *common], check=True,
                   capture_output=True)
    spec = M.load_manifest(str(tmp_path / "mod.json"))
    builtin = M.load_manifest(str(tmp_path / "builtin.json"))
    assert spec.softcap == 30.0 and builtin.softcap == M.RUNTIME
    assert spec.modifiers.softcap == 30.0 and spec.captures == ()
    mods_req = _kernels.Modifiers(KEY, SOFTCAP_MODULE, ())
    plain = _kernels.KernelRequest.make(kind, "bf16", 64, modifiers=mods_req)
    assert plain.matches(spec)
    # A call with its own softcap has no softcap score_mod to recognize.
    assert not _kernels.KernelRequest.make(kind, "bf16", 64, softcap=30.0,
                                           modifiers=mods_req).matches(spec)
    # The kernels are the built-in softcap's but for the names and the
    # softcap, a constant (the forward binds scale / c as the built-in's
    # launch computes it; c * log2(e) is folded).
    def scalar_names(m):
        return {p.name for e in (m.kernels or (m,)) for p in e.params if p.is_scalar}
    names = scalar_names(spec)
    assert names and names < scalar_names(builtin)
    assert not names & {"softcap", "log2e_softcap"}
    if kind == "forward":
        assert "scale_over_softcap" in names


@pytest.mark.parametrize("cap, top, match", [
    (0, 0, "finite number > 0"), (True, 1.0, "finite number > 0"),
    ("30", 30.0, "finite number > 0"), (30.0, None, "must be the same number"),
    (30.0, "runtime", "must be the same number"), (30.0, 20.0, "must be the same number")])
def test_bad_modifiers_softcap(cap, top, match):
    from flashmlir._errors import ManifestError
    from helpers import forward_manifest
    m = forward_manifest("fa_fwd_mod", chip="sm_90a", d=128)
    m["modifiers"] = {"key": KEY, "captures": [], "softcap": cap}
    m["softcap"] = top
    with pytest.raises(ManifestError, match=match):
        M.parse_manifest(m, check_files=False)


def test_modifiers_softcap_parses():
    from helpers import forward_manifest
    m = forward_manifest("fa_fwd_mod", chip="sm_90a", d=128)
    m["modifiers"] = {"key": KEY, "captures": [], "softcap": 30}
    m["softcap"] = 30
    spec = M.parse_manifest(m, check_files=False)
    assert spec.modifiers.softcap == 30.0 and spec.serves_scalars(0.125, None)
    assert not spec.serves_scalars(0.125, 30.0)
