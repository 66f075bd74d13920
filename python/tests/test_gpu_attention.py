"""GPU tests of flashmlir.attention with the fa-compile kernels (the normal
search path: $FLASHMLIR_KERNEL_DIR, the package's kernels/, build/kernels,
the compile cache).

Accuracy rule (FlashAttention's; see gpu_ref.py): max error of ours against
a float64 reference <= 2 x that of PyTorch's same-precision naive attention
+ 1e-3 (out and lse), checked on rows that see a key; rows that see no key
must be exactly out = 0, lse = +inf. Outputs are poisoned with NaN before
every launch (preallocated out=/lse=).

A variant with no kernel is skipped (reason printed with -rs), or fails when
FLASHMLIR_REQUIRE_KERNELS=1.
"""

import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _kernels, _manifest, _variants  # noqa: E402

import gpu_ref as R  # noqa: E402
from gpu_ref import DTYPES, real_registry, skip_missing  # noqa: E402,F401 (fixture)

SEQLENS = [(1, 1), (1, 4097), (17, 17), (17, 113), (113, 17), (113, 1000), (1000, 113),
           (1000, 1000), (4097, 4097), (4097, 1000)]




def run(q, k, v, layout="bhsd", **opts):
    return R.forward_poisoned(q, k, v, layout, **opts)


def check(out, lse, q, k, v, layout, what, **opts):
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    return R.check(R.bhsd(out, layout), lse, R.bhsd(q, layout), R.bhsd(k, layout),
                   R.bhsd(v, layout), mask, opts.get("scale"), opts.get("softcap"), what=what)


def _opt_id(o):
    return ",".join(f"{k}={v}" for k, v in o.items()).replace(" ", "") or "full"


@pytest.mark.parametrize("nq,nk", SEQLENS, ids=lambda x: str(x))
@pytest.mark.parametrize("opts", _variants.TEST_OPTIONS, ids=_opt_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward(dtype, d, opts, nq, nk):
    b, hq, hkv = (1, 4, 2) if nq * nk > 2_000_000 else (2, 4, 2)
    tdt = DTYPES[dtype]
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, d, tdt, "bhsd",
                         seed=R.seed_for(dtype, d, _opt_id(opts), nq, nk))
    out, lse = run(q, k, v, **opts)
    check(out, lse, q, k, v, "bhsd", f"{dtype} D={d} {_opt_id(opts)} Nq={nq} Nk={nk}", **opts)
    # Same result from a freshly allocated output (deterministic forward).
    out2, lse2 = flashmlir.attention(q, k, v, return_lse=True, **opts)
    assert torch.equal(out2, out) and torch.equal(lse2, lse), "run-to-run difference"


