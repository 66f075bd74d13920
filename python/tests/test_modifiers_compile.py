"""flashmlir.attention(score_mod=, mask_mod=) under torch.compile, on CPU
tensors (needs torch, no GPU): fullgraph with no graph break, forward and
backward, dynamic shapes, through the custom ops with modifiers
(torch.ops.flashmlir.attention_forward_mod / attention_backward_mod, see
_ops.py) whose CPU implementation evaluates the traced regions; compiled
against eager and against the PyTorch reference on the Python functions;
the fake implementations under FakeTensorMode and on meta tensors;
torch.library.opcheck. The same ops on the fake GPU (the kernels) are in
test_modifiers_fake.py."""

import math

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import _interface, _modifiers, _ops, _reference  # noqa: E402

from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

BF = torch.bfloat16
SLOPES = torch.tensor([0.5, 0.25, 0.125, 0.0625])
MAX_N = 64
DOCS = (torch.arange(MAX_N) // 13).to(torch.int32)   # the document of each position


def alibi(s, b, h, q_idx, kv_idx):
    return s + SLOPES[h] * (kv_idx - q_idx)


def document_causal(b, h, q_idx, kv_idx):
    return (DOCS[q_idx] == DOCS[kv_idx]) & (kv_idx <= q_idx)


def qkv(b, hq, hkv, nq, nk=None, d=32, layout="bhsd", seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)

    def make(h, n):
        shape = (b, h, n, d) if layout == "bhsd" else (b, n, h, d)
        return torch.randn(shape, generator=g).to(BF).requires_grad_(grad)
    return make(hq, nq), make(hkv, nk or nq), make(hkv, nk or nq)


def compiled(fn, dynamic=True):
    """fn under torch.compile(fullgraph=True) with aot_eager (forward and
    backward graphs), and the backend, which keeps dynamo's graphs."""
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounterWithBackend("aot_eager")
    return torch.compile(fn, backend=cnt, fullgraph=True, dynamic=dynamic), cnt


def graphs():
    """How many graphs dynamo made (a compile attempt that restarts, as one
    specializing a float does, counts once), checking it broke none."""
    assert not counters["graph_break"], dict(counters["graph_break"])
    return counters["stats"]["unique_graphs"]


def traced_ops(cnt):
    """Names of the functions the captured graphs call."""
    return {str(n.target) for g in cnt.graphs for n in g.graph.nodes if n.op == "call_function"}


def noise(like, seed=8):
    """Standard normal values shaped and typed like `like` (the global
    generator left alone: later tests' inputs stay as they were)."""
    return torch.randn(like.shape, generator=torch.Generator().manual_seed(seed)).to(like.dtype)


def close(got, want, atol=2e-2):
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=atol)


def reference(q, k, v, score_mod, mask_mod, mask=(-1, -1), softcap=None):
    """out of the PyTorch reference on the Python functions (differentiable
    by autograd), bhsd."""
    return _reference.attention_modified(q, k, v, mask, 1 / math.sqrt(q.shape[-1]), softcap,
                                         score_mod, mask_mod)[0]


@pytest.fixture
def calls(monkeypatch):
    """How often the ops' real implementations ran (forward, backward)."""
    n = {"forward": 0, "backward": 0}
    for kind, name in (("forward", "modified_forward_impl"),
                       ("backward", "modified_backward_impl")):
        def counted(*args, _fn=getattr(_interface, name), _kind=kind):
            n[_kind] += 1
            return _fn(*args)
        monkeypatch.setattr(_interface, name, counted)
    return n


