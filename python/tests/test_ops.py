"""The custom ops and the public entry points on CPU tensors (the PyTorch
reference path; needs torch, no GPU): the reference against float64 and
autograd, torch.library.opcheck of the ops (schema, fake implementations
against the real outputs' shapes and strides, autograd registration),
torch.compile(fullgraph=True) of forward and backward with dynamic shapes
and no graph break, and the SDPA- and FlashAttention-shaped entry points
against torch's SDPA and the op's semantics."""

import math

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import _interface, _ops, _reference  # noqa: E402

import gpu_ref as R  # noqa: E402

BF, F16 = torch.bfloat16, torch.float16
OPTIONS = [{}, {"causal": True}, {"window": (20, 7)}, {"causal": True, "window": (30, 0)},
           {"softcap": 2.0}, {"scale": 0.3}]


def qkv(b, hq, hkv, nq, nk, d, dv=None, layout="bhsd", dtype=BF, seed=0, grad=False):
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, dv or d, dtype, layout, device="cpu", seed=seed)
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


def _id(o):
    return ",".join(f"{k}={v}" for k, v in o.items()).replace(" ", "") or "full"


# -- the reference ---------------------------------------------------------------------------

@pytest.mark.parametrize("opts", OPTIONS, ids=_id)
@pytest.mark.parametrize("nq,nk", [(1, 1), (17, 113), (113, 17), (64, 64)])
def test_reference_forward_and_backward(opts, nq, nk):
    q, k, v = qkv(2, 4, 2, nq, nk, 32, 48, seed=nq + nk, grad=True)
    out, lse = flashmlir.attention(q, k, v, return_lse=True, **opts)
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    R.check(out.detach(), lse, q.detach(), k.detach(), v.detach(), mask, opts.get("scale"),
            opts.get("softcap"), what=_id(opts))
    dout = R.make_dout(out.shape, BF, device="cpu", seed=3)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    R.check_grads(grads, q.detach(), k.detach(), v.detach(), dout, mask, opts.get("scale"),
                  opts.get("softcap"), what=_id(opts))


def test_reference_backward_is_autograd_of_the_forward():
    q, k, v = qkv(1, 4, 1, 50, 70, 32, seed=9, grad=True)
    dout = torch.randn(1, 4, 50, 32).to(BF)
    for mask, softcap in (((-1, 0), None), ((10, 3), 1.5)):
        o, _ = _reference.attention(q, k, v, mask, 0.2, softcap)
        want = torch.autograd.grad(o, (q, k, v), dout)
        got = _reference.attention_backward(dout, q.detach(), k.detach(), v.detach(), mask,
                                            0.2, softcap)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and torch.allclose(a.float(), b.float(), atol=2e-2)


def test_reference_edge_cases():
    q = torch.randn(2, 4, 10, 32).to(BF)
    k0 = torch.empty(2, 4, 0, 32, dtype=BF)
    out, lse = flashmlir.attention(q, k0, k0, return_lse=True)
    assert (out == 0).all() and (lse == math.inf).all()
    # rows that see no key (Nq > Nk, causal): exactly 0 and +inf, no NaN in gradients
    q, k, v = qkv(1, 2, 2, 30, 10, 32, grad=True)
    out, lse = flashmlir.attention(q, k, v, causal=True, return_lse=True)
    assert (out[:, :, :20] == 0).all() and (lse[:, :, :20] == math.inf).all()
    grads = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert all(torch.isfinite(g).all() for g in grads) and (grads[0][:, :, :20] == 0).all()


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_layout_and_out_buffers(layout):
    q, k, v = qkv(2, 4, 2, 20, 30, 32, layout=layout)
    ref = flashmlir.attention(q, k, v, causal=True, layout=layout)
    assert ref.is_contiguous() and ref.shape == q.shape
    out = torch.full_like(ref, math.nan)
    lse = torch.full((2, 4, 20), math.nan)
    res = flashmlir.attention(q, k, v, causal=True, layout=layout, out=out, lse=lse,
                              return_lse=True)
    assert res[0] is out and res[1] is lse and torch.equal(out, ref)


def test_cpu_errors_match_the_gpu_path():
    q, k, v = qkv(1, 2, 2, 16, 16, 64)
    with pytest.raises(TypeError, match="float16 and bfloat16"):
        flashmlir.attention(q.float(), k.float(), v.float())
    with pytest.raises(ValueError, match="multiple"):
        flashmlir.attention(torch.randn(1, 3, 16, 64).to(BF), k, v)
    with pytest.raises(ValueError, match="right bound must be 0"):
        flashmlir.attention(q, k, v, causal=True, window=(3, 3))
    with pytest.raises(TypeError, match="causal must be a bool"):
        flashmlir.attention(q, k, v, causal="yes")
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention(q.requires_grad_(), k, v, out=torch.empty_like(q))


