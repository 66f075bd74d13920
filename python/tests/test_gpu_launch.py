"""GPU tests of the Python launch path with the fixture kernels
(fixtures/fixture_kernels.ptx, built by nvcc from fixture_kernels.cu): they
take MLIR-style expanded memrefs, so they check the driver binding,
parameter packing, grid/block/shared-memory set-up, streams, layouts and the
zero-size paths independently of the fa-compile kernels."""

import json
import math
import os
import shutil
import struct

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _kernels, _launch, _variants  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402

import gpu_ref as R  # noqa: E402
from conftest import FIXTURES  # noqa: E402
from fixture_manifests import naive_manifest, write_naive_kernels  # noqa: E402

PTX = os.path.join(FIXTURES, "fixture_kernels.ptx")


@pytest.fixture(scope="module")
def fixture_registry(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixture_kernels")
    write_naive_kernels(str(d))
    reg = _kernels.KernelRegistry([str(d)], cache=str(d / "cache"), compiler=None)
    prev = _kernels.set_default_registry(reg)
    yield reg
    _kernels.set_default_registry(prev)


def test_probe_parameters(tmp_path):
    """The kernel receives exactly the packed descriptor values, grid, block
    and dynamic shared memory."""
    m = {
        "version": 1, "name": "probe", "kind": "forward", "chip": "sm_80",
        "entry": "probe_params", "ptx": "fixture_kernels.ptx", "dtype": "f16",
        "head_dim": 64, "causal": False, "scale": 0.125, "threads": 64,
        "dynamic_shared_memory": 1024, "grid": ["3", "2", "B"],
        "params": [
            {"name": "in", "type": "memref", "rank": 4, "dtype": "i64"},
            {"name": "out", "type": "memref", "rank": 1, "dtype": "i64"},
            {"name": "f", "type": "f32", "value": "fval"},
            {"name": "i", "type": "i32", "value": "ival"},
            {"name": "j", "type": "i64", "value": "jval"},
        ],
    }
    shutil.copy(PTX, tmp_path / "fixture_kernels.ptx")
    (tmp_path / "probe.json").write_text(json.dumps(m))
    spec = M.load_manifest(str(tmp_path / "probe.json"))
    kernel = _kernels.load_kernel(spec, torch.cuda.current_device())
    base = torch.zeros(8 + 2 * 3 * 4 * 8, dtype=torch.int64, device="cuda")
    inp = base[8:].view(2, 3, 4, 8).transpose(1, 2)  # strided view with a storage offset
    out = torch.full((24,), -1, dtype=torch.int64, device="cuda")
    args = {"in": inp, "out": out, "fval": 1.5, "ival": -7, "jval": 2 ** 40 + 3}
    _launch.launch(kernel, args, {"B": 1}, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    got = out.tolist()
    expect = [base.data_ptr(), inp.data_ptr(), 0, 2, 4, 3, 8, 96, 8, 32, 1,
              struct.unpack("<I", struct.pack("<f", 1.5))[0], -7, 2 ** 40 + 3,
              3, 2, 1, 64, 1, 1, 1024, 0, 24, 1]
    assert inp.data_ptr() == base.data_ptr() + 64
    assert got == expect


def _run_and_check(dtype, d, dv, nq, nk, opts, layout="bhsd", hq=4, hkv=2, b=2):
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, dv, tdt, layout,
                         seed=R.seed_for(dtype, d, dv, nq, nk, sorted(opts.items()), layout))
    out, lse = R.poisoned_outputs(b, hq, nq, dv, tdt, layout)
    res = flashmlir.attention(q, k, v, layout=layout, return_lse=True, out=out, lse=lse, **opts)
    assert res[0] is out and res[1] is lse
    torch.cuda.synchronize()
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    R.check(R.bhsd(out, layout), lse, R.bhsd(q, layout), R.bhsd(k, layout), R.bhsd(v, layout),
            mask, opts.get("scale"), opts.get("softcap"), what=f"{dtype} {d} {nq}x{nk} {opts}")
    return q, k, v, out, lse


@pytest.mark.parametrize("opts", _variants.TEST_OPTIONS, ids=lambda o: repr(o) or "full")
@pytest.mark.parametrize("nq,nk", [(1, 1), (17, 113), (113, 17), (200, 200)])
def test_naive_through_attention(fixture_registry, nq, nk, opts):
    _run_and_check("bf16", 64, 64, nq, nk, dict(opts))


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 1)])
def test_naive_layouts_and_heads(fixture_registry, layout, hq, hkv):
    _run_and_check("f16", 128, 128, 130, 70, {"causal": True}, layout, hq, hkv)


def test_naive_value_head_dim(fixture_registry):
    _run_and_check("bf16", 64, 128, 50, 90, {})


