"""flashmlir.attention's launch path, forward and backward, eager and under
torch.compile, on the fake GPU of fake_gpu.py (CPU only, needs torch): CPU
tensors stand for device memory, the fake libcuda runs each launch in
PyTorch on the memory its packed parameters point at.

Checks the steady-state path (one cuLaunchKernel per kernel, nothing else
but the current-context check; new tensors' addresses in the launch), the
first call's full validation, the layouts (bshd tensors as transposed
views), dq, dk, dv and workspace allocation, kernel order, dout handling,
the poison hook, the edge cases, and that the gradient check of the GPU
tests (gpu_ref.check_grads) accepts a correct backward and rejects wrong
ones.
"""

import math
import struct

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import _interface, _kernels, _launch, _plan  # noqa: E402
from flashmlir._errors import LaunchError  # noqa: E402

import fake_gpu  # noqa: E402
import gpu_ref as R  # noqa: E402

BF = torch.bfloat16
FWD = "fa_fwd_kernel"
BWD = {False: ["fa_bwd_preprocess_kernel", "fa_bwd_kernel", "fa_bwd_dq_convert_kernel"],
       True: ["fa_bwd_preprocess_kernel", "fa_bwd_kernel", "fa_bwd_dq_kernel"]}


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    fake = fake_gpu.install(monkeypatch, tmp_path)
    monkeypatch.setenv(_interface.POISON_ENV, "1")
    yield fake
    fake_gpu.uninstall(fake)


def entries(fake):
    out = [e for _, e in fake.ran]
    fake.ran.clear()
    return out


def qkv(b, hq, hkv, nq, nk, d, dv, layout="bhsd", seed=0, grad=True):
    g = torch.Generator()
    g.manual_seed(seed)

    def mk(h, n, dd):
        shape = (b, h, n, dd) if layout == "bhsd" else (b, n, h, dd)
        return torch.randn(shape, generator=g).to(BF).requires_grad_(grad)
    q, k, v = mk(hq, nq, d), mk(hkv, nk, d), mk(hkv, nk, dv)
    oshape = (b, hq, nq, dv) if layout == "bhsd" else (b, nq, hq, dv)
    return q, k, v, torch.randn(oshape, generator=g).to(BF)


def check_fwd(out, lse, q, k, v, layout="bhsd", causal=False, window=None, scale=None,
              softcap=None, **_):
    b = lambda t: R.bhsd(t.detach(), layout)
    R.check(b(out), lse, b(q), b(k), b(v), R.canonical(causal, window), scale, softcap)


def check(grads, q, k, v, dout, layout="bhsd", causal=False, window=None, scale=None,
          softcap=None, **kw):
    b = lambda t: R.bhsd(t.detach(), layout)
    return R.check_grads(tuple(b(g) for g in grads), b(q), b(k), b(v), b(dout),
                         R.canonical(causal, window), scale, softcap, what=str(kw))


# -- the steady-state path ----------------------------------------------------------------

@pytest.mark.parametrize("causal,window", [(False, (123, 45)), (False, (-1, 9)),
                                           (False, (5, -1)), (True, (77, 0))])
def test_runtime_window_params(gpu, causal, window):
    # One window kernel per causal-or-not; the sizes reach it as parameters.
    q, k, v, dout = qkv(1, 2, 2, 40, 70, 32, 32)
    out, lse = flashmlir.attention(q, k, v, causal=causal, window=window, return_lse=True)
    check_fwd(out, lse, q, k, v, causal=causal, window=window)
    # A causal kernel takes the left size only (its right one is 0 by kind).
    sizes = lambda a: (a.get("window_left"), 0 if causal else a.get("window_right"))
    a = gpu.decoded[-1]
    assert sizes(a) == window and (not causal or "window_right" not in a)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check(grads, q, k, v, dout, causal=causal, window=window)
    masking = [a for a in gpu.decoded[-3:] if "dq" not in a or "dq_accum" in a]
    assert any(sizes(a) == window for a in masking)
    kernels = {r.describe() for r in gpu.registry.generated}
    other = (3, 0) if causal else (1, 2)
    flashmlir.attention(q.detach(), k.detach(), v.detach(), causal=causal, window=other)
    assert gpu.decoded[-1]["window_left"] == other[0]
    assert {r.describe() for r in gpu.registry.generated} == kernels

