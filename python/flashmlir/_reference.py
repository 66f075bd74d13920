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


def attention_modified(q, k, v, mask, scale, softcap, score_mod, mask_mod):
    """`attention` with Python modifiers (FlexAttention's score_mod and
    mask_mod), evaluated on index tensors broadcasting to [B, Hq, Nq, Nk]:
    s = scale * q k^T, s = score_mod(s, b, h, i, j), then the softcap, then
    -inf unless the mask and mask_mod see the key (the order of fa.attention,
    docs/ARCHITECTURE.md). Differentiable by autograd in q, k, v and in the
    tensors the modifiers read."""
    g = q.shape[1] // k.shape[1]
    kf = k.float()
    if g > 1:
        kf = kf.repeat_interleave(g, dim=1)
    s, vis = modified_scores(torch.matmul(q.float(), kf.transpose(-1, -2)) * scale, mask,
                             softcap, score_mod, mask_mod)
    rows = vis.any(-1)
    # (As _probabilities, with rows per batch and head.)
    lse = torch.logsumexp(s.masked_fill(~rows[..., None], 0.0), dim=-1)
    p = torch.exp(s - lse[..., None])
    vf = v.float()
    if g > 1:
        vf = vf.repeat_interleave(g, dim=1)
    out = torch.matmul(p, vf)
    lse = torch.where(rows, lse, torch.full((), math.inf, device=q.device))
    return out.to(q.dtype), lse


def modified_scores(s, mask, softcap, score_mod, mask_mod):
    """The scores of `attention_modified` from the scaled s = scale * q k^T
    [B, Hq, Nq, Nk] (f32): score_mod, the softcap, -inf where the mask or
    the mask_mod hide the key; and that visibility [B, Hq, Nq, Nk] (bool).
    Differentiable in s (and the tensors the modifiers read)."""
    from ._modifiers import index_grids
    b, hq, nq, nk = s.shape
    bi, hi, qi, ki = index_grids(b, hq, nq, nk, s.device)
    if score_mod is not None:
        s = torch.broadcast_to(score_mod(s, bi, hi, qi, ki), s.shape).float()
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    vis = visible(nq, nk, mask, s.device).expand(b, hq, nq, nk)
    if mask_mod is not None:
        mm = torch.as_tensor(mask_mod(bi, hi, qi, ki), device=s.device)
        if mm.dtype != torch.bool:
            raise TypeError(f"mask_mod returned {mm.dtype} values, not booleans")
        vis = vis & torch.broadcast_to(mm, vis.shape)
    return s.masked_fill(~vis, -math.inf), vis


def modified_scores_grad(s, mask, softcap, score_mod_grad, mask_mod):
    """`modified_scores` with modifiers given as their traced regions
    (`Traced.functions()`: custom ops run no autograd), for a backward:
    the scores, the visibility, the softcap's tanh (None without) and the
    score_mod's derivative (`score_mod_grad(s, b, h, i, j)` -> (score,
    d score / d s); None without a score_mod)."""
    from ._modifiers import index_grids
    b, hq, nq, nk = s.shape
    grids = index_grids(b, hq, nq, nk, s.device)
    chain = None
    if score_mod_grad is not None:
        s, chain = score_mod_grad(s, *grids)
        s = torch.broadcast_to(s, (b, hq, nq, nk)).float()
    t = None
    if softcap is not None:
        t = torch.tanh(s / softcap)
        s = softcap * t
    vis = visible(nq, nk, mask, s.device).expand(b, hq, nq, nk)
    if mask_mod is not None:
        vis = vis & torch.broadcast_to(mask_mod(*grids), vis.shape)
    return s.masked_fill(~vis, -math.inf), vis, t, chain


def attention_modified_backward(dout, q, k, v, mask, scale, softcap, score_mod_grad, mask_mod):
    """(dq, dk, dv) of `attention_modified` with modifiers given as in
    `modified_scores_grad`: FlashAttention's backward formulas on the
    modified scores, dS through the softcap and times the score_mod's
    derivative, as the kernels compute it. Typed like q, k, v (dk, dv
    summed over each GQA group); bhsd views."""
    hkv = k.shape[1]
    g = q.shape[1] // hkv
    kf, vf = k.float(), v.float()
    if g > 1:
        kf = kf.repeat_interleave(g, dim=1)
        vf = vf.repeat_interleave(g, dim=1)
    s, vis, t, chain = modified_scores_grad(torch.matmul(q.float(), kf.transpose(-1, -2)) * scale,
                                            mask, softcap, score_mod_grad, mask_mod)
    rows = vis.any(-1)
    lse = torch.logsumexp(s.masked_fill(~rows[..., None], 0.0), dim=-1)
    p = torch.exp(s - lse[..., None])
    do = dout.float()
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, vf.transpose(-1, -2))
    delta = (do * torch.matmul(p, vf)).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    if t is not None:
        ds = ds * (1 - t * t)
    if chain is not None:   # (hidden scores: 0, whatever the derivative there)
        ds = torch.where(vis, ds * chain, 0.0)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-1, -2), q.float()) * scale
    return (dq.to(q.dtype), _group_sum(dk, hkv).to(k.dtype), _group_sum(dv, hkv).to(v.dtype))


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


# ---------------------------------------------------------------------------
# Packed sequences and paged caches (flashmlir.attention_varlen and
# attention_with_kvcache on CPU tensors): one dense `attention` per sequence.
# ---------------------------------------------------------------------------