def test_compile_forward_backward_dynamic(calls):
    """ALiBi reading a captured tensor and a document-causal mask: one graph
    for two sequence lengths (the captures' shapes stay), the ops in it
    (not the reference), forward and backward equal to eager and to the
    reference on the Python functions."""
    def f(q, k, v):
        o = flashmlir.attention(q, k, v, score_mod=alibi, mask_mod=document_causal)
        return (o.float() ** 2).sum()

    cf, cnt = compiled(f)
    for n, seed in ((37, 1), (53, 2)):
        q, k, v = qkv(2, 4, 2, n, seed=seed)
        got = cf(q, k, v)
        got_grads = torch.autograd.grad(got, (q, k, v))
        assert calls == {"forward": 1, "backward": 1}
        want = f(q, k, v)
        want_grads = torch.autograd.grad(want, (q, k, v))
        close(got, want, 1e-3)
        for a, b in zip(got_grads, want_grads):
            close(a, b, 1e-3)
        ref = reference(q, k, v, alibi, document_causal)
        close(got, (ref.float() ** 2).sum(), 1e-2)
        for a, b in zip(got_grads, torch.autograd.grad((ref.float() ** 2).sum(), (q, k, v))):
            close(a, b, 5e-2)
        calls.update(forward=0, backward=0)
    assert graphs() == 1
    assert "flashmlir.attention_forward_mod.default" in traced_ops(cnt)
    # The key travels on one line: inductor repeats the arguments in
    # comments of its generated Python (the CUDA backward failed to import).
    keys = [a for g in cnt.graphs for n in g.graph.nodes if n.op == "call_function"
            for a in n.args if isinstance(a, str) and "mask_mod(" in a]
    assert keys and all("\n" not in a and "\r" not in a for a in keys), keys


class RelativeBias(torch.nn.Module):
    """Modifiers made in forward: a closure over a buffer, an intermediate
    tensor (scaled slopes) and a 2-d table indexed with a tuple, a Python
    int of the module."""

    def __init__(self, heads=4, span=9):
        super().__init__()
        self.span = span
        self.register_buffer("slopes", SLOPES[:heads].clone())
        self.register_buffer("table", torch.randn(heads, 2 * MAX_N - 1,
                                                  generator=torch.Generator().manual_seed(5)))

    def forward(self, q, k, v):
        slopes = self.slopes * 2

        def score_mod(s, b, h, i, j):
            return s + slopes[h] * (j - i) + self.table[h, i - j + (MAX_N - 1)]

        def mask_mod(b, h, i, j):
            return (j <= i) & (i - j < self.span)
        o = flashmlir.attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod,
                                layout="bshd")
        return o.float().pow(2).sum()


def test_modifiers_made_inside_the_compiled_code(calls):
    m = RelativeBias()
    cm, _ = compiled(m)
    for n, seed in ((20, 3), (33, 4)):
        q, k, v = qkv(1, 4, 4, n, layout="bshd", seed=seed)
        got = cm(q, k, v)
        got_grads = torch.autograd.grad(got, (q, k, v))
        want = m(q, k, v)
        close(got, want, 1e-3)
        for a, b in zip(got_grads, torch.autograd.grad(want, (q, k, v))):
            close(a, b, 1e-3)
    assert calls == {"forward": 4, "backward": 4}   # compiled and eager, two lengths
    assert graphs() == 1


def test_captures_and_numbers_are_part_of_the_graph():
    """What a kernel builds in specializes the graph: a capture sized by the
    sequence (a graph per size), Python numbers the functions read (a graph
    per value; symbolic under dynamic=True until the tracer makes them
    constants: in arithmetic, as dynamo compares a symbolic int with a
    traced value itself, and fails); never a graph break."""
    def f(q, k, v, docs, bias: float, width: int):
        def score_mod(s, b, h, i, j):
            return s - bias * torch.abs(j - i)

        def mask_mod(b, h, i, j):
            return (docs[i] == docs[j]) & (j > i - width)
        return flashmlir.attention(q, k, v, causal=True, score_mod=score_mod,
                                   mask_mod=mask_mod)

    cf, _ = compiled(f)
    for n, bias, width, count in ((24, 0.5, 8, 1), (24, 0.5, 8, 1), (40, 0.5, 8, 2),
                                   (40, 0.25, 8, 3), (40, 0.25, 5, 4), (24, 0.5, 8, 4)):
        q, k, v = qkv(1, 2, 2, n, seed=n, grad=False)
        docs = DOCS[:n].clone()
        got = cf(q, k, v, docs, bias, width)
        close(got, f(q, k, v, docs, bias, width), 1e-3)
        assert graphs() == count