def test_steady_state_is_one_launch(gpu):
    q, k, v, _ = qkv(2, 4, 2, 40, 70, 32, 32, grad=False)
    out, lse = flashmlir.attention(q, k, v, causal=True, return_lse=True)
    check_fwd(out, lse, q, k, v, causal=True)
    assert entries(gpu) == [FWD] and len(gpu.registry.generated) == 1
    gpu.events.clear()
    gpu.count()
    gpu.current = 0xC0        # torch's primary context is current
    for i in range(3):
        q2, k2, v2, _ = qkv(2, 4, 2, 40, 70, 32, 32, seed=i + 1, grad=False)
        out2, lse2 = flashmlir.attention(q2, k2, v2, causal=True, return_lse=True)
        check_fwd(out2, lse2, q2, k2, v2, causal=True)
        assert gpu.count() == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 1}
        a = gpu.decoded[-1]
        assert a["q"].data_ptr() == q2.data_ptr() and a["out"].data_ptr() == out2.data_ptr()
        assert a["lse"].data_ptr() == lse2.data_ptr()
    assert gpu.events == []   # nothing loaded, no context pushed, no exception
    launch = gpu.launches[-1]
    assert launch["grid"] == (1, 4, 2) and launch["block"] == (128, 1, 1)
    assert launch["smem"] == 49152 and launch["stream"] == 0x77 and launch["ctx"] == 0xC0


def test_plan_packs_like_the_full_path(gpu):
    """The plan's parameters equal a fresh full packing of the same call,
    in the manifest's order (scalars between the memrefs)."""
    q, k, v, _ = qkv(1, 2, 2, 30, 50, 32, 32, layout="bshd", grad=False)
    base = torch.empty(1 * 30 * 2 * 32 + 8, dtype=BF)
    out = base[8:].view(1, 30, 2, 32)                       # storage offset 8 elements
    lse = torch.empty(1, 2, 30)
    flashmlir.attention(q, k, v, window=(5, 3), softcap=2.5, layout="bshd", out=out, lse=lse)
    plan = next(iter(_interface._plans.values())).launch
    c = _interface._validate(q, k, v, False, (5, 3), None, 2.5, "bshd")
    args = {"q": q.transpose(1, 2), "k": k.transpose(1, 2), "v": v.transpose(1, 2),
            "out": out.transpose(1, 2), "lse": lse, **c.scalars()}
    want = _launch.pack_params(plan.kernel.spec, args, c.dims.env())
    as_bytes = lambda ps: [(p.label, p.type, bytes(p.ctype())) for p in ps]
    assert as_bytes(plan.current_params()) == as_bytes(want)
    labels = [p.label for p in want]
    # (a windowed kernel takes its sizes as parameters named by their roles;
    # a forward kernel the host's f32 factors of the scale and softcap)
    assert labels[-1] == "window_right"
    assert {"scale_over_softcap", "log2e_softcap"} <= set(labels) and "scale" not in labels
    got = {p.label: p.value for p in want}
    assert got["out.aligned"] == out.data_ptr() and got["out.allocated"] == base.data_ptr()
    assert got["q.strides[1]"] == 32 and got["q.strides[2]"] == 64   # bshd as a bhsd view
    assert (got["window_left"], got["window_right"]) == (5, 3)
    # The factors are the f32 host arithmetic's results, bit for bit.
    f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
    log2e = f32(math.log2(math.e))
    assert got["log2e_softcap"] == f32(f32(2.5) * log2e)
    assert got["scale_over_softcap"] == f32(f32(32 ** -0.5) / f32(2.5))
    assert bytes(next(p for p in want if p.label == "log2e_softcap").ctype()) == \
        struct.pack("f", f32(2.5) * log2e)