def _host_ints(t: torch.Tensor, name: str):
    return [int(x) for x in t.tolist()]


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, mask, scale, softcap):
    """q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv] (FlashAttention's packed
    layout), cu_seqlens_q/k [B + 1] (int). Sequence b is queries
    cu_q[b]..cu_q[b + 1] against keys cu_k[b]..cu_k[b + 1], its mask aligned
    to its own bottom-right corner. Returns out [Tq, Hq, Dv] (q's dtype) and
    lse [Hq, Tq] f32; rows of no sequence get out = 0 and lse = +inf (the GPU
    kernels leave them unwritten). Reads the offsets on the host and checks
    them (ValueError)."""
    cq, ck = _host_ints(cu_seqlens_q, "cu_seqlens_q"), _host_ints(cu_seqlens_k, "cu_seqlens_k")
    tq, hq = q.shape[0], q.shape[1]
    for name, cu, total in (("cu_seqlens_q", cq, tq), ("cu_seqlens_k", ck, k.shape[0])):
        if cu and (cu[0] < 0 or any(b < a for a, b in zip(cu, cu[1:])) or cu[-1] > total):
            raise ValueError(f"{name} must be non-decreasing offsets in [0, {total}], got "
                             f"{cu[:8]}{' ...' if len(cu) > 8 else ''}")
    out = torch.zeros((tq, hq, v.shape[2]), dtype=q.dtype, device=q.device)
    lse = torch.full((hq, tq), math.inf, dtype=torch.float32, device=q.device)
    for b in range(len(cq) - 1):
        q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if q1 == q0:
            continue
        qs = q[q0:q1].transpose(0, 1)[None]
        ks, vs = k[k0:k1].transpose(0, 1)[None], v[k0:k1].transpose(0, 1)[None]
        o, l = attention(qs, ks, vs, mask, scale, softcap)
        out[q0:q1] = o[0].transpose(0, 1)
        lse[:, q0:q1] = l[0]
    return out, lse


def attention_varlen_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, mask, scale,
                              softcap):
    """(dq, dk, dv) of `attention_varlen`, typed and shaped like q, k, v,
    per sequence with `attention_backward`. Rows of no sequence (outside
    every cu_seqlens range) get zero gradients, as the kernels write them."""
    cq, ck = _host_ints(cu_seqlens_q, "cu_seqlens_q"), _host_ints(cu_seqlens_k, "cu_seqlens_k")
    for name, cu, total in (("cu_seqlens_q", cq, q.shape[0]), ("cu_seqlens_k", ck, k.shape[0])):
        if cu and (cu[0] < 0 or any(b < a for a, b in zip(cu, cu[1:])) or cu[-1] > total):
            raise ValueError(f"{name} must be non-decreasing offsets in [0, {total}], got "
                             f"{cu[:8]}{' ...' if len(cu) > 8 else ''}")
    # (Non-decreasing offsets: the sequences' row ranges are disjoint.)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    bhsd = lambda t: t.transpose(0, 1)[None]
    for b in range(len(cq) - 1):
        q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if q1 == q0 or k1 == k0:
            continue
        g = attention_backward(bhsd(dout[q0:q1]), bhsd(q[q0:q1]), bhsd(k[k0:k1]),
                               bhsd(v[k0:k1]), mask, scale, softcap)
        dq[q0:q1] = g[0][0].transpose(0, 1)
        dk[k0:k1] = g[1][0].transpose(0, 1)
        dv[k0:k1] = g[2][0].transpose(0, 1)
    return dq, dk, dv


def gather_pages(pages, page_table_row, n: int):
    """The first `n` rows of a paged cache for one batch: pages [P, Hkv, S,
    D] (bhsd-style view of [P, S, Hkv, D]), key j at row j % S of page
    page_table_row[j // S]. Returns [Hkv, n, D]."""
    s = pages.shape[2]
    if n == 0:
        return pages.new_empty((pages.shape[1], 0, pages.shape[3]))
    j = torch.arange(n, device=pages.device)
    idx = page_table_row.long()[j // s]
    return pages[idx, :, j % s].transpose(0, 1)


def attention_paged(q, k_pages, v_pages, page_table, cache_seqlens, mask, scale, softcap):
    """q [B, Hq, Nq, D] (a bhsd view), k_pages [P, Hkv, S, D] and v_pages [P,
    Hkv, S, Dv] (bhsd-style views of the [P, S, Hkv, D] caches), page_table
    [B, MaxPages], cache_seqlens [B] (int). Batch b attends to its first
    cache_seqlens[b] keys (key j: row j % S of page page_table[b, j // S]),
    its mask aligned to its bottom-right corner. Returns out [B, Hq, Nq, Dv]
    and lse [B, Hq, Nq]. Checks the lengths and page indices (ValueError)."""
    b, hq, nq = q.shape[:3]
    p, s = k_pages.shape[0], k_pages.shape[2]
    lens = _host_ints(cache_seqlens, "cache_seqlens")
    cap = page_table.shape[1] * s
    out = torch.empty((b, hq, nq, v_pages.shape[3]), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, nq), dtype=torch.float32, device=q.device)
    for i in range(b):
        n = lens[i]
        if not 0 <= n <= cap:
            raise ValueError(f"cache_seqlens[{i}] = {n} is outside [0, {cap}] (the page "
                             f"table's {page_table.shape[1]} pages of {s} keys)")
        used = page_table[i, :-(-n // s)] if n else page_table[i, :0]
        if used.numel() and (int(used.min()) < 0 or int(used.max()) >= p):
            raise ValueError(f"page_table[{i}] names pages outside [0, {p}) among its first "
                             f"{used.numel()} entries")
        ks = gather_pages(k_pages, page_table[i], n)[None]
        vs = gather_pages(v_pages, page_table[i], n)[None]
        o, l = attention(q[i:i + 1], ks, vs, mask, scale, softcap)
        out[i] = o[0]
        lse[i] = l[0]
    return out, lse
