"""The torch side of attention() and its backward on CPU tensors, with the
kernels emulated in torch (skipped without torch; needs no GPU).

Only the driver is replaced: manifests are parsed as usual, the workspace
is allocated and every launch is prepared and packed by the real code; the
emulated kernels then see exactly the tensors their manifest parameters
name. This checks the layouts (bshd tensors as transposed views), the
allocation of dq, dk, dv and the workspace, the order of the kernels, the
handling of dout, the poison hook and the edge cases, and that the
gradient check of the GPU tests (gpu_ref.check_grads) accepts a correct
backward and rejects wrong ones.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from flashmlir import _interface, _kernels  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402
from flashmlir import _validate as V  # noqa: E402
from flashmlir._errors import LaunchError  # noqa: E402

import gpu_ref as R  # noqa: E402
from helpers import backward_example  # noqa: E402

BF = torch.bfloat16


# -- emulated kernels ----------------------------------------------------------------

def _scores(q, k, mask, scale, softcap):
    """Scores [B, Hq, Nq, Nk] in f32 (k expanded over GQA groups), masked to -inf."""
    g = q.shape[1] // k.shape[1]
    kk = k.float().repeat_interleave(g, dim=1)
    s = torch.matmul(q.float(), kk.transpose(-1, -2)) * scale
    t = None
    if softcap:
        t = torch.tanh(s / softcap)
        s = softcap * t
    vis = R.visible(q.shape[2], k.shape[2], mask, q.device)
    return s.masked_fill(~vis, -math.inf), t


def _group_sum(x, hkv):
    b, hq, n, d = x.shape
    return x.view(b, hkv, hq // hkv, n, d).sum(2)


class Emulator:
    """Stands in for the GPU: runs each launch by entry name on the tensors
    its manifest parameters name, and logs what it ran."""

    def __init__(self, mask, scale, softcap):
        self.mask, self.scale, self.softcap = mask, scale, softcap
        self.ran = []
        self.args = None

    def forward(self, kernel, args, env, stream):
        q, k, v = args["q"], args["k"], args["v"]
        s, _ = _scores(q, k, self.mask, self.scale, self.softcap)
        lse = torch.logsumexp(s, -1)
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        g = q.shape[1] // k.shape[1]
        out = torch.matmul(p, v.float().repeat_interleave(g, dim=1))
        args["out"].copy_(out)
        args["lse"].copy_(lse.masked_fill(lse == -math.inf, math.inf))
        self.ran.append(kernel.spec.entry)

    def backward(self, preps, stream):
        for prep in preps:
            spec = prep.kernel.spec
            a = {p.name: self.args[p.name] for p in spec.params if p.is_memref}
            getattr(self, "_" + spec.entry)(a)
            self.ran.append(spec.entry)

    def _fa_bwd_preprocess_kernel(self, a):
        a["delta"].copy_((a["out"].float() * a["dout"].float()).sum(-1))
        if "dq_accum" in a:
            a["dq_accum"].zero_()

    def _ds(self, a):
        s, t = _scores(a["q"], a["k"], self.mask, self.scale, self.softcap)
        p = torch.exp(s - a["lse"][..., None])  # lse = +inf on rows that see no key: p = 0
        g = a["q"].shape[1] // a["k"].shape[1]
        vv = a["v"].float().repeat_interleave(g, dim=1)
        dp = torch.matmul(a["dout"].float(), vv.transpose(-1, -2))
        ds = p * (dp - a["delta"][..., None])
        if t is not None:
            ds = ds * (1 - t * t)
        return p, ds

    def _fa_bwd_kernel(self, a):
        p, ds = self._ds(a)
        hkv = a["k"].shape[1]
        a["dv"].copy_(_group_sum(torch.matmul(p.transpose(-1, -2), a["dout"].float()), hkv))
        dk = torch.matmul(ds.transpose(-1, -2), a["q"].float()) * self.scale
        a["dk"].copy_(_group_sum(dk, hkv))
        if "dq_accum" in a:
            a["dq_accum"].add_(self._dq(a, ds))

    def _dq(self, a, ds):
        g = a["q"].shape[1] // a["k"].shape[1]
        return torch.matmul(ds, a["k"].float().repeat_interleave(g, dim=1)) * self.scale

    def _fa_bwd_dq_convert_kernel(self, a):
        a["dq"].copy_(a["dq_accum"])

    def _fa_bwd_dq_kernel(self, a):
        a["dq"].copy_(self._dq(a, self._ds(a)[1]))


class _Loaded:
    def __init__(self, spec):
        self.spec = spec
        self.device = type("Dev", (), {"max_grid": (2 ** 31 - 1, 65535, 65535)})()


@pytest.fixture
def emu(monkeypatch):
    """Installs the emulation; returns a function that builds the _Call and
    the emulator for given options."""
    state = {}

    def find_spec(c, kind="forward"):
        if kind == "forward":
            return "forward", 0
        left, right = c.opts.mask
        m = backward_example(c.deterministic, dtype=_interface._DTYPES[c.dtype], d=c.dims.D,
                             causal=right == 0, window=(left, right), softcap=c.opts.softcap,
                             scale=c.opts.scale)
        m["value_head_dim"] = c.dims.Dv
        for k in m["kernels"]:
            for p in k["params"]:
                if p["name"] in ("v", "dv", "out", "dout"):
                    p["dims"][-1] = "Dv"
        state["spec"] = M.parse_manifest(m, check_files=False)
        return state["spec"], 0

    def find_kernel(c, kind="forward"):
        return type("K", (), {"spec": type("S", (), {"entry": "fa_fwd_kernel"})()})()

    real_prepare = _interface._bwd.prepare

    def prepare(spec, kernels, tensors, env, alloc, scalars=None):
        ws, preps = real_prepare(spec, kernels, tensors, env, alloc, scalars)
        state["emu"].args = dict(tensors, **ws)
        state["workspace"] = {n: (tuple(t.shape), t.dtype) for n, t in ws.items()}
        return ws, preps

    monkeypatch.setattr(_interface, "_find_spec", find_spec)
    monkeypatch.setattr(_interface, "_find_kernel", find_kernel)
    monkeypatch.setattr(_interface, "_device_ordinal", lambda device: 0)
    monkeypatch.setattr(_kernels, "load_kernels",
                        lambda spec, ordinal: tuple(_Loaded(k) for k in spec.kernels))
    monkeypatch.setattr(_interface._bwd, "prepare", prepare)
    monkeypatch.setattr(_interface._bwd, "launch", lambda preps, s: state["emu"].backward(preps, s))
    monkeypatch.setattr(_interface._launch, "launch",
                        lambda *a: state["emu"].forward(*a))
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda *a: type("St", (), {"cuda_stream": 0})())
    monkeypatch.setenv(_interface.POISON_ENV, "1")

    def setup(q, k, v, layout="bhsd", deterministic=False, causal=False, window=None,
              scale=None, softcap=None):
        dims = V.check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), layout)
        opts = V.check_options(causal, window, scale, softcap, dims.D)
        call = _interface._Call(dims, opts, q.dtype, q.device, layout, deterministic)
        state["emu"] = Emulator(opts.mask, opts.scale, opts.softcap)
        return call, state["emu"]

    setup.state = state
    return setup


def qkv(b, hq, hkv, nq, nk, d, dv, layout="bhsd", seed=0):
    g = torch.Generator()
    g.manual_seed(seed)

    def mk(h, n, dd):
        shape = (b, h, n, dd) if layout == "bhsd" else (b, n, h, dd)
        return torch.randn(shape, generator=g).to(BF).requires_grad_()
    q, k, v = mk(hq, nq, d), mk(hkv, nk, d), mk(hkv, nk, dv)
    oshape = (b, hq, nq, dv) if layout == "bhsd" else (b, nq, hq, dv)
    return q, k, v, torch.randn(oshape, generator=g).to(BF)


def run(emu, q, k, v, dout, **kw):
    call, e = emu(q, k, v, **kw)
    out, lse = _interface._FlashAttention.apply(q, k, v, call)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    return out, lse, (dq, dk, dv), e


def check(grads, q, k, v, dout, layout="bhsd", causal=False, window=None, scale=None,
          softcap=None, **kw):
    b = lambda t: R.bhsd(t.detach(), layout)
    return R.check_grads(tuple(b(g) for g in grads), b(q), b(k), b(v), b(dout),
                         R.canonical(causal, window), scale, softcap, what=str(kw))


# -- tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (20, 7)},
                                  {"causal": True, "window": (30, 0)}, {"softcap": 2.0},
                                  {"scale": 0.3}], ids=repr)
@pytest.mark.parametrize("nq,nk", [(1, 1), (17, 113), (113, 17), (100, 100)])
def test_backward_emulated(emu, nq, nk, opts, deterministic):
    q, k, v, dout = qkv(2, 4, 2, nq, nk, 32, 32, seed=nq * 7 + nk)
    out, lse, grads, e = run(emu, q, k, v, dout, deterministic=deterministic, **opts)
    check(grads, q, k, v, dout, **opts)
    entries = ["fa_bwd_preprocess_kernel", "fa_bwd_kernel",
               "fa_bwd_dq_kernel" if deterministic else "fa_bwd_dq_convert_kernel"]
    assert e.ran == ["fa_fwd_kernel"] + entries
    ws = emu.state["workspace"]
    assert ws["delta"] == ((2, 4, nq), torch.float32)
    if deterministic:
        assert set(ws) == {"delta"}
    else:
        assert ws["dq_accum"] == ((2, 4, nq, 32), torch.float32)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2), (4, 1)])
def test_layouts_and_heads(emu, layout, hq, hkv):
    q, k, v, dout = qkv(2, hq, hkv, 40, 70, 32, 48, layout, seed=hq + hkv)
    out, lse, grads, e = run(emu, q, k, v, dout, layout=layout, causal=True)
    assert out.shape == dout.shape and lse.shape == (2, hq, 40)
    for g, t in zip(grads, (q, k, v)):
        assert g.shape == t.shape and g.dtype == BF and g.is_contiguous()  # caller's layout
    # the kernels saw [B, H, N, D] views of the caller's tensors
    assert e.args["dq"].shape == (2, hq, 40, 32) and e.args["dv"].shape == (2, hkv, 70, 48)
    if layout == "bshd":
        assert e.args["q"].stride() == (40 * hq * 32, 32, hq * 32, 1)
        assert e.args["dq"].data_ptr() == grads[0].data_ptr()
    check(grads, q, k, v, dout, layout, causal=True)


def test_expanded_and_strided_dout(emu):
    q, k, v, _ = qkv(1, 2, 2, 30, 50, 32, 32, seed=3)
    call, e = emu(q, k, v, causal=True)
    out, _ = _interface._FlashAttention.apply(q, k, v, call)
    out.float().sum().backward()  # dout: ones, expanded, cast
    ones = torch.ones_like(out)
    check((q.grad, k.grad, v.grad), q, k, v, ones, causal=True)
    expanded = torch.ones(1, 1, 1, 1, dtype=BF).expand(out.shape)
    assert _interface._check_dout(expanded, call).is_contiguous()
    wide = torch.randn(1, 2, 30, 64).to(BF)[..., ::2]
    fixed = _interface._check_dout(wide, call)
    assert fixed.is_contiguous() and torch.equal(fixed, wide)
    ok = torch.randn(1, 2, 30, 32).to(BF)
    assert _interface._check_dout(ok, call) is ok
    base = torch.randn(2 * 30 * 32 + 1).to(BF)
    odd = base[1:].view(1, 2, 30, 32)  # contiguous, but 2 bytes off alignment
    if base.data_ptr() % 16 == 0:
        fixed = _interface._check_dout(odd, call)
        assert fixed.data_ptr() % 16 == 0 and torch.equal(fixed, odd)
    # through autograd too
    out, _ = _interface._FlashAttention.apply(q, k, v, call)
    grads = torch.autograd.grad(out, (q, k, v), odd)
    check(grads, q, k, v, odd, causal=True)


@pytest.mark.parametrize("make,exc,match", [
    (lambda o: o[:, :, :-1], ValueError, r"gradient of out must have shape \(1, 2, 30, 32\)"),
    (lambda o: o.float(), TypeError, "gradient of out must be torch.bfloat16, got torch.float32"),
    (lambda o: [1], TypeError, "dout must be a torch.Tensor"),
])
def test_bad_dout(emu, make, exc, match):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    call, _ = emu(q, k, v)
    with pytest.raises(exc, match=match):
        _interface._backward(q, k, v, None, None, make(dout), call)


def test_poison_reaches_unwritten_elements(emu, monkeypatch):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    call, e = emu(q, k, v)
    monkeypatch.setattr(_interface._bwd, "launch", lambda preps, s: None)
    out, _ = _interface._FlashAttention.apply(q, k, v, call)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert all(g.isnan().all() for g in grads)
    with pytest.raises(AssertionError, match="not finite"):
        check(grads, q, k, v, dout)
    # ... and the workspace: skipping the kernel that initialises delta shows
    monkeypatch.setattr(_interface._bwd, "launch", lambda preps, s: e.backward(preps[1:], s))
    out, _ = _interface._FlashAttention.apply(q, k, v, call)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert grads[1].isnan().any()
    # without the hook nothing is filled
    monkeypatch.delenv(_interface.POISON_ENV)
    assert not _interface.poison_grads()


def test_check_grads_rejects_wrong_backwards(emu):
    q, k, v, dout = qkv(2, 4, 2, 200, 200, 64, 64, seed=11)
    out, lse, (dq, dk, dv), e = run(emu, q, k, v, dout, causal=True)
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
    _, _, (gq, gk, gv), _ = run(emu, q2, k2, v2, dout2, causal=True)
    assert (gq[:, :, :30] == 0).all()
    check((gq, gk, gv), q2, k2, v2, dout2, causal=True)
    gq = gq.clone()
    gq[0, 0, 0, 0] = 1e-6
    with pytest.raises(AssertionError, match="dq must be exactly 0"):
        check((gq, gk, gv), q2, k2, v2, dout2, causal=True)


def test_no_keys_and_empty(emu):
    q = torch.randn(2, 4, 10, 32).to(BF).requires_grad_()
    k0 = torch.empty(2, 4, 0, 32, dtype=BF, requires_grad=True)
    call, e = emu(q, k0, k0)
    out, lse = _interface._FlashAttention.apply(q, k0, k0, call)
    assert (out == 0).all() and (lse == math.inf).all() and e.ran == []
    dq, dk = torch.autograd.grad(out, (q, k0), torch.randn_like(out))
    assert (dq == 0).all() and dk.shape == k0.shape and e.ran == []
    for sq, sk in [((2, 4, 0, 32), (2, 4, 10, 32)), ((0, 4, 10, 32), (0, 4, 10, 32)),
                   ((2, 0, 10, 32), (2, 2, 10, 32))]:
        qq = torch.randn(sq).to(BF).requires_grad_()
        kk = torch.randn(sk).to(BF).requires_grad_()
        call, e = emu(qq, kk, kk, causal=True)
        out, _ = _interface._FlashAttention.apply(qq, kk, kk, call)
        gq, gk = torch.autograd.grad(out, (qq, kk), torch.ones_like(out))
        assert gq.shape == qq.shape and gk.shape == kk.shape and (gk == 0).all()
        assert e.ran == []


def test_only_requested_grads(emu):
    q, k, v, dout = qkv(1, 2, 2, 20, 30, 32, 32)
    call, _ = emu(q, k, v)
    out, _ = _interface._FlashAttention.apply(q, k.detach(), v.detach(), call)
    (dq,) = torch.autograd.grad(out, (q,), dout)
    assert dq.shape == q.shape


def test_launch_errors_surface(emu, monkeypatch):
    q, k, v, dout = qkv(1, 2, 2, 20, 30, 32, 32)
    call, _ = emu(q, k, v)
    out, _ = _interface._FlashAttention.apply(q, k, v, call)
    # a manifest whose dq dims disagree with the tensors: a LaunchError, nothing run
    real = _interface._find_spec

    def bad_spec(c, kind="forward"):
        spec, o = real(c, kind)
        if kind == "backward":
            m = dict(spec.raw)
            m["workspace"] = [dict(w) for w in m["workspace"]]
            m["workspace"][1]["dims"] = ["B", "Hq", "Nq + 1", "D"]
            spec = M.parse_manifest(m, check_files=False)
        return spec, o
    monkeypatch.setattr(_interface, "_find_spec", bad_spec)
    with pytest.raises(LaunchError, match="parameter dq_accum: sizes"):
        torch.autograd.grad(out, (q, k, v), dout)