def test_new_plan_for_each_kind_of_call(gpu):
    q, k, v, _ = qkv(1, 2, 2, 30, 50, 32, 32, grad=False)
    flashmlir.attention(q, k, v)
    flashmlir.attention(q, k, v)
    assert len(_interface._plans) == 1
    flashmlir.attention(q, k, v, causal=True)                  # options
    flashmlir.attention(q[:, :, :20], k, v)                    # shapes
    flashmlir.attention(q.half(), k.half(), v.half())          # dtypes
    flashmlir.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        layout="bshd")                         # layout
    assert len(_interface._plans) == 5
    assert len(gpu.registry.generated) == 3                    # causal, f16, full bf16
    flashmlir.set_default_registry(gpu.registry)               # a registry change drops plans
    assert len(_interface._plans) == 0


def test_steady_state_checks_alignment(gpu):
    q, k, v, _ = qkv(1, 2, 2, 16, 16, 32, 32, grad=False)
    flashmlir.attention(q, k, v)
    base = torch.empty(1 * 2 * 16 * 32 + 1, dtype=BF)
    odd = base[1:].view(1, 2, 16, 32)                          # same strides, 2 bytes off
    assert odd.data_ptr() % 16
    gpu.count()
    with pytest.raises(ValueError, match="q's data pointer .* is not 16-byte aligned"):
        flashmlir.attention(odd, k, v)
    assert "cuLaunchKernel" not in gpu.count()


def test_bad_calls_raise_before_any_plan(gpu):
    q, k, v, _ = qkv(1, 2, 2, 16, 16, 32, 32, grad=False)
    with pytest.raises(TypeError, match="causal must be a bool"):
        flashmlir.attention(q, k, v, causal="yes")
    with pytest.raises(ValueError, match="right bound must be 0"):
        flashmlir.attention(q, k, v, causal=True, window=[8, 4])
    with pytest.raises(TypeError, match="one dtype"):
        flashmlir.attention(q, k.half(), v)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        flashmlir.attention("q", k, v)
    with pytest.raises(ValueError, match="out must have shape"):
        flashmlir.attention(q, k, v, out=torch.empty(1, 2, 16, 16, dtype=BF))
    assert not gpu.ran and not _interface._plans


def test_launch_errors_surface(gpu, monkeypatch):
    """A manifest whose dims disagree with the tensors: a LaunchError when
    the plan is made, nothing launched."""
    q, k, v, dout = qkv(1, 2, 2, 20, 30, 32, 32)
    out = flashmlir.attention(q, k, v)
    real = gpu.registry._compile_one

    def bad(compiler, request, chip):
        spec = real(compiler, request, chip)
        m = dict(spec.raw)
        m["workspace"] = [dict(w) for w in m["workspace"]]
        m["workspace"][1]["dims"] = ["B", "Hq", "Nq + 1", "D"]
        from flashmlir import _manifest as M
        return M.parse_manifest(m, spec.json_path)
    monkeypatch.setattr(gpu.registry, "_compile_one", bad)
    entries(gpu)
    with pytest.raises(LaunchError, match="parameter dq_accum: sizes"):
        torch.autograd.grad(out, (q, k, v), dout)
    assert entries(gpu) == []


# -- the backward through the fake GPU ------------------------------------------------------

@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (20, 7)},
                                  {"causal": True, "window": (30, 0)}, {"softcap": 2.0},
                                  {"scale": 0.3}], ids=repr)