# -- the custom ops ----------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_opcheck(layout):
    q, k, v = qkv(2, 4, 2, 24, 40, 32, 48, layout=layout, grad=True)
    args = (q, k, v, True, 16, 0, None, 2.0, layout, False)
    torch.library.opcheck(_ops.attention_forward, args)
    out, lse = _ops.attention_forward(*args)
    dout = torch.randn_like(out)
    bargs = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse) + args[3:]
    torch.library.opcheck(_ops.attention_backward, bargs)
    o, l = torch.empty_like(out), torch.empty_like(lse)
    torch.library.opcheck(_ops.attention_forward_out, (q.detach(), k.detach(), v.detach(), o, l)
                          + args[3:9])


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_fake_outputs_match_real(layout):
    from torch._subclasses.fake_tensor import FakeTensorMode
    q, k, v = qkv(2, 8, 2, 24, 40, 32, 16, layout=layout)
    out, lse = flashmlir.attention(q, k, v, causal=True, layout=layout, return_lse=True)
    dq, dk, dv = _ops.attention_backward(torch.randn_like(out), q, k, v, out, lse, True, -1, -1,
                                         None, None, layout, False)
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        fo, fl = flashmlir.attention(fq, fk, fv, causal=True, layout=layout, return_lse=True)
        fgrads = _ops.attention_backward(torch.empty_like(fo), fq, fk, fv, fo, fl, True, -1, -1,
                                         None, None, layout, False)
    for real, fake in zip((out, lse, dq, dk, dv), (fo, fl) + tuple(fgrads)):
        assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)
    # meta tensors too (e.g. a model built on the meta device)
    mo = flashmlir.attention(q.to("meta"), k.to("meta"), v.to("meta"), layout=layout)
    assert mo.device.type == "meta" and mo.shape == out.shape and mo.stride() == out.stride()
    k16 = k[..., :16].contiguous()
    with FakeTensorMode() as mode:   # the fake implementation checks too
        with pytest.raises(ValueError, match="same head dim"):
            flashmlir.attention(mode.from_tensor(q), mode.from_tensor(k16),
                                mode.from_tensor(v), layout=layout)


def _compile_check(fn, make, backend="aot_eager", shapes=((37, 45), (53, 61))):
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    cf = torch.compile(fn, fullgraph=True, dynamic=True, backend=backend)
    for i, (nq, nk) in enumerate(shapes):
        ins = make(nq, nk, i)
        got = cf(*ins)
        got_g = torch.autograd.grad(got, ins)
        want = fn(*ins)
        want_g = torch.autograd.grad(want, ins)
        assert torch.allclose(got, want, rtol=1e-3, atol=1e-3), (got, want)
        for a, b in zip(got_g, want_g):
            assert torch.allclose(a.float(), b.float(), atol=2e-2), (a - b).abs().max()
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] <= 1


@pytest.mark.parametrize("opts", [{"causal": True}, {"window": (16, 4), "softcap": 3.0}],
                         ids=_id)
def test_compile_fullgraph_forward_backward(opts):
    def f(q, k, v):
        o = flashmlir.attention(q, k, v, layout="bshd", **opts)
        return (o.float() * o.float()).sum()
    _compile_check(f, lambda nq, nk, i: qkv(2, 4, 2, nq, nk, 32, layout="bshd", seed=i,
                                            grad=True))


def test_compile_fullgraph_entry_points():
    def f(q, k, v):
        a = flashmlir.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        b, lse = flashmlir.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), causal=True, return_lse=True)
        return a.float().sum() + b.float().pow(2).sum() + lse[lse.isfinite()].sum()
    _compile_check(f, lambda nq, nk, i: qkv(1, 4, 2, nq, nq, 32, seed=i, grad=True),
                   shapes=((40, 40), (56, 56)))


def test_compile_inductor():
    def f(q, k, v):
        return flashmlir.attention(q, k, v, causal=True).float().sum()
    _compile_check(f, lambda nq, nk, i: qkv(1, 2, 1, nq, nk, 32, seed=i, grad=True),
                   backend="inductor")


# -- scaled_dot_product_attention --------------------------------------------------------

def _sdpa_ref(q, k, v, **kw):
    out = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                           **kw)
    return out


