"""Gradients of the tensors a score_mod reads (a learned bias table, ALiBi
slopes) for the kernel path, computed after the backward kernels from what
the forward saved, by rows in chunks so that memory stays
O(chunk * Nk), never O(Nq * Nk).

With u = softcap(score_mod(scale * q k^T)) the final scores (natural
units, -inf where hidden), P = exp(u - lse) and dP = dO V^T, the loss's
gradient in u is FlashAttention's dS = P * (dP - delta) with
delta = rowsum(P * dP) (that is rowsum(dO * O), but without O's rounding:
a capture's gradient sums dS over every score); a captured tensor's gradient is dS pulled back
through the score_mod by autograd (`torch.autograd.grad(u, captures, dS)`),
chunk by chunk, summed. The kernels give dq, dk and dv; this adds two
GEMMs per chunk and the score_mod's elementwise work (PyTorch ops), so a
call whose captures require grad costs about a reference backward's time
but not its memory.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import torch

# Elements of one [B, Hq, rows, Nk] f32 chunk (a few of them live at once).
CHUNK_ELEMENTS = 1 << 24


def _visible_rows(r0: int, r1: int, nq: int, nk: int, mask: Tuple[int, int], device):
    """Rows r0..r1 of reference.visible(nq, nk, mask): [r1 - r0, nk] bool."""
    left, right = mask
    i = torch.arange(r0, r1, device=device)[:, None]
    j = torch.arange(nk, device=device)[None, :]
    diag = i + (nk - nq)
    vis = torch.ones(r1 - r0, nk, dtype=torch.bool, device=device)
    if left >= 0:
        vis = vis & (j >= diag - left)
    if right >= 0:
        vis = vis & (j <= diag + right)
    return vis


def capture_gradients(dout, q, k, v, out, lse, mask, scale, softcap, score_mod, mask_mod,
                      captures: Sequence[torch.Tensor],
                      chunk_elements: int = CHUNK_ELEMENTS) -> Tuple[torch.Tensor, ...]:
    """d loss / d capture for each tensor of `captures` (those the
    modifiers read that require grad; the functions must read exactly these
    objects), typed like them. bhsd views: dout, q, out [B, Hq, Nq, Dv|D],
    k, v [B, Hkv, Nk, D|Dv]; lse [B, Hq, Nq] f32 (+inf on rows that see no
    key)."""
    b, hq, nq, _ = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    g = hq // hkv
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32   # (f32 math)
    kf, vf = k.to(ct), v.to(ct)
    if g > 1:
        kf, vf = kf.repeat_interleave(g, dim=1), vf.repeat_interleave(g, dim=1)
    kt, vt = kf.transpose(-1, -2), vf.transpose(-1, -2)
    dev = q.device
    grads = [torch.zeros_like(c, dtype=ct) for c in captures]
    rows = max(1, min(nq, chunk_elements // max(1, b * hq * nk)))
    bi = torch.arange(b, device=dev).view(b, 1, 1, 1)
    hi = torch.arange(hq, device=dev).view(1, hq, 1, 1)
    ki = torch.arange(nk, device=dev).view(1, 1, 1, nk)
    for r0 in range(0, nq, rows):
        r1 = min(nq, r0 + rows)
        qi = torch.arange(r0, r1, device=dev).view(1, 1, r1 - r0, 1)
        with torch.no_grad():
            s = torch.matmul(q[:, :, r0:r1].to(ct), kt) * scale
            do = dout[:, :, r0:r1].to(ct)
            dp = torch.matmul(do, vt)
            vis = _visible_rows(r0, r1, nq, nk, mask, dev).expand(b, hq, r1 - r0, nk)
            if mask_mod is not None:
                vis = vis & torch.broadcast_to(
                    torch.as_tensor(mask_mod(bi, hi, qi, ki), device=dev), vis.shape)
        with torch.enable_grad():
            u = torch.broadcast_to(score_mod(s, bi, hi, qi, ki), s.shape).to(ct)
            if softcap is not None:
                u = softcap * torch.tanh(u / softcap)
            with torch.no_grad():
                p = torch.exp(u.detach() - lse[:, :, r0:r1, None]).masked_fill_(~vis, 0.0)
                # delta = rowsum(P * dP) = rowsum(dO * O) exactly, but not
                # from the rounded O: a capture's gradient sums dS over
                # every score, and delta's rounding error does not cancel.
                delta = (p * dp).sum(-1, keepdim=True)
                ds = p.mul_(dp.sub_(delta))
            parts = torch.autograd.grad(u, list(captures), ds, allow_unused=True)
        for acc, part in zip(grads, parts):
            if part is not None:
                acc += part.to(ct)
        del s, dp, p, ds, u
    return tuple(gr.to(c.dtype) for gr, c in zip(grads, captures))
