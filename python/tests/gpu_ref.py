"""Reference attention and the FlashAttention-style accuracy check, for the
GPU tests (needs torch; imported only by test_gpu_*.py).

Rule (as FlashAttention's tests): with `ref` computed in float64 on upcast
inputs and `pt` the same naive attention computed by PyTorch in the input
precision (scores, softmax and P·V in f16/bf16),

    max|ours - ref| <= 2 * max|pt - ref| + ATOL        (out and lse, over rows
                                                        that see at least one key)

and rows that see no key must be exactly out = 0 and lse = +inf.

Gradients (check_grads), as FlashAttention's backward tests: with `ref` the
autograd of this attention in float32 on upcast inputs and `pt` its autograd
in the input precision, for each of dq, dk, dv

    max|ours - ref| <= 2 * max|pt - ref| + ATOL_GRAD * max|ref| + ATOL_GRAD_FLOOR

(the atol is relative to the gradient's magnitude, as FA's tests scale
theirs; the floor, far below any gradient that matters, covers float32
rounding where the exact gradient is 0, e.g. dq with one visible key, whose
dS = dP - delta cancels), every element finite (the backward poisons gradients with NaN
first), dq exactly 0 on rows that see no key and dk, dv exactly 0 on keys
no query sees.
"""

import math
import os
import zlib

import pytest
import torch

import flashmlir
from flashmlir import _kernels

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
# FLASHMLIR_REQUIRE_KERNELS=1: a missing kernel fails the test instead of
# skipping it.
REQUIRE = os.environ.get("FLASHMLIR_REQUIRE_KERNELS", "") not in ("", "0")


def skip_missing(exc):
    """Skips the test for a missing kernel (raises it under REQUIRE)."""
    if REQUIRE:
        raise exc
    pytest.skip("no kernel: " + str(exc).splitlines()[0])


@pytest.fixture(autouse=True, scope="module")
def real_registry():
    """The kernel registry rebuilt from the environment (the CPU tests may
    have installed a fake one). Import it into a test module to use it."""
    prev = _kernels.set_default_registry(None)
    yield
    _kernels.set_default_registry(prev)

ATOL_OUT = 1e-3
ATOL_LSE = 1e-3
ATOL_GRAD = 1e-3         # times max|reference gradient|
ATOL_GRAD_FLOOR = 1e-5   # absolute


def seed_for(*parts) -> int:
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


def visible(nq, nk, mask, device):
    """[nq, nk] bool: key j visible from query i (FAOps.h's AttentionMask)."""
    left, right = mask
    i = torch.arange(nq, device=device)[:, None]
    j = torch.arange(nk, device=device)[None, :]
    diag = i + (nk - nq)
    vis = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if left >= 0:
        vis &= j >= diag - left
    if right >= 0:
        vis &= j <= diag + right
    return vis


def canonical(causal, window):
    left, right = (-1, -1) if window is None else window
    if causal:
        right = 0
    return left, right


def attention_ref(q, k, v, mask=(-1, -1), scale=None, softcap=None, upcast=True):
    """q [B, Hq, Nq, D], k [B, Hkv, Nk, D], v [B, Hkv, Nk, Dv] (bhsd views).
    Returns out [B, Hq, Nq, Dv] (float64 if upcast, else q.dtype), lse
    [B, Hq, Nq] (float64 / float32) and rows [Nq] (row sees a key)."""
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    vis = visible(q.shape[2], k.shape[2], mask, q.device)
    s = s.masked_fill(~vis, float("-inf"))
    rows = vis.any(-1)
    lse = torch.logsumexp(s if upcast else s.float(), dim=-1)
    p = torch.softmax(s, dim=-1)
    p = torch.where(rows[:, None], p, torch.zeros((), dtype=p.dtype, device=p.device))
    out = torch.matmul(p.to(v.dtype), v)
    lse = torch.where(rows, lse, torch.full((), math.inf, dtype=lse.dtype, device=lse.device))
    return out, lse, rows


def check(out, lse, q, k, v, mask=(-1, -1), scale=None, softcap=None,
          atol_out=ATOL_OUT, atol_lse=ATOL_LSE, what=""):
    """Asserts the rule above. All tensors as bhsd views."""
    out_ref, lse_ref, rows = attention_ref(q, k, v, mask, scale, softcap, upcast=True)
    out_pt, lse_pt, _ = attention_ref(q, k, v, mask, scale, softcap, upcast=False)
    o = out.double()
    l = lse.double()
    empty = ~rows
    if empty.any():
        oe = out[:, :, empty]
        le = lse[:, :, empty]
        assert (oe == 0).all(), f"{what}: rows with no visible key must give out = 0 " \
            f"({int((oe != 0).sum())} nonzero / NaN elements)"
        assert (le == math.inf).all(), f"{what}: rows with no visible key must give " \
            f"lse = +inf, got e.g. {le[le != math.inf][:4].tolist()}"
    if not rows.any():
        return {}
    o, l = o[:, :, rows], l[:, :, rows]
    ref_o, ref_l = out_ref[:, :, rows], lse_ref[:, :, rows]
    pt_o, pt_l = out_pt[:, :, rows].double(), lse_pt[:, :, rows].double()
    n_bad = int((~torch.isfinite(o)).sum())
    assert n_bad == 0, f"{what}: {n_bad} non-finite output elements (unwritten or NaN)"
    n_bad = int((~torch.isfinite(l)).sum())
    assert n_bad == 0, f"{what}: {n_bad} non-finite lse values on rows that see keys"
    err = (o - ref_o).abs().max().item()
    err_pt = (pt_o - ref_o).abs().max().item()
    rel = ((o - ref_o).norm() / ref_o.norm().clamp_min(1e-30)).item()
    lerr = (l - ref_l).abs().max().item()
    lerr_pt = (pt_l - ref_l).abs().max().item()
    stats = dict(err=err, err_pt=err_pt, rel=rel, lse_err=lerr, lse_err_pt=lerr_pt)
    assert err <= 2 * err_pt + atol_out, f"{what}: out max error {err:.3g} > 2 * {err_pt:.3g} " \
        f"(PyTorch same-precision) + {atol_out} (relative L2 {rel:.3g})"
    assert lerr <= 2 * lerr_pt + atol_lse, f"{what}: lse max error {lerr:.3g} > 2 * " \
        f"{lerr_pt:.3g} + {atol_lse}"
    return stats