@pytest.mark.parametrize("nq,nk", [(1, 1), (17, 113), (113, 17)])
def test_backward(gpu, nq, nk, opts, deterministic):
    q, k, v, dout = qkv(2, 4, 2, nq, nk, 32, 32, seed=nq * 7 + nk)
    out, lse = flashmlir.attention(q, k, v, return_lse=True, deterministic=deterministic, **opts)
    check_fwd(out, lse, q, k, v, **opts)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check(grads, q, k, v, dout, **opts)
    assert entries(gpu) == [FWD] + BWD[deterministic]
    ws = {n: (tuple(a.shape), a.dtype) for n, a in gpu.decoded[-2].items()
          if n in ("delta", "dq_accum")}
    assert ws["delta"] == ((2, 4, nq), torch.float32)
    if not deterministic:
        assert ws["dq_accum"] == ((2, 4, nq, 32), torch.float32)
    # steady state: the same kinds of calls again, one launch per kernel
    gpu.count()
    out = flashmlir.attention(q, k, v, deterministic=deterministic, **opts)
    torch.autograd.grad(out, (q, k, v), dout)
    assert gpu.count()["cuLaunchKernel"] == 4


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (4, 1)])
def test_layouts_and_heads(gpu, layout, hq, hkv):
    q, k, v, dout = qkv(2, hq, hkv, 40, 70, 32, 48, layout, seed=hq + hkv)
    out, lse = flashmlir.attention(q, k, v, layout=layout, causal=True, return_lse=True)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert out.shape == dout.shape and lse.shape == (2, hq, 40) and out.is_contiguous()
    for g, t in zip(grads, (q, k, v)):
        assert g.shape == t.shape and g.dtype == BF and g.is_contiguous()  # caller's layout
    a = gpu.decoded[-1]   # the last backward kernel saw [B, H, N, D] views
    assert a["dq"].shape == (2, hq, 40, 32) and a["dq"].data_ptr() == grads[0].data_ptr()
    if layout == "bshd":
        assert a["dq"].stride() == (40 * hq * 32, 32, hq * 32, 1)
    check(grads, q, k, v, dout, layout, causal=True)


@pytest.mark.parametrize("hq,hkv,b,nk,split", [
    (4, 2, 2, 70, True),      # a few blocks of a GQA group: split
    (4, 4, 2, 70, False),     # MHA never splits
    (4, 1, 200, 70, False),   # 400 blocks of 64 keys: more than 1.5 waves
])
def test_split_gqa_group(gpu, monkeypatch, hq, hkv, b, nk, split):
    """The causal backward's split GQA group (the warp-specialized kernel's):
    per the manifest's expressions the key-block grid counts query heads and
    the dK / dV accumulators have Nk rows, which the launcher zeroes (over
    the poisoned workspace) before the launches; a fourth kernel converts
    them. Else no rows, and the conversion does nothing."""
    monkeypatch.setattr(fake_gpu, "SPLIT_GROUPS", True)
    q, k, v, dout = qkv(b, hq, hkv, 40, nk, 32, 32, seed=hq + hkv + b)
    out = flashmlir.attention(q, k, v, causal=True)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    check(grads, q, k, v, dout, causal=True)
    assert entries(gpu) == [FWD] + BWD[False] + ["fa_bwd_dkv_convert_kernel"]
    key = next(x for x in gpu.launches if x["entry"] == "fa_bwd_kernel")
    assert key["grid"][1] == (hq if split else hkv)
    assert gpu.split_groups == split
    rows = gpu.decoded[-1]["dk_accum"].shape[2]
    assert rows == (nk if split else 0)
    gpu.count()   # the steady state: the zeroing is a tensor op, not a launch
    out = flashmlir.attention(q, k, v, causal=True)
    check(torch.autograd.grad(out, (q, k, v), dout), q, k, v, dout, causal=True)
    assert gpu.count()["cuLaunchKernel"] == 5
    assert gpu.split_groups == 2 * split


def test_zeroed_workspace_ranges():
    """Zeroed neighbours take one fill (the padding between them too), a
    buffer between them splits it, empty ones take none."""
    f32 = torch.float32
    shapes = [("dq_accum", (2, 100), f32), ("dk_accum", (2, 10), f32),
              ("dv_accum", (3, 7), f32), ("lse2", (5,), f32), ("x", (0, 4), f32),
              ("y", (1,), f32)]
    offsets, _ = _interface._workspace_layout(shapes)
    assert offsets == (0, 1024, 1280, 1536, 1792, 1792)
    zr = _interface._zeroed_ranges
    assert zr(shapes, offsets, {"dk_accum", "dv_accum"}) == ((1024, 256 + 84),)
    assert zr(shapes, offsets, {"dk_accum", "lse2"}) == ((1024, 80), (1536, 20))
    assert zr(shapes, offsets, {"x", "y"}) == ((1792, 4),)
    assert zr(shapes, offsets, set()) == ()