@pytest.mark.parametrize("nq,nk", [(113, 1000), (1000, 113)], ids=lambda x: str(x))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (8, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_heads_and_layouts(dtype, d, hq, hkv, layout, causal, nq, nk):
    tdt = DTYPES[dtype]
    q, k, v = R.make_qkv(2, hq, hkv, nq, nk, d, d, tdt, layout,
                         seed=R.seed_for("heads", dtype, d, hq, hkv, layout, causal, nq, nk))
    out, lse = run(q, k, v, layout=layout, causal=causal)
    assert out.shape == q.shape[:-1] + (d,)
    check(out, lse, q, k, v, layout, f"{dtype} D={d} H={hq}/{hkv} {layout} causal={causal}",
          causal=causal)


def test_no_visible_key_rows_exact():
    # causal with Nq > Nk: the first Nq - Nk rows see no key.
    q, k, v = R.make_qkv(2, 4, 4, 300, 40, 128, 128, torch.bfloat16, "bhsd", seed=11)
    out, lse = run(q, k, v, causal=True)
    assert (out[:, :, :260] == 0).all() and (lse[:, :, :260] == math.inf).all()
    assert torch.isfinite(out[:, :, 260:]).all() and torch.isfinite(lse[:, :, 260:]).all()
    check(out, lse, q, k, v, "bhsd", "no-visible rows", causal=True)


def test_packed_qkv_strided_views():
    b, n, h, d = 2, 513, 8, 128
    qkv = torch.randn(b, n, 3, h, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.unbind(2)
    out, lse = run(q, k, v, layout="bshd", causal=True)
    ref, ref_lse = run(q.contiguous(), k.contiguous(), v.contiguous(), layout="bshd", causal=True)
    assert torch.equal(out, ref) and torch.equal(lse, ref_lse)
    check(out, lse, q, k, v, "bshd", "packed qkv", causal=True)


def test_storage_offset():
    big = torch.randn(3, 4, 200, 64, device="cuda", dtype=torch.float16)
    q, k, v = big[1:], big[1:], big[:2]
    out, lse = run(q, k, v)
    check(out, lse, q, k, v, "bhsd", "storage offset")


def test_graph_capture():
    q, k, v = R.make_qkv(2, 8, 8, 1024, 1024, 128, 128, torch.bfloat16, "bhsd", seed=3)
    ref, _ = run(q, k, v, causal=True)
    static_out = torch.empty_like(q)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        flashmlir.attention(q, k, v, causal=True, out=static_out)
    static_out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, ref)


def test_autograd_forward_and_backward_or_clear_error():
    q, k, v = R.make_qkv(1, 2, 2, 64, 64, 64, 64, torch.bfloat16, "bhsd", seed=4)
    q.requires_grad_()
    try:
        out = flashmlir.attention(q, k, v)
    except flashmlir.KernelNotFoundError as exc:
        pytest.skip("no kernel: " + str(exc).splitlines()[0])
    assert out.requires_grad and out.grad_fn is not None
    if flashmlir.backward_available(torch.bfloat16, 64):
        out.sum().backward()  # accuracy: test_gpu_backward.py
        assert q.grad.shape == q.shape and torch.isfinite(q.grad).all()
    else:
        with pytest.raises(flashmlir.KernelNotFoundError, match="no kernel for kind=backward"):
            out.sum().backward()


# -- bad inputs: clear Python errors, never a crash ------------------------------

def _good(shape=(1, 2, 16, 64), dtype=torch.bfloat16, device="cuda"):
    return torch.randn(shape, device=device, dtype=dtype)


@pytest.mark.parametrize("make,exc,match", [
    (lambda: (_good(), _good(device="cpu"), _good()), ValueError, "one device"),
    (lambda: (_good(), _good(dtype=torch.float16), _good()), TypeError, "one dtype"),
    (lambda: (_good(dtype=torch.float32),) * 3, TypeError, "float16 and bfloat16"),
    (lambda: (_good().view(2, 16, 64), _good(), _good()), ValueError, "4 dimensions"),
    (lambda: (_good((2, 2, 16, 64)), _good(), _good()), ValueError, "batch sizes differ"),
    (lambda: (_good((1, 2, 16, 128)), _good(), _good()), ValueError, "same head dim"),
    (lambda: (_good((1, 3, 16, 64)), _good(), _good()), ValueError, "multiple"),
    (lambda: (_good(), _good(), _good((1, 2, 17, 64))), ValueError, "same sequence length"),
    (lambda: (_good((1, 2, 16, 60)), _good((1, 2, 16, 60)), _good()), ValueError, "head dim 60"),
    (lambda: (_good((1, 2, 64, 16)).transpose(-1, -2), _good(), _good()), ValueError, "contiguous"),
    (lambda: (torch.randn(2 * 16 * 64 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(1, 2, 16, 64), _good(), _good()), ValueError, "aligned"),
    (lambda: ("q", _good(), _good()), TypeError, "torch.Tensor"),
])
def test_bad_tensors(make, exc, match):
    q, k, v = make()
    with pytest.raises(exc, match=match):
        flashmlir.attention(q, k, v)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(window=(-2, 0)), ValueError, "window"),
    (dict(causal=True, window=(8, 4)), ValueError, "right bound must be 0"),
    (dict(scale=0.0), ValueError, "scale"),
    (dict(scale=-1.0), ValueError, "scale"),
    (dict(softcap=0.0), ValueError, "softcap"),
    (dict(softcap=-5.0), ValueError, "softcap"),
    (dict(layout="sbhd"), ValueError, "layout"),
    (dict(causal="yes"), TypeError, "causal"),
])
def test_bad_options(kw, exc, match):
    with pytest.raises(exc, match=match):
        flashmlir.attention(_good(), _good(), _good(), **kw)


