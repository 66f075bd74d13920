"""_key_ranges.key_ranges against a per-element loop: documents of a packed
batch (per-batch ids), a head-dependent band, the built-in masks with
Nq != Nk, rows that see no key, groups that do not divide Nq, chunks of
one group up to all of them."""

import pytest

torch = pytest.importorskip("torch")

from flashmlir._key_ranges import key_ranges  # noqa: E402


def brute(mask_mod, B, H, Nq, Nk, rows, mask=(-1, -1)):
    left, right = mask
    groups = -(-Nq // rows)
    out = torch.zeros((B, H, groups, 2), dtype=torch.int32)
    for b in range(B):
        for h in range(H):
            for g in range(groups):
                lo, hi = Nk, 0
                for i in range(g * rows, min(Nq, (g + 1) * rows)):
                    for j in range(Nk):
                        diag = i + Nk - Nq
                        ok = (left < 0 or j >= diag - left) and (right < 0 or j <= diag + right)
                        if ok and (mask_mod is None or bool(mask_mod(b, h, i, j))):
                            lo, hi = min(lo, j), max(hi, j + 1)
                out[b, h, g] = torch.tensor([lo, hi] if lo < hi else [0, 0])
    return out


DOCS = torch.tensor([[0] * 9 + [1] * 14 + [2] * 10, [0] * 20 + [1] * 3 + [2] * 10])


def documents(b, h, i, j):
    return DOCS[b, i] == DOCS[b, j]


def head_band(b, h, i, j):
    return (j <= i) & (j >= i - (3 + 5 * h))


def nothing_for_early_rows(b, h, i, j):
    return (i >= 10) & (j < 7)


CASES = [
    ("documents", documents, 2, 3, 33, 33, (-1, -1)),
    ("documents_causal", documents, 2, 1, 33, 33, (-1, 0)),
    ("head_band", head_band, 1, 3, 29, 29, (-1, -1)),
    ("window_nq_lt_nk", None, 1, 2, 17, 40, (4, 2)),
    ("causal_nq_gt_nk", None, 2, 1, 40, 17, (-1, 0)),
    ("empty_rows", nothing_for_early_rows, 1, 2, 31, 12, (-1, -1)),
]


@pytest.mark.parametrize("rows", [1, 4, 7, 16, 64])
@pytest.mark.parametrize("name,fn,B,H,Nq,Nk,mask", CASES, ids=[c[0] for c in CASES])
def test_against_brute_force(name, fn, B, H, Nq, Nk, mask, rows):
    want = brute(fn, B, H, Nq, Nk, rows, mask)
    for chunk in (1, 10**9):   # one group per chunk, all at once
        got = key_ranges(fn, B, H, Nq, Nk, rows=rows, mask=mask, chunk_elements=chunk)
        assert got.dtype == torch.int32 and got.shape == want.shape
        assert torch.equal(got, want), f"{name} rows={rows} chunk={chunk}"


def test_every_visible_key_is_inside():
    """The promise the kernels rely on, on a random mask."""
    g = torch.Generator().manual_seed(0)
    table = torch.rand(2, 3, 45, 50, generator=g) < 0.05

    def rand_mask(b, h, i, j):
        return table[b, h, i, j]
    r = key_ranges(rand_mask, 2, 3, 45, 50, rows=8)
    b, h, i, j = table.nonzero(as_tuple=True)
    lo, hi = r[b, h, i // 8, 0], r[b, h, i // 8, 1]
    assert bool(((j >= lo) & (j < hi)).all())


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="rows must be an integer >= 1"):
        key_ranges(None, 1, 1, 8, 8, rows=0)
    with pytest.raises(ValueError, match="Nq must be an integer >= 0"):
        key_ranges(None, 1, 1, -1, 8)
    assert key_ranges(None, 1, 2, 0, 8).shape == (1, 2, 0, 2)
    assert key_ranges(None, 1, 1, 5, 0).tolist() == [[[[0, 0]]]]