def test_expanded_strided_and_misaligned_dout(gpu):
    q, k, v, _ = qkv(1, 2, 2, 30, 50, 32, 32, seed=3)
    out = flashmlir.attention(q, k, v, causal=True)
    out.float().sum().backward()  # dout: ones, expanded, cast
    ones = torch.ones_like(out)
    check((q.grad, k.grad, v.grad), q, k, v, ones, causal=True)
    call = _interface._validate(q, k, v, True, None, None, None, "bhsd")
    expanded = torch.ones(1, 1, 1, 1, dtype=BF).expand(out.shape)
    assert _interface._check_dout(expanded, call).is_contiguous()
    wide = torch.randn(1, 2, 30, 64).to(BF)[..., ::2]
    fixed = _interface._check_dout(wide, call)
    assert fixed.is_contiguous() and torch.equal(fixed, wide)
    ok = torch.randn(1, 2, 30, 32).to(BF)
    assert _interface._check_dout(ok, call) is ok
    for dout in (wide, wide, ok):   # a plan per kind of dout, reused
        out = flashmlir.attention(q, k, v, causal=True)
        check(torch.autograd.grad(out, (q, k, v), dout), q, k, v, dout, causal=True)
    base = torch.randn(2 * 30 * 32 + 1).to(BF)
    odd = base[1:].view(1, 2, 30, 32)  # contiguous, but 2 bytes off alignment
    if base.data_ptr() % 16 == 0:
        out = flashmlir.attention(q, k, v, causal=True)
        check(torch.autograd.grad(out, (q, k, v), odd), q, k, v, odd, causal=True)


@pytest.mark.parametrize("make,exc,match", [
    (lambda o: o[:, :, :-1], ValueError, r"gradient of out must have shape \(1, 2, 30, 32\)"),
    (lambda o: o.float(), TypeError, "gradient of out must be torch.bfloat16, got torch.float32"),
    (lambda o: [1], TypeError, "dout must be a torch.Tensor"),
])
def test_bad_dout(gpu, make, exc, match):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    call = _interface._validate(q, k, v, False, None, None, None, "bhsd")
    with pytest.raises(exc, match=match):
        _interface._backward(q, k, v, None, None, make(dout), call)
    out, lse = flashmlir.attention(q, k, v, return_lse=True)
    with pytest.raises(exc, match=match):
        _interface._forward_plan(q, k, v, False, None, None, None, "bhsd", False).backward(
            q, k, v, out, lse, make(dout), False)


