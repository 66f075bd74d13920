"""torch.compile of flashmlir.attention with score_mod / mask_mod on the GPU
(issue 14 with issue 17's custom ops): fullgraph, no graph break, under
aot_eager, inductor and reduce-overhead (CUDA graphs), forward and
backward equal bitwise to eager, which runs the same modifier kernels.

Kernels: those of modifier_cases.GPU_BACKWARD_PROBLEMS (built by
scripts/build-modifier-kernels.py into FLASHMLIR_KERNEL_DIR). ALiBi reads a
capture whose shape does not depend on N, so one kernel serves both
sequence lengths of the dynamic-shape runs; the document mask's ids do
(a graph per length). (Inductor once failed to import the wrapper it
generated for the backward: the modifiers' key, multi-line MLIR, ended a
comment; the key now travels on one line.)
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import modifier_cases as MC  # noqa: E402
from gpu_ref import real_registry, skip_missing  # noqa: E402,F401

CASES = ("alibi", "document_causal")
PROBLEMS = {c: next(p for p in MC.GPU_BACKWARD_PROBLEMS if p.case == c and not p.options)
            for c in CASES}


def run(fn, p, case, seed, nq=None):
    """fn's out and the gradients of q, k, v for a fixed dout, on p's
    inputs (with nq queries and keys instead of p's, when given)."""
    if nq is not None:
        p = MC.Problem(p.case, p.B, p.Hq, p.Hkv, nq, nq, p.D, p.dtype, p.options)
    q, k, v = p.inputs("cuda", seed=seed, requires_grad=True)
    out = fn(q, k, v)
    g = torch.Generator(device="cuda").manual_seed(seed)
    dout = torch.randn(out.shape, device="cuda", generator=g).to(out.dtype)
    return (out, *torch.autograd.grad(out, (q, k, v), dout))


def modified_call(name, seed):
    """p, case and the eager call of the named case (its modifiers and
    options), with dynamo's state and counters reset."""
    p = PROBLEMS[name]
    case = p.build("cuda", seed=seed)

    def f(q, k, v):
        return flashmlir.attention(q, k, v, score_mod=case.score_mod, mask_mod=case.mask_mod,
                                   **p.kwargs)

    torch._dynamo.reset()
    counters.clear()
    return p, case, f


def check_equal(got, want, what):
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert torch.isfinite(a).all(), f"{what}: {name} not finite"
        assert torch.equal(a, b), \
            f"{what}: {name} differs from eager by {(a.float() - b.float()).abs().max().item():.3g}"


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", CASES)
def test_compiled_equals_eager(name, backend):
    p, case, f = modified_call(name, seed=3)
    cf = torch.compile(f, fullgraph=True, dynamic=name == "alibi", backend=backend)
    # ALiBi at two lengths (not 1: dynamo specializes sizes of 1): the
    # same kernel, one graph.
    for nq in ((200, 256) if name == "alibi" else (None,)):
        try:
            got = run(cf, p, case, 5, nq)
            want = run(f, p, case, 5, nq)
        except flashmlir.KernelNotFoundError as exc:
            skip_missing(exc)
        check_equal(got, want, f"{p.id} {backend} nq={nq}")
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize("name", CASES)
def test_cuda_graphs(name):
    """mode="reduce-overhead": replays of the captured forward and
    backward equal eager."""
    p, case, f = modified_call(name, seed=4)
    cf = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    try:
        for _ in range(3):   # warm-up, record, replay
            got = run(cf, p, case, 6)
        got = tuple(t.clone() for t in got)
        want = run(f, p, case, 6)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    check_equal(got, want, f"{p.id} reduce-overhead")
    assert not counters["graph_break"], dict(counters["graph_break"])