def test_compile_out_lse_and_options():
    def f(q, k, v, out, lse):
        return flashmlir.attention(q, k, v, window=(6, 0), softcap=3.0, scale=0.2,
                                   score_mod=alibi, return_lse=True, out=out, lse=lse)

    cf, _ = compiled(f, dynamic=False)
    q, k, v = qkv(1, 4, 2, 18, 25, grad=False)
    out, lse = torch.empty(1, 4, 18, 32, dtype=BF), torch.empty(1, 4, 18)
    o, l = cf(q, k, v, out, lse)
    assert o is out and l is lse
    want, want_lse = flashmlir.attention(q, k, v, window=(6, 0), softcap=3.0, scale=0.2,
                                         score_mod=alibi, return_lse=True)
    close(out, want, 1e-3)
    close(lse, want_lse, 1e-5)
    assert graphs() == 1


def test_capture_requiring_grad_compiles_the_reference():
    """As in eager: the reference on the Python functions (differentiable in
    the capture), traced by dynamo, still one graph."""
    slopes = SLOPES.clone().requires_grad_(True)

    def f(q, k, v):
        o = flashmlir.attention(q, k, v, score_mod=lambda s, b, h, i, j: s + slopes[h] * (j - i))
        return o.float().sum()

    cf, cnt = compiled(f, dynamic=False)
    q, k, v = qkv(1, 4, 2, 16)
    got = torch.autograd.grad(cf(q, k, v), (q, k, v, slopes))
    want = torch.autograd.grad(f(q, k, v), (q, k, v, slopes))
    for a, b in zip(got, want):
        close(a, b, 1e-3)
    assert got[3].abs().sum() > 0
    assert graphs() == 1
    assert not any("attention_forward_mod" in name for name in traced_ops(cnt))


def test_unsupported_python_under_compile():
    q, k, v = qkv(1, 2, 2, 8, grad=False)
    f = torch.compile(lambda q, k, v: flashmlir.attention(
        q, k, v, score_mod=lambda s, b, h, i, j: s if i > j else -s), fullgraph=True,
        backend="eager")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="Python control flow on a traced value"):
        f(q, k, v)


# -- the evaluated regions: what the ops run on CPU tensors ---------------------------------

SLOPES16 = SLOPES.to(torch.float16)


def many_ops(s, b, h, i, j):
    r = (j - i) // 3 + (i - j) % 4
    x = torch.where(r > 0, s * 0.5, -s) + torch.maximum(s, r * 0.1) + torch.minimum(s, 1.0 - s)
    x = torch.clamp(x, min=-30.0, max=50.0) - abs(i - j) / 8 + torch.exp(-torch.abs(s)) * 0.25
    x = x + torch.tanh(s / 3) * torch.sigmoid(s) + torch.sqrt(s * s + 1) + torch.log(s * s + 2)
    x = x + torch.sin(s) * torch.cos(s) + torch.exp2(-s * s) + torch.rsqrt(s * s + 1)
    return x + torch.log2(s * s + 1) / (2 + s * s) + SLOPES16[h] * s + torch.floor(s) * 0.1


def test_evaluated_regions_and_derivative_match_the_functions():
    """The custom ops have the traced IR only (their key): its evaluation and
    the score_mod's derivative by the chain rule over its operations,
    against the Python functions and autograd."""
    traced = _modifiers.trace(many_ops, document_causal)
    score_mod, mask_mod, score_mod_grad = traced.functions()
    grids = _modifiers.index_grids(2, 4, 13, 21, "cpu")
    s = (torch.randn(2, 4, 13, 21, generator=torch.Generator().manual_seed(6)) * 3)
    s.requires_grad_(True)
    want = many_ops(s, *grids)
    want_grad, = torch.autograd.grad(want.sum(), s)
    got, got_grad = score_mod_grad(s.detach(), *grids)
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.broadcast_to(got_grad, s.shape), want_grad, rtol=1e-4,
                               atol=1e-4)
    torch.testing.assert_close(score_mod(s.detach(), *grids), got)
    assert torch.equal(mask_mod(*grids), document_causal(*grids))


