"""Kernels with score_mod / mask_mod: their manifests (fa-compile's
"modifiers" section and capture<n> parameters, against the real fa-compile
when it is built), requests and selection (a kernel serves its modifiers'
key only), compile_args, and flashmlir.attention on the fake GPU of
fake_gpu.py, whose kernels compute the traced regions their PTX carries
on the captured tensors each launch binds (compared with the PyTorch
reference of the Python functions), eager and under torch.compile (the
custom ops with modifiers). The manifest and request tests need no
torch."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import warnings

import pytest

from flashmlir import _kernels
from flashmlir import _manifest as M
from flashmlir._errors import KernelNotFoundError, ManifestError

from helpers import backward_example, forward_manifest, write_kernel

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INPUT = os.path.join(_REPO, "test", "Tools", "Inputs", "alibi-prefix-lm.mlir")
KEY = "a" * 64


def mods(key=KEY, captures=(("f32", (8,)),)):
    """A request's Modifiers (the module of fa-compile's lit test input)."""
    with open(_INPUT) as f:
        return _kernels.Modifiers(key, f.read(), tuple(captures))


def mod_manifest(key=KEY, captures=(("f32", [8]),), name="fa_fwd_mod"):
    """A forward manifest as fa-compile --modifiers writes it: the section,
    and a capture<n> memref per capture before out."""
    m = forward_manifest(name, chip="sm_90a", d=128)
    caps = [{"name": f"capture{n}", "dtype": dt, "shape": list(shape)}
            for n, (dt, shape) in enumerate(captures)]
    m["modifiers"] = {"key": key, "captures": caps}
    at = next(i for i, p in enumerate(m["params"]) if p["name"] == "out")
    m["params"][at:at] = [{"name": c["name"], "type": "memref", "rank": len(c["shape"]),
                           "dtype": c["dtype"],
                           "dims": [f"{c['name']}_{d}" for d in range(len(c["shape"]))]}
                          for c in caps]
    return m


def parse(m):
    return M.parse_manifest(m, check_files=False)


def param(m, name):
    return next(p for p in m["params"] if p["name"] == name)


def request(modifiers=None, kind="forward", **kw):
    return _kernels.KernelRequest.make(kind, "bf16", 128, modifiers=modifiers, **kw)


def mod_backward(deterministic=False, key=KEY, captures=(("f32", [8]),)):
    """A backward manifest as fa-compile --kind=backward --modifiers writes
    it: the section, a capture<n> memref per capture last in the launches
    that read k."""
    m = backward_example(deterministic, d=128, causal=False)
    caps = [{"name": f"capture{n}", "dtype": dt, "shape": list(shape)}
            for n, (dt, shape) in enumerate(captures)]
    m["modifiers"] = {"key": key, "captures": caps}
    for launch in m["kernels"]:
        if any(p["name"] == "k" for p in launch["params"]):
            launch["params"] += [{"name": c["name"], "type": "memref", "rank": len(c["shape"]),
                                  "dtype": c["dtype"],
                                  "dims": [f"{c['name']}_{d}" for d in range(len(c["shape"]))]}
                                 for c in caps]
    return m


# -- manifests ---------------------------------------------------------------------------

def _fa_compile():
    path = os.path.join(os.environ.get("FA_BUILD_DIR", os.path.join(_REPO, "build")), "bin",
                        "fa-compile")
    if not os.path.exists(path):
        pytest.skip("fa-compile not built")
    return path


def test_real_fa_compile_manifests(tmp_path):
    """fa-compile's manifests: through the registry (compile_args: the
    module, the key, a name with the key's hash) and without a key (which
    serves no request)."""
    compiler = _fa_compile()
    r = request(mods())
    reg = _kernels.KernelRegistry([], cache=str(tmp_path / "cache"), compiler=compiler)
    spec = reg.find(r, (9, 0))
    assert spec.name == r.kernel_name("sm_90a") and spec.chip == "sm_90a"
    assert spec.modifiers_key == KEY and r.matches(spec) and not request().matches(spec)
    assert spec.captures == (M.CaptureSpec("capture0", "f32", (8,)),)
    # (The first candidate, the dynamic scheduler's kernel, lists its launch
    # in `kernels`.)
    assert spec.capture_dims() == {"capture0_0": 8}
    assert [k.param("capture0").rank for k in spec.kernels] == [1]
    # (and ptxas's cubin, when fa-compile found ptxas)
    assert {spec.name + ".json", spec.name + ".ptx"} <= set(os.listdir(tmp_path / "cache"))
    assert set(os.listdir(tmp_path / "cache")) <= {spec.name + e for e in (".json", ".ptx", ".cubin")}
    subprocess.run([compiler, f"--modifiers={_INPUT}", "--head-dim=64", "--dtype=f16",
                    "--chip=sm_80", "-o", str(tmp_path)], check=True, capture_output=True)
    nokey = M.load_manifest(str(tmp_path / "fa_fwd_d64_f16_sm80_mod.json"))
    assert nokey.modifiers is not None and nokey.modifiers_key is None
    assert not any(r.matches(nokey) for r in (
        _kernels.KernelRequest.make("forward", "f16", 64, modifiers=mods()),
        _kernels.KernelRequest.make("forward", "f16", 64)))


def test_real_fa_compile_backward_manifests(tmp_path):
    """fa-compile --kind=backward --modifiers through the registry: the
    section and capture<n> in the kernels that recompute P (the dK/dV
    kernel, the deterministic dQ kernel), fa-compile's name plus the key's
    hash; each serves its request only."""
    compiler = _fa_compile()
    reg = _kernels.KernelRegistry([], cache=str(tmp_path / "cache"), compiler=compiler)
    plain = request(mods(), kind="backward")
    det = _kernels.KernelRequest.make("backward", "f16", 64, causal=True, deterministic=True,
                                      modifiers=mods())
    for r, entries in ((plain, {"fa_bwd_kernel"}), (det, {"fa_bwd_kernel", "fa_bwd_dq_kernel"})):
        spec = reg.find(r, (9, 0))
        assert spec.name == r.kernel_name("sm_90a") and spec.kind == "backward"
        assert spec.deterministic == r.deterministic and spec.modifiers_key == KEY
        assert spec.captures == (M.CaptureSpec("capture0", "f32", (8,)),)
        assert {k.entry for k in spec.kernels
                if any(p.name == "capture0" for p in k.params)} == entries
        others = (request(mods()), request(kind="backward"),
                  dataclasses.replace(r, deterministic=not r.deterministic),
                  dataclasses.replace(r, modifiers=mods("b" * 64)))
        assert r.matches(spec) and not any(o.matches(spec) for o in others)
    assert spec.name == "fa_bwd_d64_f16_causal_det_sm90a_mod_" + KEY[:16]
    assert len([f for f in os.listdir(tmp_path / "cache") if not f.endswith(".cubin")]) == 4


def test_section_parses():
    s = parse(mod_manifest(captures=(("i1", [3, 5]), ("bf16", [7]))))
    assert s.modifiers_key == KEY and [c.dtype for c in s.captures] == ["i1", "bf16"]
    assert s.capture_dims() == {"capture0_0": 3, "capture0_1": 5, "capture1_0": 7}
    assert "modifiers=aaaaaaaaaaaaaaaa" in s.describe()
    plain = parse(forward_manifest("plain", chip="sm_90a", d=128))
    assert plain.modifiers is None and plain.modifiers_key is None and plain.captures == ()
    m = mod_manifest(captures=())
    assert parse(m).captures == () and parse(dict(m, modifiers=None)).modifiers is None
    m = mod_manifest()
    param(m, "capture0")["dims"] = ["8"]      # a size for the name
    assert parse(m).captures[0].shape == (8,)


def _edit(fn):
    m = mod_manifest(captures=(("f32", [8]), ("i32", [2, 3])))
    fn(m)
    return m


@pytest.mark.parametrize("edit,match", [
    (lambda m: m["modifiers"]["captures"][0].update(dtype="f64"), "unknown dtype 'f64'"),
    (lambda m: param(m, "capture1").update(dims=["2", "4"]),
     r"dims \[2, 4\] but must be \[capture1_0, capture1_1\] = \[2, 3\]"),
    (lambda m: param(m, "capture0").update(dims=["16"]), r"must be \[capture0_0\] = \[8\]"),
    (lambda m: param(m, "capture1").update(dims=["capture1_1", "capture1_0"]),
     "must be"),
    (lambda m: param(m, "capture1").update(dims=None), r"dims \[none\]"),
    (lambda m: param(m, "capture0").update(dtype="f16"), "is rank 1 f16 but the capture"),
    (lambda m: m["params"].remove(param(m, "capture1")), "no kernel parameter takes capture1"),
    (lambda m: m["modifiers"]["captures"].pop(), "unknown name.* capture1_0"),
    (lambda m: (m["modifiers"]["captures"].pop(), param(m, "capture1").update(dims=["2", "3"])),
     "lists no such capture"),
    (lambda m: (m.pop("modifiers"), param(m, "capture0").update(dims=["8"]),
                param(m, "capture1").update(dims=["2", "3"])), "has no 'modifiers' section"),
    (lambda m: m["modifiers"]["captures"][0].update(name="cap0"), "name must be 'capture0'"),
    (lambda m: m["modifiers"]["captures"].reverse(), "name must be 'capture0'"),
    (lambda m: m["modifiers"]["captures"][0].update(shape=[True]), "shape must be a list"),
    (lambda m: m["modifiers"]["captures"][0].update(shape=[]), "shape must be a list"),
    (lambda m: m["modifiers"]["captures"][0].update(shape=[-1]), "shape must be a list"),
    (lambda m: m["modifiers"].update(key=""), "key must be a non-empty string"),
    (lambda m: m["modifiers"].update(key=7), "key must be a non-empty string"),
    (lambda m: m["modifiers"].update(grad=True), "unknown field"),
    (lambda m: m.update(modifiers=[]), "modifiers must be an object"),
    (lambda m: m["modifiers"].update(captures=None), "captures must be a list"),
    (lambda m: param(m, "q").update(dims=["B", "Hq", "capture0_0", "D"]),
     "its dims name a capture's"),
    (lambda m: param(m, "capture0").update(type="i64", value="1"), "must be a memref"),
])
def test_bad_sections(edit, match):
    with pytest.raises(ManifestError, match=match):
        parse(_edit(edit))


@pytest.mark.parametrize("deterministic", [False, True])
def test_backward_sections_parse(deterministic):
    s = parse(mod_backward(deterministic, captures=(("i32", [2, 3]), ("f32", [8]))))
    assert s.kind == "backward" and s.modifiers_key == KEY
    assert s.capture_dims() == {"capture0_0": 2, "capture0_1": 3, "capture1_0": 8}
    assert request(mods(), kind="backward", deterministic=deterministic).matches(
        parse(mod_backward(deterministic)))
    b = backward_example(deterministic)
    b["modifiers"] = {"key": KEY, "captures": []}     # (modifiers that read no tensor)
    assert parse(b).captures == ()


def _edit_backward(fn):
    m = mod_backward(True, captures=(("f32", [8]), ("i32", [2, 3])))
    fn(m)
    return m


def _kernel(m, entry):
    return next(k for k in m["kernels"] if k["entry"] == entry)


def _kparam(m, entry, name):
    return next(p for p in _kernel(m, entry)["params"] if p["name"] == name)


@pytest.mark.parametrize("edit,match", [
    (lambda m: _kparam(m, "fa_bwd_dq_kernel", "capture1").update(dims=["2", "4"]),
     r"kernels \(fa_bwd_dq_kernel\): parameter capture1 has dims \[2, 4\]"),
    (lambda m: _kparam(m, "fa_bwd_kernel", "capture0").update(dtype="f16"),
     r"kernels \(fa_bwd_kernel\): parameter capture0 is rank 1 f16"),
    (lambda m: [k["params"].remove(_kparam(m, k["entry"], "capture1"))
                for k in m["kernels"] if k["entry"] != "fa_bwd_preprocess_kernel"],
     "no kernel parameter takes capture1"),
    (lambda m: (m.pop("modifiers"),), "unknown name"),
    (lambda m: _kparam(m, "fa_bwd_kernel", "dk").update(dims=["B", "Hkv", "capture0_0", "D"]),
     r"parameter dk has dims \[B, Hkv, capture0_0, D\] but must be"),
])
def test_bad_backward_sections(edit, match):
    with pytest.raises(ManifestError, match=match):
        parse(_edit_backward(edit))


def test_only_dense_kernels_have_modifiers():
    """A split-KV or packed manifest with modifiers is refused, as are such
    requests; dense forward and backward requests take them."""
    with pytest.raises(ManifestError, match="only dense kernels .* this manifest is a dense "
                                            "forward with kv_splits"):
        parse(dict(mod_manifest(), kv_splits="auto"))
    with pytest.raises(ManifestError, match="only dense kernels .* this manifest is a varlen "
                                            "backward"):
        parse(dict(mod_backward(), form="varlen"))
    for kw in (dict(split_kv=True), dict(form="paged", page_size=64),
               dict(kind="backward", form="varlen")):
        with pytest.raises(ValueError, match="dense forward and backward kernels only"):
            _kernels.KernelRequest.make(kw.pop("kind", "forward"), "bf16", 128,
                                        modifiers=mods(), **kw)
    for kind in ("forward", "backward"):
        assert request(mods(), kind=kind).modifiers.key == KEY


# -- requests and selection --------------------------------------------------------------

def test_a_kernel_serves_its_key_only():
    spec = parse(mod_manifest())
    plain = parse(forward_manifest("plain", chip="sm_90a", d=128))
    assert request(mods()).matches(spec) and not request(mods()).matches(plain)
    assert not request().matches(spec) and request().matches(plain)
    assert not request(mods("b" * 64)).matches(spec)
    assert not request(mods()).matches(parse(mod_manifest(key=None)))
    # (the key names the captures' types; requests compare by it)
    assert request(mods(captures=())) == request(mods()) != request(mods("b" * 64))
    assert "modifiers=aaaaaaaaaaaaaaaa" in request(mods()).describe()


def test_compile_args(tmp_path):
    r = request(mods(), causal=True, softcap=5.0)
    args = r.compile_args("sm_90a", str(tmp_path))
    source = next(a for a in args if a.startswith("--modifiers="))[len("--modifiers="):]
    with open(source) as f:
        assert f.read() == r.modifiers.module
    assert os.path.dirname(source) == str(tmp_path / "modifiers")   # not moved to the cache
    assert f"--modifiers-key={KEY}" in args and "--causal" in args and "--softcap" in args
    name = r.kernel_name("sm_90a")
    assert f"--name={name}" in args
    assert name == "fa_fwd_d128_bf16_causal_softcap_sm90a_mod_" + KEY[:16]
    others = {request(mods("b" * 64), causal=True, softcap=5.0).kernel_name("sm_90a"),
              r.kernel_name("sm_80"), request(mods(), window=(3, 4)).kernel_name("sm_90a")}
    assert name not in others and len(others) == 3
    assert not any(a.startswith("--modifiers") for a in request().compile_args("sm_90a", "o"))


def test_registry_finds_precompiled_kernels(tmp_path, monkeypatch):
    """A folder of kernels with modifiers on FLASHMLIR_KERNEL_DIR serves
    their keys, with no compiler."""
    m = mod_manifest(name="precompiled")
    write_kernel(str(tmp_path / "k"), m)
    monkeypatch.setenv("FLASHMLIR_KERNEL_DIR", str(tmp_path / "k"))
    reg = _kernels.KernelRegistry(cache=str(tmp_path / "cache"), compiler=None)
    assert reg.find(request(mods()), (9, 0)).name == "precompiled"
    with pytest.raises(KernelNotFoundError, match="none has key " + "b" * 64):
        reg.find(request(mods("b" * 64)), (9, 0))
    # (A plain request: the plain kernels of the default folders, if any.)
    assert all(s.modifiers is None for s in reg.candidates(request(), (9, 0)))


# -- the fake GPU ------------------------------------------------------------------------

if torch is not None:
    import flashmlir
    from flashmlir import _interface, _key_ranges, _modifiers, _reference

    import fake_gpu
    import modifier_cases as mc


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    if torch is None:
        pytest.skip("needs torch")
    fake = fake_gpu.install(monkeypatch, tmp_path)
    yield fake
    fake_gpu.uninstall(fake)


def close(got, want, dtype):
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)


def run(p, case, q, k, v, layout="bhsd", **kw):
    return flashmlir.attention(q, k, v, layout=layout, return_lse=True,
                               **p.call_kwargs(case, q.device), **kw)


def check(p, case, out, lse, q, k, v, layout="bhsd"):
    want, wlse = mc.reference(p, case, q, k, v, layout)
    close(out, want, p.torch_dtype)
    torch.testing.assert_close(lse, wlse, atol=1e-4, rtol=1e-4)


@needs_torch
def test_gpu_test_problems(gpu):
    """Every problem of the GPU test on the fake GPU, alternating layouts:
    the kernel of its modifiers against the reference, the captures bound
    in place, and the built-in equivalents (what the GPU test compares)."""
    for i, p in enumerate(mc.GPU_TEST_PROBLEMS):
        layout = ("bhsd", "bshd")[i % 2]
        case = p.build()
        q, k, v = p.inputs(layout=layout)
        out, lse = run(p, case, q, k, v, layout)
        check(p, case, out, lse, q, k, v, layout)
        spec = gpu.registry.spec_named(gpu.ran[-1][0])
        assert spec.modifiers_key == case_key(case, p.key_range_rows), p.id
        bound = [gpu.decoded[-1][c.name] for c in spec.captures]
        assert [t.data_ptr() for t in bound] == [t.data_ptr() for t in case.captures.values()]
        if case.builtin is not None:
            same, same_lse = flashmlir.attention(q, k, v, layout=layout, return_lse=True,
                                                 **case.builtin)
            assert gpu.registry.spec_named(gpu.ran[-1][0]).modifiers is None
            close(out, same, p.torch_dtype)
            torch.testing.assert_close(lse, same_lse, atol=1e-4, rtol=1e-4)
    # (what the build script compiles for the GPU machine covers them)
    assert set(gpu.registry.generated) <= set(mc.requests(mc.GPU_TEST_PROBLEMS))


def case_key(case, rows=None):
    return _modifiers.trace(case.score_mod, case.mask_mod).with_key_ranges(rows).digest()


def set_cell(fn, name, value):
    fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents = value


@needs_torch
def test_steady_state_and_retracing(gpu):
    p = mc.Problem("rel_bias", 2, 4, 2, 30, 50, 64)
    case = p.build()
    q, k, v = p.inputs()
    run(p, case, q, k, v)
    gpu.count()
    out, lse = run(p, case, q, k, v)
    assert gpu.count().get("cuLaunchKernel") == 1 and len(gpu.registry.generated) == 1
    check(p, case, out, lse, q, k, v)
    case.captures["table"].mul_(-1)      # read at each launch
    out, lse = run(p, case, q, k, v)
    check(p, case, out, lse, q, k, v)
    # Another tensor of the same shape in the closure: the same kernel and
    # plan, that tensor bound.
    table = torch.randn(p.Nq + p.Nk - 1)
    set_cell(case.score_mod, "table", table)
    gpu.count()
    out, lse = run(p, case, q, k, v)
    assert gpu.count().get("cuLaunchKernel") == 1 and len(gpu.registry.generated) == 1
    assert gpu.decoded[-1]["capture0"].data_ptr() == table.data_ptr()
    check(p, case, out, lse, q, k, v)
    # Another constant: another kernel.
    set_cell(case.score_mod, "offset", p.Nk - 2)
    out, lse = run(p, case, q, k, v)
    assert len(gpu.registry.generated) == 2
    check(p, case, out, lse, q, k, v)


@needs_torch
def test_traced_is_cached_per_functions_and_captures():
    x = torch.ones(4)

    def f(s, b, h, i, j):
        return s + x[h]
    a = _modifiers.traced(f)
    assert _modifiers.traced(f) is a and a.digest() == _modifiers.trace(f).digest()
    x = torch.zeros(4)
    b = _modifiers.traced(f)
    assert b is not a and b.captures[0] is x and b.digest() == a.digest()
    x = torch.zeros(5)
    assert _modifiers.traced(f).digest() != a.digest()
    slot = (id(f), id(None))
    del f
    assert slot not in _modifiers._cache    # (dropped with the function)


@needs_torch
@pytest.mark.parametrize("make", [
    lambda t: t[::2],                             # strided
    lambda t: t[1:9],                             # not 16-byte aligned
    lambda t: t[3:4].expand(8),                   # stride 0, misaligned
])
def test_any_capture_strides_and_offsets(gpu, make):
    base = torch.randn(17)
    slopes = make(base)
    p = mc.Problem("alibi", 1, 8, 4, 20, 33, 64)
    case = mc.Case(lambda s, b, h, i, j: s + slopes[h] * (j - i), None, {"slopes": slopes},
                   None)
    q, k, v = p.inputs()
    for _ in range(2):
        out, lse = run(p, case, q, k, v)
        check(p, case, out, lse, q, k, v)
        got = gpu.decoded[-1]["capture0"]
        assert got.stride() == slopes.stride()
        if slopes.data_ptr() % 16 == 0:     # (else a copy, freed since: stream-ordered)
            assert got.data_ptr() == slopes.data_ptr()
        else:
            assert got.data_ptr() % 16 == 0


@needs_torch
def test_bool_and_2d_captures(gpu):
    p = mc.Problem("document", 2, 4, 2, 40, 40, 64, "f16")
    allowed = torch.rand(40) > 0.3
    bias = torch.randn(40, 4).t()                         # [4, 40], transposed strides
    case = mc.Case(lambda s, b, h, i, j: s + bias[h, j], lambda b, h, i, j: allowed[j] | (i == j),
                   {}, None)
    q, k, v = p.inputs()
    out, lse = run(p, case, q, k, v)
    check(p, case, out, lse, q, k, v)
    assert gpu.decoded[-1]["capture1"].dtype == torch.bool
    assert gpu.decoded[-1]["capture0"].stride() == (1, 4)


@needs_torch
def test_out_lse_and_options(gpu):
    p = mc.Problem("prefix_lm", 2, 6, 2, 33, 65, 64, "bf16",
                   (("causal", True), ("window", (40, 0)), ("softcap", 3.0), ("scale", 0.3)))
    case = p.build()
    q, k, v = p.inputs(layout="bshd")
    out = torch.empty(2, 33, 6, 64, dtype=torch.bfloat16)
    lse = torch.empty(2, 6, 33)
    o, l = run(p, case, q, k, v, "bshd", out=out, lse=lse)
    assert o is out and l is lse
    check(p, case, out, lse, q, k, v, "bshd")
    a = gpu.decoded[-1]
    assert a["window_left"] == 40 and "capture0" not in a   # (no captures)


@needs_torch
def test_capture_errors(gpu):
    p = mc.Problem("alibi", 1, 4, 2, 20, 20, 64)
    q, k, v = p.inputs()
    slopes = torch.ones(4, device="meta")
    with pytest.raises(ValueError, match="read a tensor on meta .*capture 0.* q, k and v are "
                                         "on cpu"):
        flashmlir.attention(q, k, v, score_mod=lambda s, b, h, i, j: s + slopes[h])
    # A kernel whose manifest disagrees with its key's captures.
    slopes = torch.ones(4)
    case = mc.Case(lambda s, b, h, i, j: s + slopes[h], None, {}, None)
    r = p.request(case)
    spec = gpu.registry.generate(r)
    with open(spec.json_path) as f:
        m = json.load(f)
    m["modifiers"]["captures"][0]["shape"] = [5]
    with open(spec.json_path, "w") as f:
        json.dump(m, f)
    gpu.registry.refresh()
    with pytest.raises(ValueError, match=re.escape("capture 0 is a torch.float32 tensor of "
                                                   "shape (4,) but kernel") + ".* takes f32 "
                                                   r"of shape \[5\]"):
        run(p, case, q, k, v)


# -- the backward on the fake GPU -------------------------------------------------------

def kernel_path(out):
    """Whether `out` came from the kernels' autograd node (not the reference's ops)."""
    return type(out.grad_fn).__name__ == "_FlashAttentionBackward"


def backward_launches(gpu, since=0):
    """(spec, entry, decoded args) of the backward launches after launch `since`."""
    out = []
    for (name, entry), args in zip(gpu.ran[since:], gpu.decoded[since:]):
        spec = gpu.registry.spec_named(name)
        if spec.kind == "backward":
            out.append((spec, entry, args))
    return out


def check_grads(p, case, q, k, v, dout, grads, layout="bhsd"):
    want = mc.reference_gradients(p, case, q, k, v, dout, layout)
    for name, got, w in zip("qkv", grads, want):
        assert got.shape == w.shape and got.dtype == w.dtype, name
        close(got, w, p.torch_dtype)


def run_backward(gpu, p, case, layout="bhsd", deterministic=False, seed=0):
    """The modified call with q, k, v requiring grad, then its backward on
    the fake GPU: checks the kernel path ran (forward and backward kernels
    of the case's key, the captures bound in the backward launches) and
    the gradients against autograd of the reference."""
    q, k, v = p.inputs(layout=layout, seed=seed, requires_grad=True)
    since = len(gpu.ran)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # (no fallback warning)
        out, lse = run(p, case, q, k, v, layout, deterministic=deterministic)
    assert kernel_path(out), p.id
    check(p, case, out.detach(), lse, q.detach(), k.detach(), v.detach(), layout)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 9)).to(out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check_grads(p, case, q, k, v, dout, grads, layout)
    launches = backward_launches(gpu, since)
    # (With key ranges the backward kernels are those of the ranged key:
    # they take the query ranges, deterministic ones the key ranges too.)
    key = case_key(case, p.key_range_rows)
    assert launches and {s.modifiers_key for s, _, _ in launches} == {key}, p.id
    if p.key_range_rows is not None:
        by_entry = {entry: args for _, entry, args in launches}
        qr = by_entry["fa_bwd_kernel"][M.QUERY_RANGES]
        assert qr.shape == (p.B, p.Hkv, -(-p.Nk // p.key_range_rows), 2), p.id
        if deterministic:
            assert M.KEY_RANGES in by_entry["fa_bwd_dq_kernel"], p.id
    assert {s.deterministic for s, _, _ in launches} == {deterministic}
    caps = list(case.captures.values())
    for spec, entry, args in launches:    # (the launches that take them)
        if entry in ("fa_bwd_kernel", "fa_bwd_dq_kernel"):
            assert [args[c.name].data_ptr() for c in spec.captures] == \
                [t.data_ptr() for t in caps], (p.id, entry)
    entries = [e for _, e, _ in launches]
    assert ("fa_bwd_dq_kernel" in entries) == deterministic, entries
    return q, k, v, dout, grads


@needs_torch
def test_gpu_backward_problems(gpu):
    """The backward of the problems the GPU test differentiates, on the
    fake GPU (alternating layouts; GQA, odd sizes, rows that see no key):
    the backward kernels of the modifiers' key, the captures bound, the
    gradients of autograd of the reference; deterministic=True takes the
    deterministic kernels. What the build script compiles covers them (the
    1000 x 1000 problems: their requests only)."""
    wanted = set(mc.kernel_requests(["gpu"]))
    for i, p in enumerate(mc.GPU_BACKWARD_PROBLEMS):
        layout = ("bshd", "bhsd")[i % 2]
        for det in (False, True) if p in mc.GPU_DETERMINISTIC_PROBLEMS else (False,):
            if p.Nq * p.Nk > 200_000:      # (the same code as smaller ones, slow here)
                assert p.request(kind="backward", deterministic=det) in wanted, p.id
            else:
                run_backward(gpu, p, p.build(), layout, det)
    assert set(gpu.registry.generated) <= wanted
    assert {r.kind for r in gpu.registry.generated} == {"forward", "backward"}


@needs_torch
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("args", [     # (modifier_cases.Problem's)
    ("alibi", 2, 6, 2, 33, 70, 64, "bf16", (("causal", True),)),
    ("rel_bias", 1, 4, 4, 40, 40, 128, "f16", (("softcap", 5.0), ("scale", 0.3))),
    ("document_causal", 2, 4, 1, 50, 50, 64, "f16", (("window", (20, 0)),)),
    ("softcap", 1, 8, 2, 45, 30, 64, "bf16"),
    ("prefix_lm", 1, 4, 2, 30, 64, 64, "bf16", (("window", (7, 9)),)),
], ids=lambda a: "-".join(str(x) for x in a[:1] + a[4:8]))
@pytest.mark.parametrize("deterministic", [False, True])
def test_backward_gradients(gpu, args, layout, deterministic):
    p = mc.Problem(*args)
    run_backward(gpu, p, p.build(), layout, deterministic)


@needs_torch
def test_backward_steady_state(gpu):
    """A second step reuses the plans (one launch per kernel, nothing
    compiled); another tensor of the captures' shape in the closure is
    bound in the backward too; an in-place change of a capture between
    forward and backward raises (it is saved for the backward)."""
    p = mc.Problem("rel_bias", 2, 4, 2, 30, 50, 64)
    case = p.build()
    run_backward(gpu, p, case)
    generated = len(gpu.registry.generated)
    gpu.count()
    run_backward(gpu, p, case, seed=3)
    assert gpu.count().get("cuLaunchKernel") == 1 + 3 and len(gpu.registry.generated) == generated
    table = torch.randn(p.Nq + p.Nk - 1)
    set_cell(case.score_mod, "table", table)
    case.captures["table"] = table
    gpu.count()
    run_backward(gpu, p, case, seed=4)
    assert gpu.count().get("cuLaunchKernel") == 1 + 3 and len(gpu.registry.generated) == generated
    q, k, v = p.inputs(requires_grad=True)
    out, _ = run(p, case, q, k, v)
    table.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.float().sum().backward()


@needs_torch
def test_backward_misaligned_and_strided_captures(gpu):
    """A capture at a misaligned offset is copied for the forward, and the
    copy (saved) bound in the backward; a strided one is bound as it is."""
    base = torch.randn(17)
    for slopes in (base[1:9], base[::2]):
        p = mc.Problem("alibi", 1, 8, 4, 20, 33, 64)
        case = mc.Case(lambda s, b, h, i, j: s + slopes[h] * (j - i), None, {"slopes": slopes},
                       None)
        q, k, v = p.inputs(requires_grad=True)
        since = len(gpu.ran)
        out, _ = run(p, case, q, k, v)
        assert kernel_path(out)
        dout = torch.randn(out.shape).to(out.dtype)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        check_grads(p, case, q, k, v, dout, grads)
        (spec, _, fwd), = [(gpu.registry.spec_named(n), e, a) for (n, e), a in
                           zip(gpu.ran[since:], gpu.decoded[since:]) if e == "fa_fwd_kernel"]
        bound = [a["capture0"] for s, e, a in backward_launches(gpu, since) if e == "fa_bwd_kernel"]
        assert bound[0].stride() == slopes.stride() and bound[0].data_ptr() % 16 == 0
        assert bound[0].data_ptr() == fwd["capture0"].data_ptr()   # (the forward's)
        if slopes.data_ptr() % 16 == 0:
            assert bound[0].data_ptr() == slopes.data_ptr()


@needs_torch
def test_some_inputs_require_grad(gpu):
    """Only v requiring grad: the kernel path, dq and dk not returned."""
    p = mc.Problem("document", 1, 4, 2, 24, 40, 64)
    case = p.build()
    q, k, v = p.inputs()
    v.requires_grad_(True)
    out, _ = run(p, case, q, k, v)
    assert kernel_path(out)
    dout = torch.randn(out.shape).to(out.dtype)
    (dv,) = torch.autograd.grad(out, (v,), dout)
    close(dv, mc.reference_gradients(p, case, q, k, v, dout)[2], p.torch_dtype)
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        run(p, case, q, k, v, out=torch.empty_like(q), lse=torch.empty(1, 4, 24))


@needs_torch
def test_backward_kernel_disagreeing_with_its_key(gpu):
    """A backward manifest whose captures disagree with the key's: the
    backward raises naming it (before any backward launch)."""
    p = mc.Problem("alibi", 1, 4, 2, 20, 20, 64)
    case = p.build()
    spec = gpu.registry.generate(p.request(case, "backward"))
    with open(spec.json_path) as f:
        m = json.load(f)
    m["modifiers"]["captures"][0]["dtype"] = "bf16"
    for k in m["kernels"]:
        for prm in k["params"]:
            if prm["name"] == "capture0":
                prm["dtype"] = "bf16"
    with open(spec.json_path, "w") as f:
        json.dump(m, f)
    gpu.registry.refresh()
    q, k, v = p.inputs(requires_grad=True)
    out, _ = run(p, case, q, k, v)
    since = len(gpu.ran)
    with pytest.raises(ValueError, match=re.escape("capture 0 is a torch.float32 tensor of "
                                                   "shape (4,) but kernel") + ".* takes bf16"):
        out.float().sum().backward()
    assert len(gpu.ran) == since


@needs_torch
@pytest.mark.parametrize("name", ["alibi", "rel_bias"])
def test_capture_requiring_grad(gpu, name):
    """A captured tensor requiring grad (learned slopes, a bias table): the
    forward and backward kernels for out, dq, dk, dv, the capture's
    gradient by row chunks (_capture_grads), all against the reference's
    autograd; with only the capture requiring grad no backward kernel
    runs."""
    p = mc.Problem(name, 2, 4, 2, 20, 30, 64, "f16")
    case = p.build()
    cap = next(iter(case.captures.values())).requires_grad_(True)
    q, k, v = p.inputs(requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, lse = run(p, case, q, k, v)
    assert kernel_path(out) and len(gpu.ran) == 1
    check(p, case, out, lse, q.detach(), k.detach(), v.detach())
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype)
    got = torch.autograd.grad(out, (q, k, v, cap), dout)
    assert len(gpu.ran) > 1                     # the backward kernels
    qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
    ref, _ = mc.reference(p, case, qr, kr, vr)
    want = torch.autograd.grad(ref, (qr, kr, vr, cap), dout)
    for g, w in zip(got[:3], want[:3]):
        close(g, w, p.torch_dtype)
    # (A sum over every score: relative to its norm; delta uses the f16 out.)
    assert (got[3] - want[3]).norm() <= 1e-2 * want[3].norm()
    # Only the capture: no dq / dk / dv kernels.
    qd, kd, vd = (t.detach() for t in (q, k, v))
    out, _ = run(p, case, qd, kd, vd)
    since = len(gpu.ran)
    (g,) = torch.autograd.grad(out, (cap,), dout)
    assert len(gpu.ran) == since
    torch.testing.assert_close(g, got[3])


@needs_torch
def test_capture_requiring_grad_with_out_is_an_error(gpu):
    p = mc.Problem("alibi", 1, 4, 2, 20, 30, 64)
    case = p.build()
    case.captures["slopes"].requires_grad_(True)
    q, k, v = p.inputs()
    out, lse = (torch.empty(t.shape, dtype=t.dtype) for t in run(p, case, q, k, v))
    with pytest.raises(ValueError, match="out= and lse= cannot be used when a tensor "
                                         "requires grad"):
        run(p, case, q, k, v, out=out, lse=lse)


@needs_torch
def test_plain_calls_never_get_modifier_kernels(gpu):
    """After a modified call's forward and backward, the same call without
    modifiers runs plain kernels (and a plain backward request matches no
    kernel with modifiers); the modified call again its own."""
    p = mc.Problem("causal", 2, 4, 2, 40, 40, 64)
    case = p.build()
    run_backward(gpu, p, case)
    q, k, v = p.inputs(requires_grad=True)
    since = len(gpu.ran)
    out = flashmlir.attention(q, k, v, causal=True)
    out.float().sum().backward()
    specs = [gpu.registry.spec_named(n) for n, _ in gpu.ran[since:]]
    assert {s.kind for s in specs} == {"forward", "backward"}
    assert all(s.modifiers is None for s in specs)
    plain = _kernels.KernelRequest.make("backward", "bf16", 64, causal=True)
    assert all(s.modifiers is None for s in gpu.registry.candidates(plain, (9, 0)))
    modified = p.request(case, "backward")
    assert all(s.modifiers_key == case_key(case)
               for s in gpu.registry.candidates(modified, (9, 0)))
    run_backward(gpu, p, case)


@needs_torch
def test_no_split_kv_with_modifiers(gpu):
    """A decode call with modifiers runs their kernel, not a split-KV one."""
    p = mc.Problem("causal", 1, 4, 2, 1, 300, 64)
    case = p.build()
    gpu.registry.generate(_kernels.KernelRequest.make("forward", "bf16", 64, split_kv=True))
    q, k, v = p.inputs()
    out, lse = run(p, case, q, k, v)
    check(p, case, out, lse, q, k, v)
    assert len(gpu.ran) == 1 and gpu.registry.spec_named(gpu.ran[0][0]).modifiers is not None


@needs_torch
def test_workspace_kernels_bind_captures(monkeypatch, tmp_path):
    """Captures of a kernel listing its launch with a workspace (the dynamic
    tile scheduler's counter)."""
    fake = fake_gpu.install(monkeypatch, tmp_path, dynamic=True)
    try:
        p = mc.Problem("alibi", 2, 4, 2, 40, 70, 64, "bf16", (("causal", True),))
        case = p.build()
        q, k, v = p.inputs()
        for _ in range(2):
            out, lse = run(p, case, q, k, v)
            check(p, case, out, lse, q, k, v)
        spec = fake.registry.spec_named(fake.ran[-1][0])
        assert spec.is_multi_launch and spec.modifiers is not None and fake.counters == [0, 0]
    finally:
        fake_gpu.uninstall(fake)


@needs_torch
@pytest.mark.parametrize("deterministic", [False, True])
def test_torch_compile_runs_the_kernels(gpu, deterministic):
    """torch.compile(fullgraph=True) takes the custom ops with modifiers
    (the traced key and the captures as their arguments), which run the
    kernels eager calls run, forward and backward (deterministic= picking
    the backward's)."""
    torch._dynamo.reset()
    p = mc.Problem("document_causal", 1, 4, 2, 24, 24, 64)
    case = p.build()
    q, k, v = p.inputs(requires_grad=True)
    f = torch.compile(lambda q, k, v: run(p, case, q, k, v, deterministic=deterministic),
                      backend="aot_eager", fullgraph=True)
    out, lse = f(q, k, v)
    assert [gpu.registry.spec_named(n).modifiers_key for n, _ in gpu.ran] == [case_key(case)]
    check(p, case, out.detach(), lse, q.detach(), k.detach(), v.detach())
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check_grads(p, case, q, k, v, dout, grads)
    launches = backward_launches(gpu)
    assert launches and {s.modifiers_key for s, _, _ in launches} == {case_key(case)}
    assert {s.deterministic for s, _, _ in launches} == {deterministic}
    bound = [t.data_ptr() for t in case.captures.values()]
    assert all([args[c.name].data_ptr() for c in spec.captures] == bound
               for spec, entry, args in launches if entry == "fa_bwd_kernel")


@needs_torch
def test_build_script_lists_the_problems_kernels():
    script = os.path.join(_REPO, "scripts", "build-modifier-kernels.py")
    r = subprocess.run([sys.executable, script, "unused", "--dry-run", "--sm80"],
                       capture_output=True, text=True, check=True)
    want = mc.kernel_requests()
    n, nb = len(want), sum(r.kind == "backward" for r in want)
    assert want[:len(mc.requests(mc.GPU_TEST_PROBLEMS))] == mc.requests(mc.GPU_TEST_PROBLEMS)
    assert set(mc.requests(mc.BENCH_PROBLEMS, "backward")) <= set(want)
    assert f": {n} kernels (" in r.stdout.splitlines()[0]
    assert f", {nb} backward)" in r.stdout.splitlines()[0] and nb > 0
    assert sum(line.startswith("  sm_") for line in r.stdout.splitlines()) == 2 * n
    r = subprocess.run([sys.executable, script, "unused", "--dry-run", "--only", "bench"],
                       capture_output=True, text=True, check=True)
    assert f": {len(mc.kernel_requests(['bench']))} kernels (" in r.stdout.splitlines()[0]


@needs_torch
def test_problem_lists_cover_the_matrix():
    ps = mc.GPU_TEST_PROBLEMS
    assert {p.case for p in ps} == set(mc.CASES)
    assert {p.D for p in ps} == {64, 128} and {p.dtype for p in ps} == {"bf16", "f16"}
    assert any(p.Hq != p.Hkv for p in ps) and any(p.Hq == p.Hkv for p in ps)
    assert {1, 17, 300, 1000} <= {p.Nq for p in ps} and any(p.Nq > p.Nk for p in ps)
    for name in mc.CASES:   # every case meets both dtypes and head dims
        assert {(p.dtype, p.D) for p in ps if p.case == name} >= {("bf16", 128), ("f16", 64)}
    assert all((p.D, p.dtype, p.B * p.Nq, p.Hq) == (128, "bf16", mc.BENCH_TOKENS, 16)
               for p in mc.BENCH_PROBLEMS)
    # The backward's: a subset, every case meeting both dtypes and head dims
    # (GQA and not), every size, rows that see no key, built-in options.
    bs = mc.GPU_BACKWARD_PROBLEMS
    assert set(bs) <= set(ps) and len(set(bs)) == len(bs) < len(ps)
    for name in mc.CASES:
        assert {(p.dtype, p.D, p.Hq != p.Hkv) for p in bs if p.case == name} >= {
            ("bf16", 128, True), ("f16", 64, False)}, name
    assert {(p.Nq, p.Nk) for p in bs} >= set(mc._SIZES) and any(p.Nq > p.Nk for p in bs)
    assert any(p.options for p in bs)
    ds = mc.GPU_DETERMINISTIC_PROBLEMS
    assert set(ds) <= set(bs) and {p.D for p in ds} == {64, 128} and any(
        p.case == "alibi" for p in ds)
    assert {p.Nq for p in mc.BENCH_PROBLEMS} == {4096, 16384}


# -- run-time key ranges -------------------------------------------------------------------

@needs_torch
def test_key_ranges_bound_and_honored(gpu):
    """A document mask with key ranges: the forward kernel of the modifiers
    with rows, the ranges bound as its key_ranges
    parameter at each call (another tensor of the same shape: the same
    plan, that tensor bound; misaligned: an aligned copy); ranges hiding
    keys change the result (the fake kernel visits the ranges only, as
    the real one visits their key blocks); the backward kernels take the
    query ranges of each key/value head (the union over its query heads)
    and honor them; KeyRanges without query_ranges get them derived from
    the key ranges."""
    p = mc.Problem("document_causal", 2, 4, 2, 70, 90, 64, "bf16", key_range_rows=16)
    case = p.build()
    q, k, v = p.inputs(requires_grad=True)
    kw = p.call_kwargs(case)
    kr = kw["key_ranges"]
    out, lse = flashmlir.attention(q, k, v, return_lse=True, **kw)
    check(p, case, out.detach(), lse, q.detach(), k.detach(), v.detach())
    spec = gpu.registry.spec_named(gpu.ran[-1][0])
    assert spec.modifiers.key_range_rows == 16   # (fake kernels' names: gen_<hash>)
    assert spec.modifiers_key == case_key(case, 16) != case_key(case)
    assert gpu.key_ranges[-1].data_ptr() == kr.ranges.data_ptr()
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check_grads(p, case, q, k, v, dout, grads)
    launches = backward_launches(gpu)
    assert launches and all(s.modifiers.query_range_rows == 16
                            and s.modifiers_key == case_key(case, 16) for s, _, _ in launches)
    want_qr = _key_ranges.union_over_groups(kr.query_ranges, p.Hkv)
    assert torch.equal(gpu.query_ranges[-1], want_qr)
    # Query ranges that hide the queries of the first key group: dK / dV of
    # its keys are zero (the kernels skip the queries), the rest as before.
    cut = flashmlir.KeyRanges(kr.ranges, 16, kr.query_ranges.clone())
    cut.query_ranges[:, :, 0] = 0
    grads2 = torch.autograd.grad(flashmlir.attention(q, k, v, **dict(kw, key_ranges=cut)),
                                 (q, k, v), dout)
    assert bool((grads2[1][:, :, :16] == 0).all()) and bool((grads2[2][:, :, :16] == 0).all())
    assert bool((grads[1][:, :, :16] != 0).any())
    torch.testing.assert_close(grads2[1][:, :, 16:], grads[1][:, :, 16:])
    # Without query_ranges: derived from the key ranges (a superset), the
    # same gradients.
    derived = flashmlir.KeyRanges(kr.ranges, 16)
    grads3 = torch.autograd.grad(flashmlir.attention(q, k, v, **dict(kw, key_ranges=derived)),
                                 (q, k, v), dout)
    for a, b in zip(grads3, grads):
        torch.testing.assert_close(a, b)
    # Steady state: one launch; other ranges of that shape bound, honored.
    qd, kd, vd = (t.detach() for t in (q, k, v))
    flashmlir.attention(qd, kd, vd, **kw)
    gpu.count()
    none = flashmlir.KeyRanges(torch.zeros_like(kr.ranges), 16)
    out2, lse2 = flashmlir.attention(qd, kd, vd, return_lse=True, **dict(kw, key_ranges=none))
    assert gpu.count().get("cuLaunchKernel") == 1
    assert gpu.key_ranges[-1].data_ptr() == none.ranges.data_ptr()
    assert bool((out2 == 0).all()) and bool(torch.isinf(lse2).all())
    # Every key claimed visible to every row: the mask_mod is not computed.
    everything = torch.zeros_like(kr.ranges)
    everything[..., 1] = everything[..., 3] = p.Nk
    out5 = flashmlir.attention(qd, kd, vd, **dict(kw, key_ranges=flashmlir.KeyRanges(
        everything, 16)))
    torch.testing.assert_close(out5.float(), flashmlir.attention(qd, kd, vd).float(),
                               atol=2e-2, rtol=2e-2)
    base = torch.zeros(kr.ranges.numel() + 1, dtype=torch.int32)
    odd = base[1:].view(kr.ranges.shape).copy_(kr.ranges)     # 4-byte offset
    out3 = flashmlir.attention(qd, kd, vd, **dict(kw, key_ranges=flashmlir.KeyRanges(odd, 16)))
    assert gpu.key_ranges[-1].data_ptr() != odd.data_ptr()
    assert torch.equal(out3, out.detach())
    # Other rows: another kernel.
    n = len(gpu.registry.generated)
    kr8 = flashmlir.key_ranges(case.mask_mod, p.B, p.Hq, p.Nq, p.Nk, rows=8)
    out4 = flashmlir.attention(qd, kd, vd, **dict(kw, key_ranges=kr8))
    assert len(gpu.registry.generated) == n + 1 and torch.equal(out4, out.detach())


@needs_torch
def test_torch_compile_with_key_ranges_runs_the_kernels(gpu):
    torch._dynamo.reset()
    p = mc.Problem("document", 1, 4, 2, 40, 40, 64, key_range_rows=32)
    case = p.build()
    q, k, v = p.inputs(requires_grad=True)
    kr = p.ranges(case)
    f = torch.compile(lambda q, k, v, kr: flashmlir.attention(
        q, k, v, mask_mod=case.mask_mod, key_ranges=kr, return_lse=True),
        backend="aot_eager", fullgraph=True)
    out, lse = f(q, k, v, kr)
    spec = gpu.registry.spec_named(gpu.ran[-1][0])
    assert spec.modifiers.key_range_rows == 32
    assert gpu.key_ranges[-1].data_ptr() == kr.ranges.data_ptr()
    check(p, case, out.detach(), lse, q.detach(), k.detach(), v.detach())
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out.dtype)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check_grads(p, case, q, k, v, dout, grads)
    assert {s.modifiers.key_range_rows for s, _, _ in backward_launches(gpu)} == {None}


@needs_torch
def test_real_fa_compile_key_ranges_manifest(tmp_path):
    """fa-compile through the registry for a request with key ranges: the
    section's rows, the key_ranges parameter of dims [B, Hq, ceildiv(Nq,
    rows), 4]; the manifest reader refuses a section or parameter that
    disagree."""
    compiler = _fa_compile()
    doc = torch.zeros(1, 256, dtype=torch.int32)
    traced = _modifiers.trace(mask_mod=lambda b, h, i, j: doc[b, i] == doc[b, j])
    r = _kernels.KernelRequest.make("forward", "bf16", 64,
                                    modifiers=_kernels.Modifiers.of(traced.with_key_ranges(48)))
    reg = _kernels.KernelRegistry([], cache=str(tmp_path / "cache"), compiler=compiler)
    spec = reg.find(r, (9, 0))
    assert spec.name == r.kernel_name("sm_90a") and "_kr48_" in spec.name
    assert spec.modifiers.key_range_rows == 48
    assert [d.text for d in spec.param(M.KEY_RANGES).dims] == ["B", "Hq", "ceildiv(Nq, 48)",
                                                              "4"]
    with open(spec.json_path) as f:
        good = json.load(f)
    bad = json.loads(json.dumps(good))
    bad["modifiers"]["key_ranges"]["rows"] = 64
    with pytest.raises(ManifestError, match=r"parameter key_ranges is rank 4 i32 of dims "
                                            r"\[B, Hq, ceildiv\(Nq, 48\), 4\] but must be i32 of "
                                            r"dims \[B, Hq, ceildiv\(Nq, 64\), 4\] \(or 2 "):
        parse(bad)
    bad = json.loads(json.dumps(good))
    del bad["modifiers"]["key_ranges"]
    with pytest.raises(ManifestError, match="takes key ranges but its modifiers section has "
                                            "no key_ranges"):
        parse(bad)
    bad = json.loads(json.dumps(good))
    bad["params"] = [p for p in bad["params"] if p["name"] != M.KEY_RANGES]
    with pytest.raises(ManifestError, match="no kernel parameter 'key_ranges' takes them"):
        parse(bad)
    bad = json.loads(json.dumps(good))
    bad["modifiers"]["key_ranges"] = {"name": "ranges", "rows": 48}
    with pytest.raises(ManifestError, match="key_ranges must be"):
        parse(bad)


@needs_torch
def test_real_fa_compile_backward_ranges_manifest(tmp_path):
    """fa-compile's backward kernels of modifiers with key ranges: the
    query_ranges parameter [B, Hkv, ceildiv(Nk, rows), 2] (the dK / dV
    launch), and deterministic also key_ranges (the dQ launch); the reader
    refuses sections that disagree with the parameters or the mode."""
    compiler = _fa_compile()
    doc = torch.zeros(1, 256, dtype=torch.int32)
    traced = _modifiers.trace(mask_mod=lambda b, h, i, j: doc[b, i] == doc[b, j])
    mods_ = _kernels.Modifiers.of(traced.with_key_ranges(32))
    reg = _kernels.KernelRegistry([], cache=str(tmp_path / "cache"), compiler=compiler)
    fast = reg.find(_kernels.KernelRequest.make("backward", "bf16", 64, modifiers=mods_),
                    (9, 0))
    assert "_kr32_" in fast.name and fast.modifiers.query_range_rows == 32
    assert fast.modifiers.key_range_rows is None
    [qr] = [p for e in fast.kernels for p in e.params if p.name == M.QUERY_RANGES]
    assert [d.text for d in qr.dims] == ["B", "Hkv", "ceildiv(Nk, 32)", "2"]
    det = reg.find(_kernels.KernelRequest.make("backward", "bf16", 64, deterministic=True,
                                               modifiers=mods_), (9, 0))
    assert det.modifiers.query_range_rows == det.modifiers.key_range_rows == 32
    by_entry = {e.entry: {p.name for p in e.params} for e in det.kernels}
    assert M.QUERY_RANGES in by_entry["fa_bwd_kernel"]
    assert M.KEY_RANGES in by_entry["fa_bwd_dq_kernel"]
    with open(fast.json_path) as f:
        good = json.load(f)
    bad = json.loads(json.dumps(good))
    bad["modifiers"]["key_ranges"] = {"name": "key_ranges", "rows": 32}
    with pytest.raises(ManifestError, match="takes key_ranges exactly when it is deterministic"):
        parse(bad)
    bad = json.loads(json.dumps(good))
    del bad["modifiers"]["query_ranges"]
    with pytest.raises(ManifestError, match="takes query ranges but its modifiers section has "
                                            "no query_ranges"):
        parse(bad)
    bad = json.loads(json.dumps(good))
    bad["modifiers"]["query_ranges"]["rows"] = 64
    with pytest.raises(ManifestError, match=r"parameter query_ranges is rank 4 i32 of dims "
                                            r"\[B, Hkv, ceildiv\(Nk, 32\), 2\] but must be"):
        parse(bad)