def test_bad_out_buffers():
    q = _good()
    with pytest.raises(ValueError, match="out must have shape"):
        flashmlir.attention(q, q, q, out=torch.empty(1, 2, 16, 32, device="cuda", dtype=q.dtype))
    with pytest.raises(ValueError, match="out must be"):
        flashmlir.attention(q, q, q, out=torch.empty_like(q, dtype=torch.float16))
    with pytest.raises(ValueError, match="lse must be float32"):
        flashmlir.attention(q, q, q, lse=torch.empty(1, 2, 16, device="cuda"
                                                     ).to(torch.float64))
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention(q.clone().requires_grad_(), q, q, out=torch.empty_like(q))


def test_head_dim_without_kernel(tmp_path):
    # An empty registry and no compiler: a clear ValueError that lists what exists.
    reg = _kernels.KernelRegistry([str(tmp_path)], cache=str(tmp_path / "c"), compiler=None)
    prev = _kernels.set_default_registry(reg)
    try:
        q = _good((1, 2, 16, 200))
        with pytest.raises(ValueError, match="no kernel for kind=forward dtype=bf16 head_dim=200"):
            flashmlir.attention(q, q, q)
    finally:
        _kernels.set_default_registry(prev)


# Scale, softcap and window values no kernel was compiled for: they are
# run-time kernel parameters, so the kernels of TEST_OPTIONS serve them (one
# window kernel per causal-or-not; -1 leaves a side unbounded at run time).
# (The softcap kernels of TEST_OPTIONS are non-causal.)
RUNTIME_SCALARS = ({"scale": 0.07}, {"scale": 0.3, "causal": True},
                   {"softcap": 7.5, "scale": 0.07}, {"softcap": 50.0, "scale": 0.3})
RUNTIME_WINDOWS = ({"window": (123, 45)}, {"window": (0, 0)}, {"window": (-1, 200)},
                   {"window": (300, -1), "scale": 0.07}, {"causal": True, "window": (77, 0)},
                   {"causal": True, "window": (0, 0)})


def _built_request(dtype, d, req):
    """The request of the TEST_OPTIONS kernel that serves `req`: the same
    mask kind and softcap presence, the values the set was compiled with."""
    window = None
    if _manifest.is_windowed(req.mask):   # right = 0 is the causal side: (0, 0) is causal
        window = (255, 0) if req.causal else (97, 31)
    return _kernels.KernelRequest.make("forward", dtype, d, causal=req.causal, window=window,
                                       softcap=2.0 if req.softcap is not None else None)


@pytest.mark.parametrize("nq,nk", [(17, 113), (1000, 1000), (4097, 1000)], ids=lambda x: str(x))
@pytest.mark.parametrize("opts", RUNTIME_SCALARS + RUNTIME_WINDOWS, ids=_opt_id)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward_runtime_values(dtype, d, opts, nq, nk):
    tdt = DTYPES[dtype]
    q, k, v = R.make_qkv(2, 4, 2, nq, nk, d, d, tdt, "bhsd",
                         seed=R.seed_for(dtype, d, _opt_id(opts), nq, nk))
    out, lse = run(q, k, v, **opts)
    check(out, lse, q, k, v, "bhsd", f"{dtype} D={d} {_opt_id(opts)} Nq={nq} Nk={nk}", **opts)
    # One kernel serves every value: the kernel built for other values.
    req = _kernels.KernelRequest.make("forward", dtype, d, causal=opts.get("causal", False),
                                      window=opts.get("window"), softcap=opts.get("softcap"),
                                      scale=opts.get("scale"))
    found = _kernels.default_registry().find(_built_request(dtype, d, req),
                                             torch.cuda.get_device_capability())
    assert req.matches(found)