@pytest.mark.parametrize("opts", [{}, {"causal": True, "softcap": 4.0}], ids=["plain", "capped"])
def test_cpu_op_gradients_against_autograd_of_the_functions(opts):
    q, k, v = qkv(2, 4, 2, 13, 21, seed=7)
    out = flashmlir.attention(q, k, v, score_mod=many_ops, mask_mod=document_causal, **opts)
    dout = noise(out)
    got = torch.autograd.grad(out, (q, k, v), dout)
    o = reference(q, k, v, many_ops, document_causal, (-1, 0) if opts.get("causal") else (-1, -1),
                  opts.get("softcap"))
    close(out, o)
    for a, b in zip(got, torch.autograd.grad(o, (q, k, v), dout)):
        close(a, b, 3e-2)


# -- the custom ops: opcheck, fake implementations ----------------------------------------

def _args(q, k, v, layout="bhsd"):
    traced = _modifiers.trace(alibi, document_causal)
    return (q, k, v, list(traced.captures), traced.key(), True, 16, 0, None, 2.0, layout, False)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_opcheck(layout):
    q, k, v = qkv(2, 4, 2, 24, 40, layout=layout)
    args = _args(q, k, v, layout)
    torch.library.opcheck(_ops.attention_forward_mod, args)
    out, lse = _ops.attention_forward_mod(*args)
    bargs = (noise(out), q.detach(), k.detach(), v.detach(), out.detach(), lse) + args[3:]
    torch.library.opcheck(_ops.attention_backward_mod, bargs)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_fake_outputs_match_real(layout):
    from torch._subclasses.fake_tensor import FakeTensorMode
    q, k, v = qkv(2, 4, 2, 24, 40, layout=layout, grad=False)
    out, lse = flashmlir.attention(q, k, v, score_mod=alibi, mask_mod=document_causal,
                                   layout=layout, return_lse=True)
    args = _args(q, k, v, layout)
    grads = _ops.attention_backward_mod(noise(out), q, k, v, out, lse, *args[3:])
    with FakeTensorMode() as mode:
        fq, fk, fv, fslopes, fdocs = (mode.from_tensor(t) for t in (q, k, v, SLOPES, DOCS))

        def score_mod(s, b, h, i, j):
            return s + fslopes[h] * (j - i)

        def mask_mod(b, h, i, j):
            return (fdocs[i] == fdocs[j]) & (j <= i)
        fo, fl = flashmlir.attention(fq, fk, fv, score_mod=score_mod, mask_mod=mask_mod,
                                     layout=layout, return_lse=True)
        fgrads = _ops.attention_backward_mod(torch.empty_like(fo), fq, fk, fv, fo, fl,
                                             [fslopes, fdocs], *args[4:])
        with pytest.raises(ValueError, match=r"read 2 tensor\(s\) of types \['tensor<4xf32>', "
                                             r"'tensor<64xi32>'\], got 1: \['tensor<64xi32>'\]"):
            _ops.attention_forward_mod(fq, fk, fv, [fdocs], *args[4:])
    for real, fake in zip((out, lse) + tuple(grads), (fo, fl) + tuple(fgrads)):
        assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)
    meta = [t.to("meta") for t in (q, k, v, SLOPES, DOCS)]
    mo = _ops.attention_forward_mod(*meta[:3], meta[3:], *args[4:])[0]
    assert mo.device.type == "meta" and (mo.shape, mo.stride()) == (out.shape, out.stride())
    with pytest.raises(ValueError, match="read a tensor on cpu .* are on meta"):
        _ops.attention_forward_mod(*meta[:3], [SLOPES, DOCS], *args[4:])


def test_op_key_round_trip():
    """op_key() is one line and from_key gives the same modifiers back."""
    traced = _modifiers.trace(alibi, document_causal)
    assert "\n" in traced.key() and "\n" not in traced.op_key()
    again = _modifiers.from_key(traced.op_key(), list(traced.captures))
    assert again.key() == traced.key() and again.digest() == traced.digest()


def test_keys_are_checked():
    q, k, v = qkv(1, 4, 2, 8, grad=False)
    args = list(_args(q, k, v))
    with pytest.raises(ValueError, match="not the key of traced modifiers"):
        _ops.attention_forward_mod(*args[:4], "score_mod(", *args[5:])
    args[3] = [SLOPES.double(), DOCS]
    with pytest.raises(ValueError, match=r"got 2: \['torch.float64', 'tensor<64xi32>'\]"):
        _ops.attention_forward_mod(*args)
