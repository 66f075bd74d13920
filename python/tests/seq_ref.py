"""Inputs and per-sequence checks for packed sequences and paged caches
(flashmlir.attention_varlen / attention_with_kvcache), shared by the CPU
tests (test_sequences_fake.py) and the GPU tests (test_gpu_sequences.py).

Every check is FlashAttention's rule of gpu_ref.check, applied to each
sequence on its own: its rows of the packed output (or its batch of the
paged output) against the float64 dense attention of that sequence's
queries and keys, masks aligned to the sequence's bottom-right corner.
"""

import math

import torch

import gpu_ref as R


def offsets(lens, device="cpu"):
    """int32 cumulative offsets [len(lens) + 1] from 0."""
    out = [0]
    for n in lens:
        out.append(out[-1] + int(n))
    return torch.tensor(out, dtype=torch.int32, device=device)


def make_varlen(lens_q, lens_k, hq, hkv, d, dv, dtype, device="cpu", seed=0):
    """Packed q [sum(lens_q), Hq, D], k/v [sum(lens_k), Hkv, D/Dv] and their
    cu_seqlens."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    mk = lambda n, h, dd: torch.randn((n, h, dd), generator=g, device=device,
                                      dtype=torch.float32).to(dtype)
    tq, tk = sum(lens_q), sum(lens_k)
    return (mk(tq, hq, d), mk(tk, hkv, d), mk(tk, hkv, dv), offsets(lens_q, device),
            offsets(lens_k, device))


def check_varlen(out, lse, q, k, v, lens_q, lens_k, mask=(-1, -1), scale=None, softcap=None,
                 what=""):
    """out [Tq, Hq, Dv], lse [Hq, Tq] against each sequence's reference.
    Returns the worst out error ratio stats (a list per sequence)."""
    stats = []
    q0 = k0 = 0
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        if nq:
            sl = lambda t, a, n: t[a:a + n].transpose(0, 1)[None]
            stats.append(R.check(sl(out, q0, nq), lse[None, :, q0:q0 + nq], sl(q, q0, nq),
                                 sl(k, k0, nk), sl(v, k0, nk), mask, scale, softcap,
                                 what=f"{what} sequence {b} (Nq={nq}, Nk={nk})"))
        q0, k0 = q0 + nq, k0 + nk
    return stats


def check_varlen_grads(grads, q, k, v, dout, cu_q, cu_k, mask=(-1, -1), scale=None,
                       softcap=None, what=""):
    """(dq, dk, dv) of attention_varlen ([T, H, D], like q, k, v) per
    sequence under FlashAttention's gradient rule (gpu_ref.check_grads:
    every element finite, i.e. written when poisoned, 0 where nothing is
    visible); rows and keys of no sequence exactly 0."""
    dq, dk, dv = grads
    at_q, at_k = cu_q.tolist(), cu_k.tolist()
    inside_q = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device)
    inside_k = torch.zeros(k.shape[0], dtype=torch.bool, device=k.device)
    for a, b in zip(at_q, at_q[1:]):
        inside_q[a:b] = True
    for a, b in zip(at_k, at_k[1:]):
        inside_k[a:b] = True
    for name, g, inside in (("dq", dq, inside_q), ("dk", dk, inside_k), ("dv", dv, inside_k)):
        assert (g[~inside] == 0).all(), f"{what}: {name} of rows of no sequence must be 0"
    sl = lambda t, a, b: t[a:b].transpose(0, 1)[None].detach()
    stats = []
    for b in range(len(at_q) - 1):
        q0, q1, k0, k1 = at_q[b], at_q[b + 1], at_k[b], at_k[b + 1]
        stats.append(R.check_grads((sl(dq, q0, q1), sl(dk, k0, k1), sl(dv, k0, k1)),
                                   sl(q, q0, q1), sl(k, k0, k1), sl(v, k0, k1),
                                   sl(dout, q0, q1), mask, scale, softcap,
                                   what=f"{what} sequence {b} (Nq={q1 - q0}, Nk={k1 - k0})"))
    return stats


def make_paged(b, nq, hq, hkv, d, dv, lens, page_size, dtype, device="cpu", seed=0,
               shuffle=True, spare_pages=3, max_pages=None):
    """q [B, Nq, Hq, D], paged caches [P, S, Hkv, D/Dv] filled with random
    keys (every page, also past the lengths), a page table [B, max_pages]
    (shuffled page order; entries past a sequence's pages point at random
    pages), cache_seqlens [B] = lens. Returns (q, k_cache, v_cache,
    page_table, seqlens)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    s = page_size
    need = [-(-n // s) for n in lens]
    mp = max_pages if max_pages is not None else max(need + [1])
    p = sum(need) + spare_pages
    mk = lambda shape: torch.randn(shape, generator=g, device=device,
                                   dtype=torch.float32).to(dtype)
    q = mk((b, nq, hq, d))
    kc, vc = mk((p, s, hkv, d)), mk((p, s, hkv, dv))
    order = (torch.randperm(p, generator=g, device=device) if shuffle
             else torch.arange(p, device=device))
    table = torch.randint(0, max(p, 1), (b, mp), generator=g, device=device)
    at = 0
    for i, n in enumerate(need):
        table[i, :n] = order[at:at + n]
        at += n
    return (q, kc, vc, table.to(torch.int32).contiguous(),
            torch.tensor(lens, dtype=torch.int32, device=device))


def dense_keys(cache, table_row, n):
    """Batch keys [1, Hkv, n, D] of a [P, S, Hkv, D] cache (a copy)."""
    s = cache.shape[1]
    j = torch.arange(n, device=cache.device)
    return cache[table_row.long()[j // s], j % s].transpose(0, 1)[None]


def check_paged(out, lse, q, k_cache, v_cache, table, lens, mask=(-1, -1), scale=None,
                softcap=None, what=""):
    """out [B, Nq, Hq, Dv], lse [B, Hq, Nq] against each batch's dense
    reference on its gathered keys."""
    stats = []
    for i, n in enumerate(lens):
        kk, vv = dense_keys(k_cache, table[i], n), dense_keys(v_cache, table[i], n)
        stats.append(R.check(out[i:i + 1].transpose(1, 2), lse[i:i + 1],
                             q[i:i + 1].transpose(1, 2), kk, vv, mask, scale, softcap,
                             what=f"{what} batch {i} (Nk={n})"))
    return stats


def check_contiguous(out, lse, q, k_cache, v_cache, lens, mask=(-1, -1), scale=None,
                     softcap=None, what=""):
    """A contiguous cache [B, Nmax, Hkv, D]: batch i's first lens[i] rows."""
    stats = []
    for i, n in enumerate(lens):
        stats.append(R.check(out[i:i + 1].transpose(1, 2), lse[i:i + 1],
                             q[i:i + 1].transpose(1, 2), k_cache[i:i + 1, :n].transpose(1, 2),
                             v_cache[i:i + 1, :n].transpose(1, 2), mask, scale, softcap,
                             what=f"{what} batch {i} (Nk={n})"))
    return stats


def poisoned(shape, dtype, device):
    return torch.full(shape, math.nan, dtype=dtype, device=device)
