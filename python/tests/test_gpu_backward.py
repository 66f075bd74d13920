"""GPU tests of flashmlir.attention's backward with the fa-compile kernels
(the normal search path: $FLASHMLIR_KERNEL_DIR, the package's kernels/,
build/kernels, the compile cache).

Accuracy rule (FlashAttention's backward tests; see gpu_ref.check_grads):
for each of dq, dk, dv, max error of ours against the float32 autograd of
the reference attention <= 2 x that of PyTorch's same-precision naive
attention's autograd + 1e-3 x max|reference gradient|; every element finite;
dq exactly 0 on rows that see no key, dk and dv exactly 0 on keys no query
sees. Gradients and workspace are poisoned with NaN before every backward
(FLASHMLIR_POISON_GRADS=1), so an element a kernel does not write fails.

Also: deterministic mode (50 backward passes bitwise identical), linear
memory of forward + backward, autograd.grad on bshd inputs and packed qkv
views, expanded output gradients, the edge cases without kernels.

A variant with no kernel is skipped (reason printed with -rs), or fails when
FLASHMLIR_REQUIRE_KERNELS=1. `python3 python/tests/fixture_manifests.py DIR`
and FLASHMLIR_KERNEL_DIR=DIR run this file against naive fixture kernels.
"""


import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _backward, _interface, _kernels, _plan, _variants  # noqa: E402

import gpu_ref as R  # noqa: E402
from gpu_ref import DTYPES, REQUIRE, exact_fp32_matmul, real_registry, skip_missing  # noqa: E402,F401,E501 (fixtures)

# Nq, Nk in {1, 17, 113, 1000, 4097}, Nq != Nk both ways, incl. rows that
# see no key (causal with Nq > Nk) and keys no query sees (windows).
SEQLENS = [(1, 1), (1, 4097), (17, 113), (113, 17), (113, 1000), (1000, 113),
           (1000, 1000), (4097, 4097)]




@pytest.fixture(autouse=True)
def poison(monkeypatch):
    monkeypatch.setenv(_interface.POISON_ENV, "1")



def grads(q, k, v, dout, layout="bhsd", deterministic=False, **opts):
    """(out, dq, dk, dv) from flashmlir.attention + torch.autograd.grad, on
    fresh leaves; skips on a missing kernel."""
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    try:
        out = flashmlir.attention(qq, kk, vv, layout=layout, deterministic=deterministic, **opts)
        dq, dk, dv = torch.autograd.grad(out, (qq, kk, vv), dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    torch.cuda.synchronize()
    return out, dq, dk, dv


def check(dq, dk, dv, q, k, v, dout, layout, what, **opts):
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    b = lambda t: R.bhsd(t, layout)
    return R.check_grads((b(dq), b(dk), b(dv)), b(q), b(k), b(v), b(dout), mask,
                         opts.get("scale"), opts.get("softcap"), what=what)


def _opt_id(o):
    return ",".join(f"{k}={v}" for k, v in o.items()).replace(" ", "") or "full"


def _case(dtype, d, nq, nk, hq=4, hkv=2, layout="bhsd", seed=0, b=None):
    if b is None:
        b = 1 if nq * nk > 2_000_000 else 2
    tdt = DTYPES[dtype]
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, d, tdt, layout, seed=seed)
    out_shape = (b, hq, nq, d) if layout == "bhsd" else (b, nq, hq, d)
    return q, k, v, R.make_dout(out_shape, tdt, seed=seed + 1)