@pytest.mark.parametrize("nq,nk", [(33, 33), (20, 50), (50, 20)])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("hkv", [4, 2])
def test_sdpa_matches_torch(nq, nk, is_causal, hkv):
    q, k, v = qkv(2, 4, hkv, nq, nk, 32, seed=nq * nk + hkv)
    got = flashmlir.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=0.2,
                                                 enable_gqa=hkv != 4)
    want = _sdpa_ref(q, k, v, is_causal=is_causal, scale=0.2, enable_gqa=hkv != 4)
    assert got.shape == want.shape and got.dtype == q.dtype
    assert (got.double() - want).abs().max() < 2e-2   # bf16 output rounding
    ours_br = flashmlir.attention(q, k, v, causal=is_causal, scale=0.2)  # bottom-right
    if is_causal and nq != nk:
        assert not torch.equal(ours_br, got)


def test_sdpa_gradients_and_3d():
    q, k, v = qkv(1, 2, 2, 30, 50, 32, grad=True)
    out = flashmlir.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = torch.autograd.grad(out.float().sum(), (q, k, v))
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    want = torch.autograd.grad(_sdpa_ref(qd, kd, vd, is_causal=True).sum(), (qd, kd, vd))
    for a, b in zip(g, want):
        assert (a.double() - b).abs().max() < 5e-2
    q3, k3, v3 = (t.detach()[:, 0] for t in (q, k, v))
    out3 = flashmlir.scaled_dot_product_attention(q3, k3, v3)
    assert out3.shape == (1, 30, 32)
    assert (out3.double() - _sdpa_ref(q3, k3, v3)).abs().max() < 2e-2


@pytest.mark.parametrize("kw,exc,match", [
    (dict(attn_mask=torch.ones(30, 50, dtype=torch.bool)), flashmlir.UnsupportedError,
     "does not support attn_mask"),
    (dict(dropout_p=0.1), NotImplementedError, "dropout_p=0.1"),
])
def test_sdpa_unsupported(kw, exc, match):
    q, k, v = qkv(1, 2, 2, 30, 50, 32)
    with pytest.raises(exc, match=match):
        flashmlir.scaled_dot_product_attention(q, k, v, **kw)


def test_sdpa_errors():
    q, k, v = qkv(1, 4, 2, 30, 50, 32)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        flashmlir.scaled_dot_product_attention(q, k, v)
    with pytest.raises(NotImplementedError, match="float16 and bfloat16"):
        flashmlir.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True)
    with pytest.raises(NotImplementedError, match="4 dimensions"):
        flashmlir.scaled_dot_product_attention(q[None], k[None], v[None])


# -- flash_attn_func ----------------------------------------------------------------------

@pytest.mark.parametrize("kw,opts", [
    (dict(), {}),
    (dict(causal=True), {"causal": True}),
    (dict(window_size=(8, 3)), {"window": (8, 3)}),
    (dict(causal=True, window_size=(8, 3)), {"causal": True, "window": (8, 0)}),  # as FA2
    (dict(window_size=(-1, 0)), {"causal": True}),
    (dict(softcap=2.0, softmax_scale=0.3), {"softcap": 2.0, "scale": 0.3}),
    (dict(softcap=0.0), {}),
], ids=repr)
def test_flash_attn_func(kw, opts):
    q, k, v = qkv(2, 4, 2, 20, 35, 32, layout="bshd", seed=len(kw))
    out = flashmlir.flash_attn_func(q, k, v, **kw)
    want, want_lse = flashmlir.attention(q, k, v, layout="bshd", return_lse=True, **opts)
    assert out.shape == (2, 20, 4, 32) and torch.equal(out, want)
    out2, lse = flashmlir.flash_attn_func(q, k, v, return_lse=True, **kw)
    assert torch.equal(lse, want_lse) and lse.shape == (2, 4, 20)
    out3, lse3, probs = flashmlir.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    assert probs is None and torch.equal(lse3, want_lse)


def test_flash_attn_packed_and_errors():
    qkv5 = torch.randn(2, 30, 3, 4, 32).to(BF)
    out = flashmlir.flash_attn_qkvpacked_func(qkv5, causal=True)
    q, k, v = qkv5.unbind(2)
    assert torch.equal(out, flashmlir.flash_attn_func(q, k, v, causal=True))
    kv = torch.randn(2, 40, 2, 2, 32).to(BF)
    out = flashmlir.flash_attn_kvpacked_func(q, kv, deterministic=True)
    assert torch.equal(out, flashmlir.flash_attn_func(q, *kv.unbind(2)))
    with pytest.raises(NotImplementedError, match="dropout_p"):
        flashmlir.flash_attn_func(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        flashmlir.flash_attn_func(q, k, v, alibi_slopes=torch.ones(4))
    with pytest.raises(ValueError, match=r"qkv must be \[B, N, 3, H, D\]"):
        flashmlir.flash_attn_qkvpacked_func(q)
