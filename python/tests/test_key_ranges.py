"""_key_ranges.range_tensor against a per-element loop: documents of a packed
batch (per-batch ids), a head-dependent band, the built-in masks with
Nq != Nk, rows that see no key, groups that do not divide Nq, chunks of
one group up to all of them."""

import pytest

torch = pytest.importorskip("torch")

from flashmlir._key_ranges import (backward_query_ranges, derive_query_ranges,  # noqa: E402
                                   range_tensor, range_tensors, union_over_groups)


def brute(mask_mod, B, H, Nq, Nk, rows, mask=(-1, -1)):
    """Per group: [first, last + 1) of the keys some row sees (mask AND
    mask_mod), then the first run of keys the mask_mod shows every row."""
    left, right = mask
    groups = -(-Nq // rows)
    out = torch.zeros((B, H, groups, 4), dtype=torch.int32)
    for b in range(B):
        for h in range(H):
            for g in range(groups):
                lo, hi = Nk, 0
                common = [True] * Nk
                for i in range(g * rows, min(Nq, (g + 1) * rows)):
                    for j in range(Nk):
                        diag = i + Nk - Nq
                        ok = (left < 0 or j >= diag - left) and (right < 0 or j <= diag + right)
                        shown = mask_mod is None or bool(mask_mod(b, h, i, j))
                        common[j] = common[j] and shown
                        if ok and shown:
                            lo, hi = min(lo, j), max(hi, j + 1)
                f0 = f1 = 0
                if any(common):
                    f0 = common.index(True)
                    f1 = f0
                    while f1 < Nk and common[f1]:
                        f1 += 1
                out[b, h, g] = torch.tensor(([lo, hi] if lo < hi else [0, 0]) + [f0, f1])
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
        got = range_tensor(fn, B, H, Nq, Nk, rows=rows, mask=mask, chunk_elements=chunk)
        assert got.dtype == torch.int32 and got.shape == want.shape
        assert torch.equal(got, want), f"{name} rows={rows} chunk={chunk}"


def brute_queries(mask_mod, B, H, Nq, Nk, rows, mask=(-1, -1)):
    """Per group of keys: [first, last + 1) of the queries that see one of
    them (mask AND mask_mod)."""
    left, right = mask
    groups = -(-Nk // rows)
    out = torch.zeros((B, H, groups, 2), dtype=torch.int32)
    for b in range(B):
        for h in range(H):
            for g in range(groups):
                lo, hi = Nq, 0
                for j in range(g * rows, min(Nk, (g + 1) * rows)):
                    for i in range(Nq):
                        diag = i + Nk - Nq
                        ok = (left < 0 or j >= diag - left) and (right < 0 or j <= diag + right)
                        if ok and (mask_mod is None or bool(mask_mod(b, h, i, j))):
                            lo, hi = min(lo, i), max(hi, i + 1)
                if lo < hi:
                    out[b, h, g] = torch.tensor([lo, hi])
    return out


@pytest.mark.parametrize("rows", [1, 7, 16, 64])
@pytest.mark.parametrize("name,fn,B,H,Nq,Nk,mask", CASES, ids=[c[0] for c in CASES])
def test_query_ranges_against_brute_force(name, fn, B, H, Nq, Nk, mask, rows):
    """The backward's ranges (per group of keys, the queries that see
    them), from the same evaluation as the key ranges; the ranges derived
    from the key ranges alone hold them."""
    want = brute_queries(fn, B, H, Nq, Nk, rows, mask)
    for chunk in (1, 10**9):
        keys, got = range_tensors(fn, B, H, Nq, Nk, rows=rows, mask=mask, chunk_elements=chunk)
        assert got.dtype == torch.int32 and got.shape == want.shape
        assert torch.equal(got, want), f"{name} rows={rows} chunk={chunk}"
    derived = derive_query_ranges(keys, rows, Nq, Nk)
    some = want[..., 0] < want[..., 1]
    assert bool(((derived[..., 0] <= want[..., 0]) & (derived[..., 1] >= want[..., 1]))[some].all())
    assert bool((derived[..., 1] <= Nq).all())


def test_query_ranges_union_over_groups():
    """Per key/value head: the union of its group's query heads' ranges
    (an empty one adds nothing; all empty gives (0, 0))."""
    qr = torch.tensor([[[[0, 4], [0, 0]], [[2, 9], [0, 0]],
                        [[0, 0], [0, 0]], [[5, 6], [3, 3]]]], dtype=torch.int32)
    got = union_over_groups(qr, 2)
    assert got.tolist() == [[[[0, 9], [0, 0]], [[5, 6], [0, 0]]]]
    assert union_over_groups(qr, 4) is qr
    with pytest.raises(ValueError, match="do not form groups"):
        union_over_groups(qr, 3)
    # Given per-query-head ranges of another key-group count (another Nk):
    # derived from the key ranges instead.
    keys = range_tensor(documents, 2, 4, 33, 33, rows=8)
    got = backward_query_ranges(keys, qr, 8, 2, 33, 33)
    assert got.shape == (2, 2, 5, 2) and got.is_contiguous()


def test_every_visible_key_is_inside():
    """The promise the kernels rely on, on a random mask."""
    g = torch.Generator().manual_seed(0)
    table = torch.rand(2, 3, 45, 50, generator=g) < 0.05

    def rand_mask(b, h, i, j):
        return table[b, h, i, j]
    r = range_tensor(rand_mask, 2, 3, 45, 50, rows=8)
    b, h, i, j = table.nonzero(as_tuple=True)
    lo, hi = r[b, h, i // 8, 0], r[b, h, i // 8, 1]
    assert bool(((j >= lo) & (j < hi)).all())


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="rows must be an integer >= 1"):
        range_tensor(None, 1, 1, 8, 8, rows=0)
    with pytest.raises(ValueError, match="Nq must be an integer >= 0"):
        range_tensor(None, 1, 1, -1, 8)
    assert range_tensor(None, 1, 2, 0, 8).shape == (1, 2, 0, 4)
    assert range_tensor(None, 1, 1, 5, 0).tolist() == [[[[0, 0, 0, 0]]]]


# -- flashmlir.key_ranges and attention(key_ranges=) on the CPU ----------------------------

import math  # noqa: E402

import flashmlir  # noqa: E402
from flashmlir import _interface, _kernels, _modifiers, _ops  # noqa: E402

DOCS = torch.tensor([[0] * 20 + [1] * 25 + [2] * 19, [0] * 7 + [1] * 50 + [2] * 7],
                    dtype=torch.int32)


def document(b, h, q_idx, kv_idx):
    return DOCS[b, q_idx] == DOCS[b, kv_idx]


def qkv(nq=64, nk=64, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda h, n: torch.randn(2, h, n, 32, generator=g).to(torch.bfloat16) \
        .requires_grad_(grad)
    return make(4, nq), make(2, nk), make(2, nk)


def test_public_key_ranges():
    kr = flashmlir.key_ranges(document, 2, 4, 64, 64, causal=True, rows=16)
    assert isinstance(kr, flashmlir.KeyRanges) and kr.rows == 16
    assert kr.ranges.device == DOCS.device and kr.ranges.shape == (2, 4, 4, 4)
    assert flashmlir.key_ranges(document, 2, 4, 64, 64).rows == 128
    assert torch.equal(kr.ranges, range_tensor(document, 2, 4, 64, 64, 16, mask=(-1, 0)))
    assert torch.equal(flashmlir.key_ranges(document, 2, 4, 64, 64, window=(5, 3), rows=16).ranges,
                       range_tensor(document, 2, 4, 64, 64, 16, mask=(5, 3)))
    with pytest.raises(ValueError, match="rows must be an integer >= 1"):
        flashmlir.KeyRanges(kr.ranges, 0)
    with pytest.raises(ValueError, match=r"int32 tensor \[B, Hq, groups, 4\], got torch.int64"):
        flashmlir.KeyRanges(kr.ranges.long(), 16)
    with pytest.raises(ValueError, match="right bound must be 0"):
        flashmlir.key_ranges(document, 2, 4, 64, 64, causal=True, window=(5, 3))


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_calls_ignore_correct_ranges(causal):
    """The reference (CPU tensors) checks the ranges and computes the same
    as without them, forward and backward."""
    kr = flashmlir.key_ranges(document, 2, 4, 64, 64, causal=causal)
    q, k, v = qkv(grad=True)
    got, lse = flashmlir.attention(q, k, v, causal=causal, mask_mod=document, key_ranges=kr,
                                   return_lse=True)
    want, wlse = flashmlir.attention(q, k, v, causal=causal, mask_mod=document,
                                     return_lse=True)
    assert torch.equal(got, want) and torch.equal(lse, wlse)
    dout = torch.randn(got.shape, generator=torch.Generator().manual_seed(4)).to(got.dtype)
    g1 = torch.autograd.grad(got, (q, k, v), dout)
    g2 = torch.autograd.grad(want, (q, k, v), dout)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))


def test_bad_ranges_are_refused():
    q, k, v = qkv()
    kr = flashmlir.key_ranges(document, 2, 4, 64, 64, rows=64)
    with pytest.raises(ValueError, match="pass the mask_mod too"):
        flashmlir.attention(q, k, v, key_ranges=kr)
    with pytest.raises(TypeError, match="must be a flashmlir.KeyRanges"):
        flashmlir.attention(q, k, v, mask_mod=document, key_ranges=kr.ranges)
    other_heads = flashmlir.key_ranges(document, 2, 2, 64, 64, rows=16)
    with pytest.raises(ValueError, match=r"\[B, Hq, ceil\(Nq / 16\), 4\] = \[2, 4, 4, 4\] for "
                                         r"this call, got torch.int32 of shape \[2, 2, 4, 4\]"):
        flashmlir.attention(q, k, v, mask_mod=document, key_ranges=other_heads)
    meta = flashmlir.KeyRanges(kr.ranges.to("meta"), 64)
    with pytest.raises(ValueError, match="the ranges are on meta but q, k and v are on cpu"):
        flashmlir.attention(q, k, v, mask_mod=document, key_ranges=meta)


def test_traced_with_key_ranges():
    tr = _modifiers.trace(mask_mod=document)
    r64 = tr.with_key_ranges(64)
    assert r64 is tr.with_key_ranges(64) and r64.with_key_ranges(None) is tr
    assert r64.with_key_ranges(32) is tr.with_key_ranges(32) and tr.with_key_ranges(None) is tr
    assert r64.key() == tr.key() + "|key_ranges rows 64" and r64.digest() != tr.digest()
    back = _modifiers.from_key(r64.op_key(), list(r64.captures))
    assert back.key_range_rows == 64 and back.digest() == r64.digest()
    assert _modifiers.from_key(tr.op_key(), list(tr.captures)).key_range_rows is None
    text = r64.module((2, 4, 100, 32), (2, 2, 90, 32), (2, 2, 90, 32), "bf16", "mask<causal>")
    assert "%ranges: tensor<2x4x2x4xi32>" in text
    assert "fa.attention %q, %k, %v mask<causal> key_ranges(%ranges rows 64)" in text


def test_traced_module_verifies_and_lowers(tmp_path):
    """fa-opt verifies the module with key_ranges and lowers it through
    the tiled CPU pipeline."""
    import os
    import subprocess
    fa_opt = os.path.join(os.environ.get("FA_BUILD_DIR", "build"), "bin", "fa-opt")
    if not os.path.exists(fa_opt):
        pytest.skip("fa-opt not built")
    tr = _modifiers.trace(mask_mod=document).with_key_ranges(16)
    src = tmp_path / "m.mlir"
    src.write_text(tr.module((2, 4, 64, 32), (2, 2, 64, 32), (2, 2, 64, 32), "f16"))
    for args in ([], ["--fa-tiled-cpu=block-q=32 block-kv=16"]):
        r = subprocess.run([fa_opt, str(src)] + args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + src.read_text()


def test_requests():
    meta = [torch.empty(s, dtype=torch.bfloat16, device="meta")
            for s in ((2, 4, 64, 32), (2, 2, 64, 32), (2, 2, 64, 32))]
    fwd = _interface.forward_request(*meta, mask_mod=document, key_ranges=64)
    bwd = _interface.backward_request(*meta, mask_mod=document, key_ranges=64)
    plain = _interface.forward_request(*meta, mask_mod=document)
    assert fwd.modifiers.key_range_rows == 64 and fwd.modifiers.key != plain.modifiers.key
    assert "_kr64_sm90a_mod_" in fwd.kernel_name("sm_90a")
    # The backward kernels of ranged modifiers take the query ranges.
    assert bwd.modifiers.key_range_rows == 64 and bwd.modifiers.key == fwd.modifiers.key
    assert "_kr64_sm90a_mod_" in bwd.kernel_name("sm_90a")
    with pytest.raises(ValueError, match="pass the mask_mod too"):
        _interface.forward_request(*meta, key_ranges=64)


def test_torch_compile_with_key_ranges():
    """fullgraph, dynamic shapes: the ranges a graph input of the custom
    ops, the key naming the rows; forward and backward equal eager."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounterWithBackend("aot_eager")

    def f(q, k, v, kr):
        return flashmlir.attention(q, k, v, causal=True, mask_mod=document, key_ranges=kr)
    cf = torch.compile(f, backend=cnt, fullgraph=True, dynamic=True)
    for n in (64, 48):
        q, k, v = qkv(n, n, grad=True, seed=n)
        kr = flashmlir.key_ranges(document, 2, 4, n, n, causal=True, rows=16)
        got = cf(q, k, v, kr)
        want = f(q, k, v, kr)
        assert torch.equal(got, want)
        dout = torch.randn(got.shape, generator=torch.Generator().manual_seed(2)).to(got.dtype)
        for a, b in zip(torch.autograd.grad(got, (q, k, v), dout),
                        torch.autograd.grad(want, (q, k, v), dout)):
            assert torch.equal(a, b)
    assert not counters["graph_break"]
    nodes = [n for g in cnt.graphs for n in g.graph.nodes
             if n.op == "call_function" and "attention_forward_mod" in str(n.target)]
    assert nodes and all(any(isinstance(a, str) and "key_ranges rows 16" in a for a in n.args)
                         for n in nodes)


def test_custom_ops_check_the_ranges():
    q, k, v = qkv()
    tr = _modifiers.trace(mask_mod=document).with_key_ranges(64)
    kr = flashmlir.key_ranges(document, 2, 4, 64, 64, rows=64)
    args = (q, k, v, list(tr.captures), tr.op_key(), False, -1, -1, None, None, "bhsd", False)
    torch.library.opcheck(_ops.attention_forward_mod, args + (kr.ranges,))
    with pytest.raises(TypeError, match="the ranges must be a torch.Tensor, got NoneType"):
        _ops.attention_forward_mod(*args)
    meta = [t.to("meta") for t in (q, k, v)]
    with pytest.raises(ValueError, match=r"ceil\(Nq / 64\), 4\] = \[2, 4, 1, 4\]"):
        _ops.attention_forward_mod(*meta, [DOCS.to("meta")], *args[4:],
                                   kr.ranges[:, :1].to("meta"))
    plain = _modifiers.trace(mask_mod=document)
    with pytest.raises(ValueError, match="key ranges given to modifiers compiled without them"):
        _ops.attention_forward_mod(q, k, v, list(plain.captures), plain.op_key(), *args[5:],
                                   kr.ranges)