@pytest.mark.parametrize("nq,nk", SEQLENS, ids=lambda x: str(x))
@pytest.mark.parametrize("opts", _variants.TEST_OPTIONS, ids=_opt_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward(dtype, d, opts, nq, nk):
    q, k, v, dout = _case(dtype, d, nq, nk, seed=R.seed_for("bwd", dtype, d, _opt_id(opts), nq, nk))
    out, dq, dk, dv = grads(q, k, v, dout, **opts)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dq.dtype == q.dtype and dk.dtype == k.dtype and dv.dtype == v.dtype
    check(dq, dk, dv, q, k, v, dout, "bhsd", f"{dtype} D={d} {_opt_id(opts)} Nq={nq} Nk={nk}",
          **opts)


# Window sizes no kernel was compiled for: the window kernels of TEST_OPTIONS
# take them at run time.
RUNTIME_WINDOWS = ({"window": (123, 45)}, {"window": (-1, 200)}, {"window": (300, -1)},
                   {"causal": True, "window": (77, 0)})


@pytest.mark.parametrize("nq,nk", [(17, 113), (1000, 1000), (4097, 1000)], ids=lambda x: str(x))
@pytest.mark.parametrize("opts", RUNTIME_WINDOWS, ids=_opt_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward_runtime_window(dtype, d, opts, nq, nk):
    q, k, v, dout = _case(dtype, d, nq, nk, seed=R.seed_for("bwdw", dtype, d, _opt_id(opts), nq, nk))
    out, dq, dk, dv = grads(q, k, v, dout, **opts)
    check(dq, dk, dv, q, k, v, dout, "bhsd", f"{dtype} D={d} {_opt_id(opts)} Nq={nq} Nk={nk}",
          **opts)


@pytest.mark.parametrize("nq,nk", [(113, 1000), (1000, 113)], ids=lambda x: str(x))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_heads_and_layouts(dtype, d, hq, hkv, layout, causal, nq, nk):
    q, k, v, dout = _case(dtype, d, nq, nk, hq, hkv, layout,
                          seed=R.seed_for("bwd-heads", dtype, d, hq, hkv, layout, causal, nq, nk))
    out, dq, dk, dv = grads(q, k, v, dout, layout=layout, causal=causal)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    check(dq, dk, dv, q, k, v, dout, layout,
          f"{dtype} D={d} H={hq}/{hkv} {layout} causal={causal} {nq}x{nk}", causal=causal)


# Causal groups of 8 and more with at most 64 key blocks walk query blocks
# outer, heads inner and rotated by the key block (D >= 128), and 16 heads
# per kv head with 72 key blocks the heads outer again: both against the
# reference, at lengths with partial blocks.
@pytest.mark.parametrize("hq,hkv,nq,nk", [(8, 1, 1000, 1000), (16, 2, 700, 1300),
                                          (16, 1, 9173, 9173)], ids=lambda x: str(x))
@pytest.mark.parametrize("d", [64, 128])
def test_large_groups_causal(d, hq, hkv, nq, nk):
    q, k, v, dout = _case("bf16", d, nq, nk, hq, hkv, b=1,
                          seed=R.seed_for("bwd-groups", d, hq, hkv, nq, nk))
    out, dq, dk, dv = grads(q, k, v, dout, causal=True)
    check(dq, dk, dv, q, k, v, dout, "bhsd", f"bf16 D={d} H={hq}/{hkv} causal {nq}x{nk}",
          causal=True)


# Unmasked, each key block starts at its own query block (the rotated fixed
# order) up to 64 key blocks per head; 8300 keys (65 blocks of 128) keep the
# descending order in the same kernel.
@pytest.mark.parametrize("opts", [{}, {"causal": True}], ids=_opt_id)
@pytest.mark.parametrize("dtype,d,hq,hkv,nq,nk", [
    ("bf16", 128, 4, 2, 1000, 1000),
    ("f16", 64, 4, 1, 113, 1000),
    ("bf16", 64, 4, 4, 4097, 1000),
    ("bf16", 64, 2, 1, 1000, 8300),
])
def test_deterministic_bitwise(dtype, d, hq, hkv, nq, nk, opts):
    q, k, v, dout = _case(dtype, d, nq, nk, hq, hkv, seed=R.seed_for("det", dtype, d, nq, nk))
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    try:
        out = flashmlir.attention(qq, kk, vv, deterministic=True, **opts)
        first = torch.autograd.grad(out, (qq, kk, vv), dout, retain_graph=True)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    check(*first, q, k, v, dout, "bhsd", f"deterministic {dtype} D={d} {nq}x{nk} {opts}", **opts)
    for i in range(49):
        again = torch.autograd.grad(out, (qq, kk, vv), dout, retain_graph=True)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{name} differs bitwise on backward pass {i + 2} of 50"


def test_deterministic_flag_selects_other_kernels():
    reg = _kernels.default_registry()
    cc = torch.cuda.get_device_capability()
    mk = lambda det: _kernels.KernelRequest.make("backward", "bf16", 128, causal=True,
                                                  deterministic=det)
    try:
        fast, det = reg.find(mk(False), cc), reg.find(mk(True), cc)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert not fast.deterministic and det.deterministic and fast.name != det.name
    assert "dq_accum" in [w.name for w in fast.workspace]


def test_memory_is_linear():
    """Peak memory of forward + backward beyond the inputs, at N = 4k, 8k, 16k."""
    h, d = 4, 128
    peaks = {}
    for n in (4096, 8192, 16384):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        q, k, v, dout = _case("bf16", d, n, n, h, h, seed=n, b=1)
        q.requires_grad_()
        k.requires_grad_()
        v.requires_grad_()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        try:
            out = flashmlir.attention(q, k, v, causal=True)
            out.backward(dout)
        except flashmlir.KernelNotFoundError as exc:
            skip_missing(exc)
        torch.cuda.synchronize()
        peaks[n] = torch.cuda.max_memory_allocated() - base
        assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
        del q, k, v, dout, out
    r1, r2 = peaks[8192] / peaks[4096], peaks[16384] / peaks[8192]
    mib = {n: round(p / 2 ** 20, 1) for n, p in peaks.items()}
    print(f"peak MiB beyond inputs: {mib}; ratios 8k/4k {r1:.2f}, 16k/8k {r2:.2f}")
    assert r2 < 3 and r1 < 3, f"memory grows faster than linearly: {mib}"
    # what a materialized [N, N] f32 score matrix per head would take at 16k
    assert peaks[16384] < h * 16384 * 16384 * 4 / 4, f"{mib}: quadratic-size buffers?"


def test_autograd_grad_bshd():
    q, k, v, dout = _case("bf16", 128, 300, 500, 8, 2, "bshd", seed=21)
    for t in (q, k, v):
        t.requires_grad_()
    try:
        out = flashmlir.attention(q, k, v, layout="bshd", causal=True)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert out.shape == (2, 300, 8, 128) and dq.shape == q.shape and dk.shape == k.shape
    check(dq, dk, dv, q, k, v, dout, "bshd", "autograd.grad bshd", causal=True)
    # only the gradients that are asked for
    (gk,) = torch.autograd.grad(flashmlir.attention(q, k, v, layout="bshd", causal=True),
                                (k,), dout)
    assert torch.isfinite(gk).all()


def test_packed_qkv_grad():
    b, n, h, d = 2, 513, 8, 128
    qkv = torch.randn(b, n, 3, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    q, k, v = qkv.unbind(2)  # strided bshd views
    dout = R.make_dout((b, n, h, d), torch.bfloat16, seed=5)
    try:
        out = flashmlir.attention(q, k, v, layout="bshd", causal=True)
        out.backward(dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    g = qkv.grad
    assert g.shape == qkv.shape
    qc, kc, vc = (t.detach().contiguous() for t in (q, k, v))
    check(g[:, :, 0], g[:, :, 1], g[:, :, 2], qc, kc, vc, dout, "bshd", "packed qkv",
          causal=True)


def test_expanded_dout():
    """out.sum().backward() hands the backward an expanded (stride 0) dout."""
    q, k, v, _ = _case("f16", 64, 200, 300, 4, 2, seed=8)
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    try:
        flashmlir.attention(qq, kk, vv, causal=True).sum().backward()
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    ones = torch.ones(q.shape[:-1] + (v.shape[-1],), device="cuda", dtype=q.dtype)
    check(qq.grad, kk.grad, vv.grad, q, k, v, ones, "bhsd", "expanded dout", causal=True)


def test_misaligned_dout_is_copied():
    q, k, v, _ = _case("bf16", 64, 100, 100, 2, 2, seed=9)
    base = R.make_dout((2 * 2 * 100 * 64 + 8,), torch.bfloat16, seed=10)
    aligned = base[8:].view(2, 2, 100, 64)                   # 16-byte offset
    odd = base[1:2 * 2 * 100 * 64 + 1].view(2, 2, 100, 64)  # 2-byte offset: copied
    strided = R.make_dout((2, 2, 100, 128), torch.bfloat16, seed=11)[..., ::2]  # copied
    for g in (aligned, odd, strided):
        out, dq, dk, dv = grads(q, k, v, g)
        check(dq, dk, dv, q, k, v, g, "bhsd", "dout view")


def test_value_head_dim():
    q, k, v = R.make_qkv(2, 4, 2, 113, 300, 64, 128, torch.bfloat16, "bhsd", seed=12)
    dout = R.make_dout((2, 4, 113, 128), torch.bfloat16, seed=13)
    out, dq, dk, dv = grads(q, k, v, dout)
    check(dq, dk, dv, q, k, v, dout, "bhsd", "Dv=128")


# -- edge cases: no kernel needed ----------------------------------------------------

def test_no_keys():
    q = torch.randn(2, 4, 10, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k0 = torch.empty(2, 4, 0, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v0 = torch.empty(2, 4, 0, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = flashmlir.attention(q, k0, v0)
    assert (out == 0).all()
    dq, dk, dv = torch.autograd.grad(out, (q, k0, v0), torch.randn_like(out))
    assert (dq == 0).all() and dk.shape == k0.shape and dv.shape == v0.shape


@pytest.mark.parametrize("shape_q,shape_k", [
    ((2, 4, 0, 64), (2, 4, 10, 64)),     # Nq = 0: dk = dv = 0
    ((0, 4, 10, 64), (0, 4, 10, 64)),    # B = 0
    ((2, 0, 10, 64), (2, 2, 10, 64)),    # Hq = 0 (Hkv = 2)
])
def test_empty(shape_q, shape_k):
    q = torch.randn(shape_q, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(shape_k, device="cuda", dtype=torch.float16, requires_grad=True)
    v = torch.randn(shape_k, device="cuda", dtype=torch.float16, requires_grad=True)
    out = flashmlir.attention(q, k, v, causal=True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert (dk == 0).all() and (dv == 0).all()


# -- the harness and the hook ---------------------------------------------------------

def test_poison_hook_catches_unwritten(monkeypatch):
    """With the hook on, a backward that launches nothing leaves NaN
    everywhere (so the finiteness check above is sharp), and one that skips
    the first kernel (which initialises the workspace) is wrong."""
    # The backward's kernels run as one PlanSequence (the cached launch
    # plans of _plan.py): patch it to launch nothing, then all but the first.
    q, k, v, dout = _case("bf16", 64, 100, 200, 4, 2, seed=14)
    real = _plan.PlanSequence.launch
    monkeypatch.setattr(_plan.PlanSequence, "launch", lambda self, tensors, stream: None)
    out, dq, dk, dv = grads(q, k, v, dout)
    assert dq.isnan().all() and dk.isnan().all() and dv.isnan().all()
    monkeypatch.setattr(
        _plan.PlanSequence, "launch",
        lambda self, tensors, stream: real(_plan.PlanSequence(self.plans[1:]), tensors, stream))
    out, dq, dk, dv = grads(q, k, v, dout)
    with pytest.raises(AssertionError):
        check(dq, dk, dv, q, k, v, dout, "bhsd", "first kernel skipped")
    monkeypatch.setattr(_plan.PlanSequence, "launch", real)
    out, dq, dk, dv = grads(q, k, v, dout)
    check(dq, dk, dv, q, k, v, dout, "bhsd", "all kernels")


def test_harness_rejects_wrong_gradients():
    """The rule is sharp enough to reject a 2% scale error in dk, or one
    key's dv lost."""
    q, k, v, dout = _case("f16", 128, 1000, 1000, 4, 2, seed=15)
    out, dq, dk, dv = grads(q, k, v, dout, causal=True)
    check(dq, dk, dv, q, k, v, dout, "bhsd", "good", causal=True)
    with pytest.raises(AssertionError, match="dk max error"):
        check(dq, dk * 1.02, dv, q, k, v, dout, "bhsd", "dk * 1.02", causal=True)
    bad = dv.clone()
    bad[:, :, 5] = 0  # one key's dv lost
    with pytest.raises(AssertionError, match="dv max error"):
        check(dq, dk, bad, q, k, v, dout, "bhsd", "dv row lost", causal=True)


# -- errors ------------------------------------------------------------------------------

def test_out_lse_with_grad_still_error():
    q = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention(q, q, q, out=torch.empty_like(q))
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention(q, q, q, lse=torch.empty(1, 2, 16, device="cuda"))


def test_deterministic_must_be_bool():
    q = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="deterministic must be a bool"):
        flashmlir.attention(q, q, q, deterministic="yes")


@pytest.mark.parametrize("make,exc,match", [
    (lambda o: o[:, :, :-1], ValueError, "gradient of out must have shape"),
    (lambda o: o.float(), TypeError, "gradient of out must be torch.bfloat16"),
    (lambda o: o.cpu(), ValueError, "gradient of out must be on cuda"),
    (lambda o: "dout", TypeError, "dout must be a torch.Tensor"),
])
def test_bad_dout(make, exc, match):
    q, k, v, dout = _case("bf16", 64, 16, 16, 2, 2, seed=16)
    c = _interface._validate(q, k, v, False, None, None, None, "bhsd")
    with pytest.raises(exc, match=match):  # checked before out/lse are used
        _interface._backward(q, k, v, None, None, make(dout), c)


def test_backward_available():
    ok = flashmlir.backward_available(torch.bfloat16, 128, causal=True)
    assert isinstance(ok, bool)
    assert flashmlir.backward_available(torch.bfloat16, 200) is False
    assert flashmlir.backward_available(torch.float32, 128) is False
    with pytest.raises(ValueError, match="scale"):
        flashmlir.backward_available(torch.bfloat16, 128, scale=-1.0)
    if REQUIRE:
        assert ok
