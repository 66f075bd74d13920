"""GPU tests of flashmlir.attention with score_mod / mask_mod (FlexAttention's
modifiers compiled into the kernels; issue 14).

The modifier kernels are compiled for each traced modifier and capture
shape: scripts/build-modifier-kernels.py builds those of
modifier_cases.GPU_TEST_PROBLEMS into a folder the run names in
FLASHMLIR_KERNEL_DIR (the GPU machine has no fa-compile). A problem whose
kernel is missing is skipped (reason printed with -rs), or fails when
FLASHMLIR_REQUIRE_KERNELS=1.

Accuracy rule (FlashAttention's; see gpu_ref.py): max error against a
float64 reference of the same modified attention <= 2 x that of PyTorch's
same-precision naive attention + 1e-3 (out and lse), on rows that see a
key; rows that see no key must be exactly out = 0, lse = +inf. Outputs are
poisoned with NaN first. A mask_mod that states a built-in mask (causal,
a sliding window) must give bitwise the built-in kernel's results; a
score_mod that states the softcap must pass the same rule.
"""

import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _modifiers  # noqa: E402

import gpu_ref as R  # noqa: E402
import modifier_cases as MC  # noqa: E402
from gpu_ref import exact_fp32_matmul, real_registry, skip_missing  # noqa: E402,F401


def modified_ref(p, case, q, k, v, upcast):
    """out, lse, rows of the modified attention, all bhsd: float64 on upcast
    inputs, else PyTorch's naive attention in the inputs' precision (the
    modified scores rounded back to it). Differentiable (rows that see no
    key give out = 0 and zero gradients)."""
    opts = p.kwargs
    scale = opts.get("scale") or 1.0 / math.sqrt(p.D)
    softcap = opts.get("softcap")
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    dt = torch.float64 if upcast else q.dtype
    q, k, v = q.to(dt), k.to(dt), v.to(dt)
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    vis = modified_visible(p, case, s.shape, q.device)
    b, h, nq, nk = s.shape
    bi, hi, qi, ki = _modifiers.index_grids(b, h, nq, nk, q.device)
    if case.score_mod is not None:
        s = torch.broadcast_to(case.score_mod(s, bi, hi, qi, ki), s.shape).to(dt)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    rows = vis.any(-1)
    # Rows that see no key softmax zeros (not -inf: NaN gradients), then 0.
    s = s.masked_fill(~vis, float("-inf")).masked_fill(~rows[..., None], 0.0)
    lse = torch.logsumexp(s if upcast else s.float(), dim=-1)
    pr = torch.softmax(s, dim=-1)
    pr = torch.where(rows[..., None], pr, torch.zeros((), dtype=pr.dtype, device=pr.device))
    out = torch.matmul(pr.to(v.dtype), v)
    lse = torch.where(rows, lse, torch.full((), math.inf, dtype=lse.dtype, device=lse.device))
    return out, lse, rows


def modified_visible(p, case, shape, device):
    """[B, Hq, Nq, Nk] bool: the built-in mask AND the mask_mod."""
    b, h, nq, nk = shape
    mask = R.canonical(p.kwargs.get("causal", False), p.kwargs.get("window"))
    vis = R.visible(nq, nk, mask, device).expand(b, h, nq, nk)
    if case.mask_mod is not None:
        bi, hi, qi, ki = _modifiers.index_grids(b, h, nq, nk, device)
        vis = vis & torch.broadcast_to(case.mask_mod(bi, hi, qi, ki), vis.shape)
    return vis


def check_modified(p, case, out, lse, q, k, v, what):
    """FlashAttention's rule against the float64 modified reference (bhsd)."""
    ref_o, ref_l, rows = modified_ref(p, case, q, k, v, upcast=True)
    pt_o, pt_l, _ = modified_ref(p, case, q, k, v, upcast=False)
    if (~rows).any():
        assert (out[~rows] == 0).all(), f"{what}: rows that see no key must give out = 0"
        assert (lse[~rows] == math.inf).all(), \
            f"{what}: rows that see no key must give lse = +inf"
    sel = rows
    o, l = out.double()[sel], lse.double()[sel]
    n_bad = int((~torch.isfinite(o)).sum()) + int((~torch.isfinite(l)).sum())
    assert n_bad == 0, f"{what}: {n_bad} non-finite out / lse elements (unwritten or NaN)"
    err = (o - ref_o[sel]).abs().max().item() if o.numel() else 0.0
    err_pt = (pt_o.double()[sel] - ref_o[sel]).abs().max().item() if o.numel() else 0.0
    lerr = (l - ref_l[sel]).abs().max().item() if l.numel() else 0.0
    lerr_pt = (pt_l.double()[sel] - ref_l[sel]).abs().max().item() if l.numel() else 0.0
    assert err <= 2 * err_pt + R.ATOL_OUT, \
        f"{what}: out max error {err:.3g} > 2 * {err_pt:.3g} + {R.ATOL_OUT}"
    assert lerr <= 2 * lerr_pt + R.ATOL_LSE, \
        f"{what}: lse max error {lerr:.3g} > 2 * {lerr_pt:.3g} + {R.ATOL_LSE}"