def test_poison_reaches_unwritten_elements(gpu, monkeypatch):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    gpu.skip = set(BWD[False])
    out = flashmlir.attention(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert all(g.isnan().all() for g in grads)
    with pytest.raises(AssertionError, match="not finite"):
        check(grads, q, k, v, dout)
    # ... and the workspace: skipping the kernel that initialises delta shows
    gpu.skip = {"fa_bwd_preprocess_kernel"}
    out = flashmlir.attention(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert grads[1].isnan().any()
    monkeypatch.delenv(_interface.POISON_ENV)
    assert not _interface.poison_grads()


def test_check_grads_rejects_wrong_backwards(gpu):
    q, k, v, dout = qkv(2, 4, 2, 200, 200, 64, 64, seed=11)
    out = flashmlir.attention(q, k, v, causal=True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    stats = check((dq, dk, dv), q, k, v, dout, causal=True)
    assert all(s["err"] <= s["err_pt"] for s in stats.values())  # f32 math beats bf16 naive
    for bad, name in [((dq, dk * 1.05, dv), "dk"), ((dq * 0.95, dk, dv), "dq")]:
        with pytest.raises(AssertionError, match=f"{name} max error"):
            check(bad, q, k, v, dout, causal=True)
    lost = dv.clone()
    lost[:, :, 3] = 0
    with pytest.raises(AssertionError, match="dv max error"):
        check((dq, dk, lost), q, k, v, dout, causal=True)
    # a gradient on a row that sees no key must be exactly 0
    q2, k2, v2, dout2 = qkv(1, 2, 2, 50, 20, 32, 32, seed=12)
    gq, gk, gv = torch.autograd.grad(flashmlir.attention(q2, k2, v2, causal=True),
                                     (q2, k2, v2), dout2)
    assert (gq[:, :, :30] == 0).all()
    check((gq, gk, gv), q2, k2, v2, dout2, causal=True)
    gq = gq.clone()
    gq[0, 0, 0, 0] = 1e-6
    with pytest.raises(AssertionError, match="dq must be exactly 0"):
        check((gq, gk, gv), q2, k2, v2, dout2, causal=True)


def test_no_keys_and_empty(gpu):
    q = torch.randn(2, 4, 10, 32).to(BF).requires_grad_()
    k0 = torch.empty(2, 4, 0, 32, dtype=BF, requires_grad=True)
    out, lse = flashmlir.attention(q, k0, k0, return_lse=True)
    assert (out == 0).all() and (lse == math.inf).all() and gpu.ran == []
    dq, dk = torch.autograd.grad(out, (q, k0), torch.randn_like(out))
    assert (dq == 0).all() and dk.shape == k0.shape and gpu.ran == []
    for sq, sk in [((2, 4, 0, 32), (2, 4, 10, 32)), ((0, 4, 10, 32), (0, 4, 10, 32)),
                   ((2, 0, 10, 32), (2, 2, 10, 32))]:
        qq = torch.randn(sq).to(BF).requires_grad_()
        kk = torch.randn(sk).to(BF).requires_grad_()
        out = flashmlir.attention(qq, kk, kk, causal=True)
        gq, gk = torch.autograd.grad(out, (qq, kk), torch.ones_like(out))
        assert gq.shape == qq.shape and gk.shape == kk.shape and (gk == 0).all()
        assert gpu.ran == []


def test_only_requested_grads(gpu):
    q, k, v, dout = qkv(1, 2, 2, 20, 30, 32, 32)
    out = flashmlir.attention(q, k.detach(), v.detach())
    (dq,) = torch.autograd.grad(out, (q,), dout)
    assert dq.shape == q.shape


def test_out_and_lse_buffers(gpu):
    q, k, v, _ = qkv(1, 2, 2, 20, 30, 32, 32, grad=False)
    out = torch.full((1, 20, 2, 32), math.nan, dtype=BF).transpose(1, 2)   # strided out
    lse = torch.full((1, 2, 20), math.nan)
    res = flashmlir.attention(q, k, v, out=out, lse=lse, return_lse=True)
    assert res[0] is out and res[1] is lse
    check_fwd(out, lse, q, k, v)
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention(q.requires_grad_(), k, v, out=out)


# -- torch.compile through the custom ops, on the fake GPU ----------------------------------

def test_compile_fullgraph_runs_the_kernels(gpu):
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()

    def f(q, k, v):
        o = flashmlir.attention(q, k, v, causal=True, layout="bshd")
        return (o.float() * 2).sum()

    cf = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for n, seed in ((37, 1), (53, 2)):
        q, k, v, _ = qkv(2, 4, 2, n, n + 9, 32, 32, layout="bshd", seed=seed)
        grads = torch.autograd.grad(cf(q, k, v), (q, k, v))
        assert entries(gpu) == [FWD] + BWD[False]
        want = torch.autograd.grad(f(q, k, v), (q, k, v))
        assert entries(gpu) == [FWD] + BWD[False]
        assert all(torch.equal(a, b) for a, b in zip(grads, want))
    assert not counters["graph_break"]
    assert counters["stats"]["unique_graphs"] <= 1   # one dynamic graph for both shapes


# -- split-KV decoding on the fake GPU -------------------------------------------------------

def _split_request(d=32, causal=False):
    return _kernels.KernelRequest.make("forward", "bf16", d, causal=causal, split_kv=True)


@pytest.mark.parametrize("nq,causal,hq,hkv,packed", [
    (1, True, 8, 2, True),      # one query: causal sees every key, GQA-packed rows
    (3, False, 8, 2, True),     # no mask: [B, Hq, 3] viewed as [B, Hkv, 12]
    (3, True, 8, 2, False),     # a few causal queries: unpacked, the causal kernel
    (5, False, 4, 4, False),    # MHA: nothing to pack
])
def test_split_kv_decode(gpu, nq, causal, hq, hkv, packed):
    spec = gpu.registry.generate(_split_request(causal=causal and not packed))
    q, k, v, _ = qkv(2, hq, hkv, nq, 300, 32, 32, grad=False)
    out, lse = flashmlir.attention(q, k, v, causal=causal, return_lse=True)
    assert gpu.ran == [(spec.name, "fa_fwd_kernel"), (spec.name, "fa_fwd_merge_kernel")]
    split, merge = gpu.decoded[-2:]
    rows, heads = (hq // hkv * nq, hkv) if packed else (nq, hq)
    assert tuple(split["q"].shape) == (2, heads, rows, 32)
    assert tuple(merge["out"].shape) == (2, heads, rows, 32)
    # The run-time split count: min(2 * 132 // (B * heads), ceil(300 / 64), 64).
    assert split["out_partial"].shape[1] == heads * min(264 // (2 * heads), 5, 64)
    assert split["size_2"] == 132
    check_fwd(out, lse, q, k, v, causal=causal)
    # The steady state: the plan's two launches, nothing else.
    gpu.ran.clear()
    flashmlir.attention(q, k, v, causal=causal)
    assert [e for _, e in gpu.ran] == ["fa_fwd_kernel", "fa_fwd_merge_kernel"]


def test_split_kv_only_when_it_helps(gpu, monkeypatch):
    gpu.registry.generate(_split_request())
    # As many (batch, head) pairs as SMs: the plain kernel.
    q, k, v, _ = qkv(132, 1, 1, 1, 100, 32, 32, grad=False)
    flashmlir.attention(q, k, v)
    assert [e for _, e in gpu.ran] == [FWD] and gpu.ran[0][0].startswith("gen_")
    assert gpu.registry.spec_named(gpu.ran[0][0]).kv_splits is None
    gpu.ran.clear()
    # Rows past one 64-row block: the plain kernel.
    q, k, v, _ = qkv(1, 2, 2, 65, 100, 32, 32, grad=False)
    flashmlir.attention(q, k, v)
    assert gpu.registry.spec_named(gpu.ran[-1][0]).kv_splits is None
    gpu.ran.clear()
    # FLASHMLIR_SPLIT_KV=0 turns it off.
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    _interface.clear_caches()
    q, k, v, _ = qkv(1, 8, 2, 1, 100, 32, 32, grad=False)
    flashmlir.attention(q, k, v)
    assert gpu.registry.spec_named(gpu.ran[-1][0]).kv_splits is None


# -- the dynamic tile scheduler on the fake GPU ---------------------------------------------

@pytest.mark.parametrize("causal,window", [(True, None), (False, (64, 16))])
def test_dynamic_scheduler_counter_is_zeroed(monkeypatch, tmp_path, causal, window):
    """A masked forward whose kernel takes the dynamic scheduler's counter: one
    launch per call, the workspace zeroed before each (the fake kernel leaves
    it non-zero), the grid min(tiles, SMS), the result right."""
    fake = fake_gpu.install(monkeypatch, tmp_path, dynamic=True)
    try:
        q, k, v, _ = qkv(2, 4, 2, 300, 200, 32, 32, grad=False)
        for _ in range(3):
            out, lse = flashmlir.attention(q, k, v, causal=causal, window=window,
                                           return_lse=True)
            check_fwd(out, lse, q, k, v, causal=causal, window=window)
        assert fake.counters == [0, 0, 0]
        assert [e for _, e in fake.ran] == [FWD] * 3
        spec = fake.registry.spec_named(fake.ran[0][0])
        assert spec.is_multi_launch and spec.zeroed_workspace
        # ceildiv(300, 64) * 4 * 2 = 40 tiles, fewer than the 132 SMs.
        assert fake.launches[-1]["grid"] == (40, 1, 1)
        assert tuple(fake.decoded[-1]["tile_counter"].shape) == (1,)
    finally:
        fake_gpu.uninstall(fake)