def test_default_allocation_matches(fixture_registry):
    q, k, v, out, lse = _run_and_check("bf16", 64, 64, 100, 150, {"causal": True}, "bshd")
    out2, lse2 = flashmlir.attention(q, k, v, causal=True, layout="bshd", return_lse=True)
    assert out2.shape == out.shape and out2.stride() == out.stride()
    assert torch.equal(out2, out) and torch.equal(lse2, lse)
    assert lse2.is_contiguous() and lse2.dtype == torch.float32


def test_packed_qkv_and_storage_offset(fixture_registry):
    b, n, h, d = 2, 77, 4, 64
    qkv = torch.randn(b, n, 3, h, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.unbind(2)  # strided bshd views, k and v with storage offsets
    out = flashmlir.attention(q, k, v, layout="bshd")
    ref = flashmlir.attention(q.contiguous(), k.contiguous(), v.contiguous(), layout="bshd")
    assert torch.equal(out, ref)


def test_side_stream_and_graph(fixture_registry):
    q, k, v = R.make_qkv(1, 4, 4, 256, 256, 64, 64, torch.bfloat16, "bhsd", seed=5)
    ref = flashmlir.attention(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = flashmlir.attention(q, k, v)
    s.synchronize()
    assert torch.equal(out, ref)
    # Capture into a CUDA graph: a launch on any stream but the capturing
    # one would break the capture.
    static_out = torch.empty_like(q)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        flashmlir.attention(q, k, v, out=static_out)
    static_out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, ref)


def test_empty_problems(fixture_registry):
    dev = "cuda"
    bf = torch.bfloat16
    q, k, v = (torch.randn(2, 4, 10, 64, device=dev, dtype=bf) for _ in range(3))
    # Nk = 0: every row sees no key
    k0 = torch.empty(2, 4, 0, 64, device=dev, dtype=bf)
    out, lse = flashmlir.attention(q, k0, k0, return_lse=True)
    assert out.shape == (2, 4, 10, 64) and (out == 0).all() and (lse == math.inf).all()
    # Nq = 0, B = 0, H = 0: empty outputs, no launch
    for shape_q, shape_k in [((2, 4, 0, 64), (2, 4, 10, 64)), ((0, 4, 10, 64), (0, 4, 10, 64)),
                             ((2, 0, 10, 64), (2, 0, 10, 64))]:
        qq = torch.empty(shape_q, device=dev, dtype=bf)
        kk = torch.empty(shape_k, device=dev, dtype=bf)
        out, lse = flashmlir.attention(qq, kk, kk, return_lse=True, causal=True)
        assert out.shape == shape_q and lse.shape == shape_q[:3]


def test_bad_launch_is_an_exception_not_a_crash(fixture_registry, tmp_path):
    # A manifest that asks for more threads than the kernel's .maxntid
    m = naive_manifest("too_many_threads", "bf16", 64, 64)
    m["threads"] = 256
    shutil.copy(PTX, tmp_path / "fixture_kernels.ptx")
    (tmp_path / "too_many_threads.json").write_text(json.dumps(m))
    spec = M.load_manifest(str(tmp_path / "too_many_threads.json"))
    with pytest.raises(flashmlir.ManifestError, match="maxntid"):
        _kernels.load_kernel(spec, torch.cuda.current_device())


@pytest.mark.parametrize("opts,param,expr", [
    ({"window": (97, 31)}, "wl", "window_left - 1"),
    ({"window": (97, 31)}, "wr", "window_right + 1"),
    ({"causal": True}, "wr", "1"),
    ({"causal": True, "window": (255, 0)}, "wl", "window_left + 1"),
    ({"softcap": 2.0}, "softcap", "softcap * 1.05"),
])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_harness_catches_wrong_kernels(tmp_path, opts, param, expr, dtype):
    """The accuracy check is sharp enough to reject a kernel whose mask is off
    by one key (or whose softcap is 5% off)."""
    window = opts.get("window", (-1, -1))
    m = naive_manifest("wrong", dtype, 64, 64, opts.get("causal", False), window,
                       opts.get("softcap"))
    for p in m["params"]:
        if p["name"] == param:
            p["value"] = expr
    shutil.copy(PTX, tmp_path / "fixture_kernels.ptx")
    (tmp_path / "wrong.json").write_text(json.dumps(m))
    reg = _kernels.KernelRegistry([str(tmp_path)], cache=str(tmp_path / "c"), compiler=None)
    prev = _kernels.set_default_registry(reg)
    try:
        caught = 0
        # Shapes on which each bug changes the result (with Nq > Nk, e.g. a
        # window's left bound can lie outside the keys and then not matter).
        shapes = [(113, 1000), (1000, 1000)]
        for nq, nk in shapes:
            try:
                _run_and_check(dtype, 64, 64, nq, nk, dict(opts))
            except AssertionError:
                caught += 1
        assert caught == len(shapes), f"only {caught} of {len(shapes)} shapes caught the wrong kernel"
    finally:
        _kernels.set_default_registry(prev)


# -- the backward through the naive fixture kernels (fixtures/fixture_backward.cu) ----

def _grads(q, k, v, dout, **kw):
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = flashmlir.attention(qq, kk, vv, **kw)
    res = torch.autograd.grad(out, (qq, kk, vv), dout)
    torch.cuda.synchronize()
    return res


def _bwd_check(dtype, d, nq, nk, opts, layout="bhsd", hq=4, hkv=2, deterministic=False, dv=None):
    dv = dv or d
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    seed = R.seed_for("bwd", dtype, d, dv, nq, nk, sorted(opts.items()), layout, deterministic)
    q, k, v = R.make_qkv(2, hq, hkv, nq, nk, d, dv, tdt, layout, seed=seed)
    shape = (2, hq, nq, dv) if layout == "bhsd" else (2, nq, hq, dv)
    dout = R.make_dout(shape, tdt, seed=seed + 1)
    dq, dk, dvv = _grads(q, k, v, dout, layout=layout, deterministic=deterministic, **opts)
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    b = lambda t: R.bhsd(t, layout)
    R.check_grads((b(dq), b(dk), b(dvv)), b(q), b(k), b(v), b(dout), mask, opts.get("scale"),
                  opts.get("softcap"), what=f"naive bwd {dtype} {d} {nq}x{nk} {opts} {layout}")
    return q, k, v, dout, (dq, dk, dvv)


@pytest.fixture
def poison(monkeypatch):
    monkeypatch.setenv("FLASHMLIR_POISON_GRADS", "1")


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("opts", _variants.TEST_OPTIONS, ids=lambda o: repr(o) or "full")
def test_naive_backward_through_attention(fixture_registry, poison, opts, deterministic):
    if deterministic and opts not in _variants.DETERMINISTIC_OPTIONS:
        pytest.skip("no deterministic variant")
    for nq, nk in [(17, 113), (300, 200)]:
        _bwd_check("bf16", 64, nq, nk, dict(opts), deterministic=deterministic)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 1)])