def make_qkv(b, hq, hkv, nq, nk, d, dv, dtype, layout, device="cuda", seed=0):
    g = torch.Generator(device=device)
    g.manual_seed(seed)

    def mk(h, n, dd):
        shape = (b, h, n, dd) if layout == "bhsd" else (b, n, h, dd)
        return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
    return mk(hq, nq, d), mk(hkv, nk, d), mk(hkv, nk, dv)


def bhsd(t, layout):
    return t if layout == "bhsd" else t.transpose(1, 2)


def poisoned_outputs(b, hq, nq, dv, dtype, layout, device="cuda"):
    shape = (b, hq, nq, dv) if layout == "bhsd" else (b, nq, hq, dv)
    out = torch.full(shape, float("nan"), dtype=dtype, device=device)
    lse = torch.full((b, hq, nq), float("nan"), dtype=torch.float32, device=device)
    return out, lse



def forward_poisoned(q, k, v, layout="bhsd", **opts):
    """flashmlir.attention() into NaN-poisoned out/lse (so an element the
    kernel never writes fails the check); skips on a missing kernel."""
    b, hq, nq, _ = bhsd(q, layout).shape
    out, lse = poisoned_outputs(b, hq, nq, v.shape[-1], q.dtype, layout)
    try:
        res = flashmlir.attention(q, k, v, layout=layout, return_lse=True, out=out, lse=lse,
                                  **opts)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert res[0] is out and res[1] is lse
    torch.cuda.synchronize()
    return out, lse


@pytest.fixture(autouse=True, scope="module")
def exact_fp32_matmul():
    """The float32 reference must not run its matmuls in TF32: autouse in
    every test module that imports it."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = prev

def reference_grads(q, k, v, dout, mask=(-1, -1), scale=None, softcap=None, dtype=None):
    """(dq, dk, dv) of attention_ref by autograd, computed in `dtype` (e.g.
    torch.float32) or, with None, in the inputs' own precision. All bhsd."""
    dt = dtype or q.dtype
    qq, kk, vv = (t.detach().to(dt).requires_grad_() for t in (q, k, v))
    out, _, _ = attention_ref(qq, kk, vv, mask, scale, softcap, upcast=False)
    return torch.autograd.grad(out, (qq, kk, vv), dout.to(out.dtype))


def check_grads(grads, q, k, v, dout, mask=(-1, -1), scale=None, softcap=None,
                atol_grad=ATOL_GRAD, atol_floor=ATOL_GRAD_FLOOR, what=""):
    """Asserts the gradient rule above for grads = (dq, dk, dv); all tensors
    as bhsd views. Returns the errors."""
    ref = reference_grads(q, k, v, dout, mask, scale, softcap, torch.float32)
    pt = reference_grads(q, k, v, dout, mask, scale, softcap, None)
    vis = visible(q.shape[2], k.shape[2], mask, q.device)
    rows, keys = vis.any(-1), vis.any(0)
    stats = {}
    for name, g, r, p in zip(("dq", "dk", "dv"), grads, ref, pt):
        assert g.shape == r.shape, f"{what}: {name} has shape {tuple(g.shape)}, " \
            f"expected {tuple(r.shape)}"
        if g.numel() == 0:
            continue
        n_bad = int((~torch.isfinite(g)).sum())
        assert n_bad == 0, f"{what}: {name}: {n_bad} of {g.numel()} elements are not finite " \
            "(unwritten, i.e. still NaN-poisoned, or NaN/inf computed)"
        unseen = ~rows if name == "dq" else ~keys
        if unseen.any():
            z = g[:, :, unseen]
            assert (z == 0).all(), f"{what}: {name} must be exactly 0 where no key/query is " \
                f"visible ({int((z != 0).sum())} nonzero elements)"
        err = (g.float() - r).abs().max().item()
        err_pt = (p.float() - r).abs().max().item()
        mag = r.abs().max().item()
        rel = ((g.float() - r).norm() / r.norm().clamp_min(1e-30)).item()
        atol = atol_grad * mag + atol_floor
        stats[name] = dict(err=err, err_pt=err_pt, max=mag, rel=rel)
        assert err <= 2 * err_pt + atol, (
            f"{what}: {name} max error {err:.3g} > 2 * {err_pt:.3g} (PyTorch same-precision) "
            f"+ {atol:.3g} ({atol_grad} * max|{name}| {mag:.3g} + {atol_floor}); "
            f"relative L2 {rel:.3g}")
    return stats


def make_dout(shape, dtype, device="cuda", seed=0):
    """A random output gradient of `shape` (the output's, in its layout)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
