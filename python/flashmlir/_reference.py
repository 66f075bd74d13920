"""The PyTorch reference of the op, for CPU tensors: what the custom ops run
when the tensors are not on a CUDA device (tests, CI, CPU-only machines).

Exactly the semantics of the kernels (python/README.md): float32 math on
upcast inputs, bottom-right aligned causal mask and windows, softcap, GQA,
and rows that see no key give out = 0 and lse = +inf. It materialises the
[Nq, Nk] scores, so it is meant for small problems. The backward is
FlashAttention's backward formulas on the same f32 scores (custom ops
cannot run autograd inside), checked against autograd of `attention` in
the tests.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch


def visible(nq: int, nk: int, mask: Tuple[int, int], device) -> torch.Tensor:
    """[nq, nk] bool: key j is visible from query i (FAOps.h's AttentionMask:
    the diagonal is j = i + nk - nq; `mask` = (left, right), -1 unbounded)."""
    left, right = mask
    i = torch.arange(nq, device=device)[:, None]
    j = torch.arange(nk, device=device)[None, :]
    diag = i + (nk - nq)
    vis = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if left >= 0:
        vis = vis & (j >= diag - left)
    if right >= 0:
        vis = vis & (j <= diag + right)
    return vis


def _scores(q, k, mask, scale, softcap):
    """Scores [B, Hq, Nq, Nk] in f32 (k expanded over each GQA group), the
    softcap's tanh (or None), the visibility [Nq, Nk] and rows [Nq] that see
    a key."""
    g = q.shape[1] // k.shape[1]
    kf = k.float()
    if g > 1:
        kf = kf.repeat_interleave(g, dim=1)
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale
    t = None
    if softcap is not None:
        t = torch.tanh(s / softcap)
        s = softcap * t
    vis = visible(q.shape[2], k.shape[2], mask, q.device)
    return s.masked_fill(~vis, -math.inf), t, vis, vis.any(-1)


def _probabilities(s, rows):
    # logsumexp of a row of -inf is -inf (its gradient NaN): such rows get
    # finite scores for the lse only; their probabilities stay exp(-inf) = 0.
    lse = torch.logsumexp(s.masked_fill(~rows[:, None], 0.0), dim=-1)
    return torch.exp(s - lse[..., None]), lse


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Tuple[int, int],
              scale: float, softcap: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    """q [B, Hq, Nq, D], k [B, Hkv, Nk, D], v [B, Hkv, Nk, Dv] (bhsd views, any
    dtype). Returns out [B, Hq, Nq, Dv] in q's dtype and lse [B, Hq, Nq] f32;
    differentiable in q, k and v by autograd."""
    g = q.shape[1] // k.shape[1]
    s, _, _, rows = _scores(q, k, mask, scale, softcap)
    p, lse = _probabilities(s, rows)
    vf = v.float()
    if g > 1:
        vf = vf.repeat_interleave(g, dim=1)
    out = torch.matmul(p, vf)
    lse = torch.where(rows, lse, torch.full((), math.inf, device=q.device))
    return out.to(q.dtype), lse


def _group_sum(x, hkv):
    b, hq, n, d = x.shape
    return x.view(b, hkv, hq // hkv, n, d).sum(2)


def attention_backward(dout, q, k, v, mask, scale, softcap):
    """(dq, dk, dv) of `attention` in f32 math (FlashAttention's backward:
    P recomputed, delta = rowsum(dout * out), dS = P (dP - delta)), typed
    like q, k, v; with GQA dk and dv are summed over each group. It runs
    inside custom ops, where autograd is not available. All bhsd views."""
    hkv = k.shape[1]
    g = q.shape[1] // hkv
    s, t, _, rows = _scores(q, k, mask, scale, softcap)
    p, _ = _probabilities(s, rows)
    kf, vf = k.float(), v.float()
    if g > 1:
        kf = kf.repeat_interleave(g, dim=1)
        vf = vf.repeat_interleave(g, dim=1)
    do = dout.float()
    out = torch.matmul(p, vf)
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, vf.transpose(-1, -2))
    delta = (do * out).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    if t is not None:
        ds = ds * (1 - t * t)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-1, -2), q.float()) * scale
    return (dq.to(q.dtype), _group_sum(dk, hkv).to(k.dtype), _group_sum(dv, hkv).to(v.dtype))


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