def test_naive_backward_layouts_and_heads(fixture_registry, poison, layout, hq, hkv):
    _bwd_check("f16", 128, 130, 70, {"causal": True}, layout, hq, hkv)


def test_naive_backward_value_head_dim(fixture_registry, poison):
    _bwd_check("bf16", 64, 50, 90, {}, dv=128)


def test_naive_backward_deterministic_repeats(fixture_registry):
    q, k, v, dout, first = _bwd_check("bf16", 64, 200, 300, {"causal": True},
                                      deterministic=True)
    for _ in range(5):
        again = _grads(q, k, v, dout, causal=True, deterministic=True)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_naive_backward_side_stream_and_graph(fixture_registry):
    q, k, v = R.make_qkv(1, 4, 2, 256, 256, 64, 64, torch.bfloat16, "bhsd", seed=6)
    dout = R.make_dout((1, 4, 256, 64), torch.bfloat16, seed=7)
    ref = _grads(q, k, v, dout, deterministic=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = _grads(q, k, v, dout, deterministic=True)
    s.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(got, ref))
    # forward + backward captured in one CUDA graph (warmed up on a side stream)
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            torch.autograd.grad(flashmlir.attention(qq, kk, vv, deterministic=True),
                                (qq, kk, vv), dout)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static = torch.autograd.grad(flashmlir.attention(qq, kk, vv, deterministic=True),
                                     (qq, kk, vv), dout)
    for t in static:
        t.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(static, ref))


def test_naive_backward_empty_problems(fixture_registry):
    bf = torch.bfloat16
    q = torch.randn(2, 4, 10, 64, device="cuda", dtype=bf, requires_grad=True)
    k0 = torch.empty(2, 4, 0, 64, device="cuda", dtype=bf, requires_grad=True)
    dq, dk = torch.autograd.grad(flashmlir.attention(q, k0, k0), (q, k0),
                                 torch.ones(2, 4, 10, 64, device="cuda", dtype=bf))
    assert (dq == 0).all() and dk.shape == k0.shape
    qe = torch.empty(2, 4, 0, 64, device="cuda", dtype=bf, requires_grad=True)
    k = torch.randn(2, 4, 10, 64, device="cuda", dtype=bf, requires_grad=True)
    out = flashmlir.attention(qe, k, k, causal=True)
    dq, dk = torch.autograd.grad(out, (qe, k), torch.empty_like(out))
    assert dq.shape == qe.shape and (dk == 0).all()
