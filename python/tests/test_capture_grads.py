"""Captured tensors' gradients by row chunks (_capture_grads) against
autograd of the PyTorch reference (float64), on CPU tensors: bias tables,
ALiBi slopes, GQA, masks, softcap, a mask_mod, rows that see no key, and
chunks of one row up to the whole matrix."""

import math

import pytest

torch = pytest.importorskip("torch")

from flashmlir import _capture_grads, _reference  # noqa: E402


def problem(b=2, hq=4, hkv=2, nq=37, nk=53, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, nq, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, hkv, nk, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, nk, d, generator=g, dtype=torch.float64)
    dout = torch.randn(b, hq, nq, d, generator=g, dtype=torch.float64)
    return g, q, k, v, dout


def reference64(q, k, v, mask, scale, softcap, score_mod, mask_mod):
    """_reference.attention_modified in float64 (it computes in f32)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s, vis = _reference.modified_scores(torch.matmul(q, k.transpose(-1, -2)) * scale, mask,
                                        None, None, mask_mod)
    b, h, nq, nk = s.shape
    from flashmlir._modifiers import index_grids
    u = score_mod(torch.matmul(q, k.transpose(-1, -2)) * scale, *index_grids(b, h, nq, nk, "cpu"))
    u = torch.broadcast_to(u, s.shape)
    if softcap is not None:
        u = softcap * torch.tanh(u / softcap)
    rows = vis.any(-1)
    u = u.masked_fill(~vis, -math.inf).masked_fill(~rows[..., None], 0.0)
    lse = torch.logsumexp(u, dim=-1)
    p = torch.exp(u - lse[..., None]) * rows[..., None]
    lse = torch.where(rows, lse, torch.full((), math.inf, dtype=lse.dtype))
    return torch.matmul(p, v), lse


def check(mods, caps, mask=(-1, -1), softcap=None, chunk=1 << 24, **shape):
    g, q, k, v, dout = problem(**shape)
    score_mod, mask_mod = mods
    scale = 1 / math.sqrt(q.shape[-1])
    out, lse = reference64(q, k, v, mask, scale, softcap, score_mod, mask_mod)
    want = torch.autograd.grad(out, caps, dout)
    with torch.no_grad():
        got = _capture_grads.capture_gradients(dout, q, k, v, out, lse, mask, scale, softcap,
                                               score_mod, mask_mod, caps, chunk)
    for w, gt in zip(want, got):
        torch.testing.assert_close(gt, w, rtol=1e-9, atol=1e-10)
    return got


@pytest.mark.parametrize("chunk", [1, 53 * 8 * 5, 1 << 24])
@pytest.mark.parametrize("mask, softcap", [((-1, -1), None), ((-1, 0), None), ((7, 3), 2.5)])
def test_relative_bias_table(chunk, mask, softcap):
    nq, nk = 37, 53
    table = torch.randn(nq + nk - 1, dtype=torch.float64, requires_grad=True)

    def score_mod(s, b, h, qi, ki):
        return s + table[qi - ki + nk - 1]
    got = check((score_mod, None), [table], mask, softcap, chunk)
    assert got[0].abs().sum() > 0


def test_alibi_slopes_and_per_head_table_with_mask_mod():
    hq, nq, nk = 4, 37, 53
    slopes = torch.rand(hq, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(hq, nq, nk, dtype=torch.float64, requires_grad=True)
    doc = torch.randint(0, 3, (2, 60)).sort(dim=1).values

    def score_mod(s, b, h, qi, ki):
        return s + slopes[h] * (ki - qi) + bias[h, qi, ki]

    def mask_mod(b, h, qi, ki):
        return doc[b, qi] == doc[b, ki]
    got = check((score_mod, mask_mod), [slopes, bias], (-1, 0), None, 200)
    # Keys a query never sees give the bias no gradient.
    assert got[1].shape == bias.shape


def test_rows_that_see_no_key():
    """Queries outnumbering keys under the causal mask: leading rows see
    nothing (lse = +inf) and contribute nothing."""
    table = torch.randn(8, dtype=torch.float64, requires_grad=True)

    def score_mod(s, b, h, qi, ki):
        return s * table[h] + table[4 + h % 4]
    check((score_mod, None), [table], (-1, 0), None, 64, hq=4, hkv=4, nq=40, nk=20)