def run_modified(p, case, q, k, v, layout):
    b, hq, nq = p.B, p.Hq, p.Nq
    out, lse = R.poisoned_outputs(b, hq, nq, p.D, p.torch_dtype, layout)
    try:
        res = flashmlir.attention(q, k, v, layout=layout, return_lse=True, out=out, lse=lse,
                                  **p.call_kwargs(case, q.device))
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert res[0] is out and res[1] is lse
    torch.cuda.synchronize()
    return out, lse


LAYOUTS = ["bhsd", "bshd"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("p", MC.GPU_TEST_PROBLEMS, ids=lambda p: p.id)
def test_forward(p, layout):
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", layout, seed=R.seed_for(p.id, layout))
    out, lse = run_modified(p, case, q, k, v, layout)
    check_modified(p, case, R.bhsd(out, layout), lse, R.bhsd(q, layout), R.bhsd(k, layout),
                   R.bhsd(v, layout), f"{p.id} {layout}")
    # The same again, into fresh outputs: deterministic, and the cached
    # plan serves the second call.
    out2, lse2 = run_modified(p, case, q, k, v, layout)
    assert torch.equal(out, out2) and torch.equal(lse, lse2), f"{p.id}: not deterministic"


BUILTIN = [p for p in MC.GPU_TEST_PROBLEMS if p.build().builtin is not None]


@pytest.mark.parametrize("p", BUILTIN, ids=lambda p: p.id)
def test_builtin_equivalent(p, monkeypatch):
    """causal and windows as mask_mods, the softcap as a score_mod: bitwise
    the built-in kernels' results (fa-recognize-builtin-modifiers turns the
    softcap score_mod into the softcap attribute). The built-in call of a
    decode shape (Nq = 1) would take the split-KV kernels, another sum
    order, which modifier calls do not: compared with split-KV off."""
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", "bhsd", seed=R.seed_for(p.id, "builtin"))
    out, lse = run_modified(p, case, q, k, v, "bhsd")
    monkeypatch.setenv("FLASHMLIR_SPLIT_KV", "0")
    try:
        ref_o, ref_l = flashmlir.attention(q, k, v, return_lse=True, **case.builtin)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert torch.equal(out, ref_o), f"{p.id}: out differs from the built-in's"
    assert torch.equal(lse, ref_l), f"{p.id}: lse differs from the built-in's"


def test_capture_values_are_arguments():
    """Changing a captured tensor's values (not its shape) reuses the kernel
    and changes the result: captures are kernel arguments."""
    p = MC.Problem("alibi", 1, 4, 2, 300, 450, 128, "bf16")
    case = p.build("cuda", seed=7)
    q, k, v = p.inputs("cuda", "bhsd", seed=8)
    out1, _ = run_modified(p, case, q, k, v, "bhsd")
    case.captures["slopes"].mul_(4.0)
    out2, lse2 = run_modified(p, case, q, k, v, "bhsd")
    assert not torch.equal(out1, out2)
    check_modified(p, case, out2, lse2, q, k, v, "alibi x4")


def test_key_ranges_are_honored():
    """The forward kernel visits the key blocks of the ranges only: ranges
    of [0, 256) for every row group (whole key blocks) give the modified
    attention of mask_mod AND kv_idx < 256 (the rows left with no key: out
    = 0, lse = +inf), through the plan the correct ranges made; and runs
    the blocks of the fully visible ranges without the mask_mod."""
    import dataclasses
    p = next(p for p in MC.GPU_TEST_PROBLEMS if p.key_range_rows == 64)
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", "bhsd", seed=R.seed_for(p.id, "honored"))
    run_modified(p, case, q, k, v, "bhsd")
    kr = p.ranges(case, "cuda")
    narrow = kr.ranges.clone()
    narrow[..., 0], narrow[..., 1] = 0, 256
    out, lse = R.poisoned_outputs(p.B, p.Hq, p.Nq, p.D, p.torch_dtype, "bhsd")
    flashmlir.attention(q, k, v, out=out, lse=lse, score_mod=case.score_mod,
                        mask_mod=case.mask_mod, key_ranges=flashmlir.KeyRanges(narrow, 64),
                        **p.kwargs)
    torch.cuda.synchronize()
    inner = case.mask_mod
    cut = dataclasses.replace(case, mask_mod=lambda b, h, i, j: inner(b, h, i, j) & (j < 256))
    check_modified(p, cut, out, lse, q, k, v, f"{p.id} ranges [0, 256)")
    assert (lse == math.inf).any(), "some rows' documents start after key 256"
    # The same keys claimed fully visible: those blocks run without the
    # mask_mod (attention over the first 256 keys, unmasked).
    narrow[..., 2], narrow[..., 3] = 0, 256
    flashmlir.attention(q, k, v, out=out, lse=lse, score_mod=case.score_mod,
                        mask_mod=case.mask_mod, key_ranges=flashmlir.KeyRanges(narrow, 64),
                        **p.kwargs)
    torch.cuda.synchronize()
    every = dataclasses.replace(case, mask_mod=lambda b, h, i, j: j < 256)
    check_modified(p, every, out, lse, q, k, v, f"{p.id} [0, 256) fully visible")


# -- backward ----------------------------------------------------------------------------
# FlashAttention's gradient rule: max error against the float64 reference
# <= 3 x that of PyTorch's same-precision naive attention + 1e-3 x max|grad|
# + 1e-5; gradients NaN-poisoned before the kernels run; keys (queries) that
# no query (key) sees get exactly 0.


def modified_grads(p, case, q, k, v, dout, upcast):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out, _, _ = modified_ref(p, case, q, k, v, upcast)
        return torch.autograd.grad(out, (q, k, v), dout.to(out.dtype))


def check_modified_grads(p, case, grads, q, k, v, dout, what):
    ref = modified_grads(p, case, q, k, v, dout, True)
    pt = modified_grads(p, case, q, k, v, dout, False)
    vis = modified_visible(p, case, (p.B, p.Hq, p.Nq, p.Nk), q.device)
    g = p.Hq // p.Hkv
    unseen_q = ~vis.any(-1)
    unseen_k = ~vis.any(2).view(p.B, p.Hkv, g, p.Nk).any(2)
    for name, got, r, pt_g, unseen in zip(("dq", "dk", "dv"), grads, ref, pt,
                                          (unseen_q, unseen_k, unseen_k)):
        assert got.shape == r.shape, f"{what}: {name} shape {tuple(got.shape)}"
        n_bad = int((~torch.isfinite(got)).sum())
        assert n_bad == 0, f"{what}: {name}: {n_bad} elements not finite (unwritten or NaN)"
        if unseen.any():
            assert (got[unseen] == 0).all(), f"{what}: {name} must be 0 where nothing is seen"
        err = (got.double() - r).abs().max().item()
        err_pt = (pt_g.double() - r).abs().max().item()
        atol = R.ATOL_GRAD * r.abs().max().item() + R.ATOL_GRAD_FLOOR
        assert err <= 3 * err_pt + atol, \
            f"{what}: {name} max error {err:.3g} > 3 * {err_pt:.3g} + {atol:.3g}"


def run_backward(p, case, q, k, v, dout, layout, deterministic=False):
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    try:
        out = flashmlir.attention(qq, kk, vv, layout=layout, deterministic=deterministic,
                                  **p.call_kwargs(case, q.device))
        assert type(out.grad_fn).__name__ == "_FlashAttentionBackward", \
            f"{p.id}: the backward is not the kernels' ({type(out.grad_fn).__name__})"
        grads = torch.autograd.grad(out, (qq, kk, vv), dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    torch.cuda.synchronize()
    return grads


@pytest.fixture
def poison(monkeypatch):
    from flashmlir import _interface
    monkeypatch.setenv(_interface.POISON_ENV, "1")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("p", MC.GPU_BACKWARD_PROBLEMS, ids=lambda p: p.id)
def test_backward(p, layout, poison):
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", layout, seed=R.seed_for(p.id, layout, "bwd"))
    shape = (p.B, p.Hq, p.Nq, p.D) if layout == "bhsd" else (p.B, p.Nq, p.Hq, p.D)
    dout = R.make_dout(shape, p.torch_dtype, seed=R.seed_for(p.id, "dout"))
    grads = run_backward(p, case, q, k, v, dout, layout)
    check_modified_grads(p, case, [R.bhsd(t, layout) for t in grads], R.bhsd(q, layout),
                         R.bhsd(k, layout), R.bhsd(v, layout), R.bhsd(dout, layout),
                         f"{p.id} {layout}")


def test_query_ranges_are_honored(poison):
    """The backward kernel visits, per key block, the query blocks of its
    query ranges only: ranges of [0, 256) for every key group give the
    gradients of the modified attention whose dout is zero past row 256
    (those rows add nothing to dK / dV and get no dQ), not the full ones."""
    p = next(p for p in MC.GPU_BACKWARD_PROBLEMS if p.key_range_rows == 64)
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", "bhsd", seed=R.seed_for(p.id, "qr"))
    dout = R.make_dout((p.B, p.Hq, p.Nq, p.D), p.torch_dtype, seed=R.seed_for(p.id, "qrd"))
    kr = p.ranges(case, "cuda")
    narrow = kr.query_ranges.clone()
    narrow[..., 0], narrow[..., 1] = 0, 256
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = flashmlir.attention(qq, kk, vv, score_mod=case.score_mod, mask_mod=case.mask_mod,
                              key_ranges=flashmlir.KeyRanges(kr.ranges, 64, narrow),
                              **p.kwargs)
    grads = torch.autograd.grad(out, (qq, kk, vv), dout)
    torch.cuda.synchronize()
    cut = dout.clone()
    cut[:, :, 256:] = 0
    check_modified_grads(p, case, grads, q, k, v, cut, f"{p.id} query ranges [0, 256)")
    assert (grads[0][:, :, 256:] == 0).all()
    full = run_backward(p, case, q, k, v, dout, "bhsd")
    assert not torch.equal(full[1], grads[1])


@pytest.mark.parametrize("p", MC.GPU_DETERMINISTIC_PROBLEMS, ids=lambda p: p.id)
def test_backward_deterministic(p, poison):
    """deterministic=True: the same gradients bitwise over repeated runs."""
    case = p.build("cuda", seed=R.seed_for(p.id))
    q, k, v = p.inputs("cuda", "bhsd", seed=R.seed_for(p.id, "det"))
    dout = R.make_dout((p.B, p.Hq, p.Nq, p.D), p.torch_dtype, seed=R.seed_for(p.id, "ddet"))
    first = run_backward(p, case, q, k, v, dout, "bhsd", deterministic=True)
    check_modified_grads(p, case, first, q, k, v, dout, f"{p.id} deterministic")
    for _ in range(10):
        again = run_backward(p, case, q, k, v, dout, "bhsd", deterministic=True)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{p.id}: deterministic {name} differs between runs"


CAPTURE_GRAD_PROBLEMS = [p for p in MC.GPU_BACKWARD_PROBLEMS
                         if p.case in ("alibi", "rel_bias") and not p.options][:4]


@pytest.mark.parametrize("p", CAPTURE_GRAD_PROBLEMS, ids=lambda p: p.id)
def test_capture_gradients(p, poison):
    """A capture requiring grad (ALiBi slopes, a bias table): the kernels
    give out, dq, dk, dv (the gradient rule), the capture's gradient comes
    by row chunks; against float64 autograd within 2% (relative L2: a sum
    over every score, from the rounded out)."""
    case = p.build("cuda", seed=R.seed_for(p.id))
    cap = next(iter(case.captures.values())).requires_grad_(True)
    q, k, v = p.inputs("cuda", "bhsd", seed=R.seed_for(p.id, "cap"))
    dout = R.make_dout((p.B, p.Hq, p.Nq, p.D), p.torch_dtype, seed=R.seed_for(p.id, "dcap"))
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    try:
        out = flashmlir.attention(qq, kk, vv, score_mod=case.score_mod, **p.kwargs)
        assert type(out.grad_fn).__name__ == "_FlashAttentionBackward"
        *grads, dcap = torch.autograd.grad(out, (qq, kk, vv, cap), dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    check_modified_grads(p, case, grads, q, k, v, dout, f"{p.id} with capture grad")
    qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        ref, _, _ = modified_ref(p, case, qr, kr, vr, True)
        (want,) = torch.autograd.grad(ref, (cap,), dout.double())
    rel = ((dcap.double() - want).norm() / want.norm()).item()
    assert torch.isfinite(dcap).all() and rel <= 2e-2, f"{p.id}: capture grad rel L2 {rel:.3g}"
