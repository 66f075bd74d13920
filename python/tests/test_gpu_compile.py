"""GPU tests of flashmlir under torch.compile, the plan-cached eager path,
streams and CUDA graphs, with the fa-compile kernels (the normal search
path; a variant with no kernel skips, or fails with
FLASHMLIR_REQUIRE_KERNELS=1).

- torch.compile(fullgraph=True), dynamic shapes, aot_eager and inductor:
  forward and backward give bitwise the eager results (the same kernels
  run), through attention, scaled_dot_product_attention and flash_attn_func;
- a module compiled without fullgraph runs (the stream is read in the op);
- compiled code on a side stream and in mode="reduce-overhead" (CUDA graphs);
- the eager steady state: many calls of one shape reuse one plan and give
  the first call's result; a new shape gets a new plan;
- the CPU reference agrees with the GPU kernels under the accuracy rule.
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _interface  # noqa: E402

import gpu_ref as R  # noqa: E402
from gpu_ref import real_registry, skip_missing  # noqa: E402,F401 (fixture)

BF = torch.bfloat16


def qkv(b, hq, hkv, nq, nk, d, layout="bhsd", dtype=BF, seed=0, grad=True):
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, d, dtype, layout, seed=seed)
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


def _close(a, b):
    """Gradients of the fast backward: dq (and with GQA dk, dv) are summed
    with f32 atomics, so two runs agree only up to the summation order."""
    return (a.float() - b.float()).abs().max().item() <= 1e-2 * b.float().abs().max().item() + 1e-3


def _eager_and_compiled(fn, make, backend, shapes, dynamic=True, bitwise_grads=False):
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    cf = torch.compile(fn, fullgraph=True, dynamic=dynamic, backend=backend)
    for i, shape in enumerate(shapes):
        ins = make(*shape, seed=i)
        try:
            want = fn(*ins)
        except flashmlir.KernelNotFoundError as exc:
            skip_missing(exc)
        dout = torch.randn_like(want)
        want_g = torch.autograd.grad(want, ins, dout)
        got = cf(*ins)
        got_g = torch.autograd.grad(got, ins, dout)
        torch.cuda.synchronize()
        assert torch.equal(got, want), f"{backend} {shape}: forward differs from eager"
        for name, a, b in zip("qkv", got_g, want_g):
            same = torch.equal(a, b) if bitwise_grads else _close(a, b)
            assert same, f"{backend} {shape}: d{name} differs from eager"
    assert not counters["graph_break"], dict(counters["graph_break"])
    return counters


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("opts", [{"causal": True}, {}], ids=["causal", "full"])
@pytest.mark.parametrize("d", [64, 128])
def test_compile_matches_eager(backend, opts, d):
    def fn(q, k, v):
        return flashmlir.attention(q, k, v, layout="bshd", **opts)
    make = lambda nq, nk, seed: qkv(2, 8, 2, nq, nk, d, layout="bshd", seed=seed)
    # Nq != Nk in the first (traced) shape: dynamo's duck sizing gives equal
    # sizes one symbol, and a later Nq != Nk would then recompile.
    c = _eager_and_compiled(fn, make, backend, [(1000, 1200), (4097, 4000), (333, 1500)])
    assert c["stats"]["unique_graphs"] <= 1   # one dynamic graph for every shape


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_matches_eager_bitwise_deterministic(backend):
    """With the deterministic backward, the gradients are bitwise eager's too."""
    def fn(q, k, v):
        return flashmlir.attention(q, k, v, causal=True, deterministic=True)
    make = lambda nq, nk, seed: qkv(1, 8, 2, nq, nk, 128, seed=seed)
    _eager_and_compiled(fn, make, backend, [(1000, 1000), (2048, 2048)], bitwise_grads=True)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_entry_points(backend):
    def sdpa(q, k, v):
        return flashmlir.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def fa(q, k, v):
        return flashmlir.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), causal=True)
    make = lambda nq, nk, seed: qkv(1, 8, 2, nq, nk, 128, seed=seed)
    _eager_and_compiled(sdpa, make, backend, [(512, 512), (2048, 2048)])
    _eager_and_compiled(fa, make, backend, [(512, 512), (700, 2048)])


def test_compile_model_without_fullgraph_and_streams():
    """A module whose attention is flashmlir, compiled the default way (the
    report: AttributeError 'torch.Stream' object has no attribute
    'cuda_stream'), run on the current and on a side stream."""
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(512, 3 * 512, dtype=BF, device="cuda")
            self.o = torch.nn.Linear(512, 512, dtype=BF, device="cuda")

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, 4, 128).unbind(2)
            return self.o(flashmlir.attention(q, k, v, causal=True, layout="bshd").flatten(2))

    m = Attn()
    x = torch.randn(2, 1024, 512, device="cuda", dtype=BF, requires_grad=True)
    try:
        want = m(x)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    want_g = torch.autograd.grad(want.float().sum(), x)[0]
    cm = torch.compile(m)
    got = cm(x)
    got_g = torch.autograd.grad(got.float().sum(), x)[0]
    assert torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    assert torch.allclose(got_g.float(), want_g.float(), atol=2e-2, rtol=2e-2)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        side = cm(x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(side, got)


def test_compile_reduce_overhead_cuda_graphs():
    def fn(q, k, v):
        return flashmlir.attention(q, k, v, causal=True)
    q, k, v = qkv(1, 8, 8, 1024, 1024, 128, grad=False)
    try:
        want = fn(q, k, v)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    torch._dynamo.reset()
    cf = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):   # warm-up, record, replays
        got = cf(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_eager_plans_are_reused():
    q, k, v = qkv(1, 8, 2, 256, 256, 64, grad=False)
    _interface.clear_caches()
    try:
        first = flashmlir.attention(q, k, v, causal=True)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert len(_interface._plans) == 1
    for _ in range(50):
        out = flashmlir.attention(q, k, v, causal=True)
    assert len(_interface._plans) == 1 and torch.equal(out, first)
    flashmlir.attention(q[:, :, :100], k, v, causal=True)
    assert len(_interface._plans) == 2
    # a fresh tensor at another address with the same shapes: the same plan
    q2 = q.clone()
    assert torch.equal(flashmlir.attention(q2, k, v, causal=True), first)
    assert len(_interface._plans) == 2


@pytest.mark.parametrize("opts", [{}, {"causal": True}], ids=["full", "causal"])
def test_cpu_reference_agrees_with_gpu(opts):
    q, k, v = qkv(1, 4, 2, 300, 500, 128, grad=False)
    try:
        gpu, glse = flashmlir.attention(q, k, v, return_lse=True, **opts)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    cpu, clse = flashmlir.attention(q.cpu(), k.cpu(), v.cpu(), return_lse=True, **opts)
    mask = R.canonical(opts.get("causal", False), None)
    R.check(gpu.cpu(), glse.cpu(), q.cpu(), k.cpu(), v.cpu(), mask)
    R.check(cpu, clse, q.cpu(), k.cpu(), v.cpu(), mask)
