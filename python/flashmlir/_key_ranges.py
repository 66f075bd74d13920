"""Run-time key ranges of a mask: what fa.attention's `key_ranges(%r rows
G)` operand carries (docs/ARCHITECTURE.md 1.1) for masks no compiler pass
can analyze, such as a document mask over per-token ids.

    ranges = flashmlir.key_ranges(document, B, Hq, N, N, causal=True)
    out = flashmlir.attention(q, k, v, causal=True, mask_mod=document,
                              key_ranges=ranges)

For batch b, query head h and the query rows [g G, (g + 1) G), the range
[r[b, h, g, 0], r[b, h, g, 1]) runs from the first to one past the last key
that some row of the group sees; a group whose rows see no key gets
(0, 0). The forward kernel then visits only the key blocks of each query
block's ranges (FlexAttention's create_block_mask plays the same part, in
block form). Computing it evaluates the mask on every (query, key) pair, so
it is done once per mask and reused, not per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

# Elements of one [B, H, rows, Nk] chunk of the evaluated mask.
CHUNK_ELEMENTS = 1 << 26
# Query rows per group by default: the query block of the sm_90a kernels at
# D = 128 (one group a block: the producer warp that reads the ranges
# stays within its registers; 64 spills it).
DEFAULT_ROWS = 128
# The columns of the ranges: [first, end) of the keys some row of the group
# sees, [first, end) of the keys the mask_mod shows every row of it.
COLUMNS = 4


@dataclass(frozen=True)
class KeyRanges:
    """flashmlir.KeyRanges: the key ranges of a mask for calls of one [B, Hq,
    Nq] (attention's key_ranges=): `ranges`, [B, Hq, ceil(Nq / rows), 4]
    int32, per group of `rows` query rows the keys [first, last + 1) some
    row sees ((0, 0): none), then the first run of keys [first, end) the
    mask_mod shows every row of the group ((0, 0): none). Kernels are
    compiled per `rows`."""

    ranges: torch.Tensor
    rows: int
    # [B, Hq, ceil(Nk / rows), 2] int32: per group of `rows` keys, the
    # queries [first, last + 1) that see one of them ((0, 0): none), what
    # the backward kernels visit per key block (flashmlir.key_ranges
    # computes both; None: the backward derives them from `ranges`, at the
    # granularity of its row groups).
    query_ranges: Optional[torch.Tensor] = None

    def __post_init__(self):
        if isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 1:
            raise ValueError(f"KeyRanges: rows must be an integer >= 1, got {self.rows!r}")
        r = self.ranges
        if not isinstance(r, torch.Tensor) or r.dtype != torch.int32 or r.dim() != 4 \
                or r.shape[-1] != COLUMNS:
            what = (f"{r.dtype} of shape {list(r.shape)}" if isinstance(r, torch.Tensor)
                    else type(r).__name__)
            raise ValueError(f"KeyRanges: ranges must be an int32 tensor [B, Hq, groups, "
                             f"{COLUMNS}], "
                             f"got {what}")

        qr = self.query_ranges
        if qr is not None and (not isinstance(qr, torch.Tensor) or qr.dtype != torch.int32
                               or qr.dim() != 4 or qr.shape[-1] != 2
                               or tuple(qr.shape[:2]) != tuple(r.shape[:2])
                               or qr.device != r.device):
            what = (f"{qr.dtype} of shape {list(qr.shape)} on {qr.device}"
                    if isinstance(qr, torch.Tensor) else type(qr).__name__)
            raise ValueError(f"KeyRanges: query_ranges must be an int32 tensor [B, Hq, "
                             f"key groups, 2] with the ranges' B, Hq ({list(r.shape[:2])}) "
                             f"and device ({r.device}), got {what}")

    def to(self, device) -> "KeyRanges":
        return KeyRanges(self.ranges.to(device), self.rows,
                         None if self.query_ranges is None else self.query_ranges.to(device))

    def backward_ranges(self, Hkv: int, Nq: int, Nk: int) -> torch.Tensor:
        """The backward kernels' query_ranges: [B, Hkv, ceil(Nk / rows), 2]
        int32, per key/value head the union over its group of query heads
        (query_ranges, or ranges transposed when it is None)."""
        return backward_query_ranges(self.ranges, self.query_ranges, self.rows, Hkv, Nq, Nk)


def backward_query_ranges(ranges: torch.Tensor, query_ranges: Optional[torch.Tensor],
                          rows: int, Hkv: int, Nq: int, Nk: int) -> torch.Tensor:
    """KeyRanges.backward_ranges on its tensors: [B, Hkv, ceil(Nk / rows), 2]
    int32, contiguous."""
    qr = query_ranges
    if qr is None or qr.shape[2] != -(-Nk // rows):
        qr = derive_query_ranges(ranges, rows, Nq, Nk)
    return union_over_groups(qr, Hkv).contiguous()


def key_ranges(mask_mod: Optional[Callable], B: int, H: int, Nq: int, Nk: int, *,
               causal: bool = False, window=None, rows: int = DEFAULT_ROWS,
               device=None) -> KeyRanges:
    """flashmlir.key_ranges(mask_mod, B, H, Nq, Nk, *, causal=False,
    window=None, rows=64, device=None): the KeyRanges of mask_mod(b, h,
    q_idx, kv_idx) AND the built-in causal / window mask (as attention takes
    them) for calls with q [B, H, Nq, .] (H the query heads) and Nk keys,
    on `device` (default: where the mask_mod's captured tensors are, else
    the CPU; it must be the calls' device). Evaluates the mask on every (query, key) pair, in chunks of
    rows: make it once per mask, not per call."""
    from . import _manifest as M
    mask = M.canonical_mask(bool(causal), window)
    if device is None and mask_mod is not None:
        # Where the mask_mod's captured tensors are (its indices must be too).
        from ._modifiers import trace
        captures = trace(mask_mod=mask_mod).captures
        device = captures[0].device if captures else None
    ranges, query_ranges = range_tensors(mask_mod, B, H, Nq, Nk, rows, device, mask)
    return KeyRanges(ranges, rows, query_ranges)


def derive_query_ranges(ranges: torch.Tensor, rows: int, Nq: int, Nk: int) -> torch.Tensor:
    """[B, H, ceil(Nk / rows), 2] int32 from key ranges [B, H, ceil(Nq / rows),
    2 or 4]: per group of `rows` keys, the rows of the query groups whose
    key range meets it (a superset of the queries that see those keys)."""
    B, H, gq = ranges.shape[:3]
    gk = -(-Nk // rows)
    lo, hi = ranges[..., 0].long(), ranges[..., 1].long()
    k0 = torch.arange(gk, device=ranges.device) * rows
    meets = ((lo < hi)[..., None] & (lo[..., None] < (k0 + rows).clamp(max=Nk))
             & (hi[..., None] > k0))                                  # [B, H, gq, gk]
    some = meets.any(2)
    first = meets.int().argmax(2)
    last = gq - 1 - meets.flip(2).int().argmax(2)
    out = torch.zeros((B, H, gk, 2), dtype=torch.int32, device=ranges.device)
    out[..., 0] = torch.where(some, first * rows, 0).to(torch.int32)
    out[..., 1] = torch.where(some, ((last + 1) * rows).clamp(max=Nq), 0).to(torch.int32)
    return out


def union_over_groups(query_ranges: torch.Tensor, Hkv: int) -> torch.Tensor:
    """[B, Hkv, G, 2] from per-query-head ranges [B, Hq, G, 2]: the union
    over each key/value head's group of Hq / Hkv query heads."""
    B, Hq, g, _ = query_ranges.shape
    if Hkv == Hq:
        return query_ranges
    if Hkv <= 0 or Hq % Hkv:
        raise ValueError(f"key_ranges: {Hq} query heads do not form groups of {Hkv} "
                         f"key/value heads")
    r = query_ranges.view(B, Hkv, Hq // Hkv, g, 2)
    lo, hi = r[..., 0], r[..., 1]
    empty = lo >= hi
    big = torch.iinfo(torch.int32).max
    ulo = torch.where(empty, big, lo).amin(2)
    uhi = torch.where(empty, 0, hi).amax(2)
    none = ulo >= uhi
    return torch.stack([torch.where(none, 0, ulo), torch.where(none, 0, uhi)], -1
                       ).to(torch.int32).contiguous()


def range_tensor(mask_mod: Optional[Callable], B: int, H: int, Nq: int, Nk: int,
                 rows: int = 64, device=None, mask: Tuple[int, int] = (-1, -1),
                 chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:
    """range_tensors' key ranges."""
    return range_tensors(mask_mod, B, H, Nq, Nk, rows, device, mask, chunk_elements)[0]


def range_tensors(mask_mod: Optional[Callable], B: int, H: int, Nq: int, Nk: int,
                  rows: int = 64, device=None, mask: Tuple[int, int] = (-1, -1),
                  chunk_elements: int = CHUNK_ELEMENTS) -> Tuple[torch.Tensor, torch.Tensor]:
    """The key ranges (below) and the query ranges, [B, H, ceil(Nk / rows),
    2] int32: per group of `rows` keys the queries [first, last + 1) that
    see one of them ((0, 0): none), from one evaluation of the mask.

    The key ranges: [B, H, ceil(Nq / rows), 4] int32 (on `device`): per group of `rows`
    query rows, the keys [first, last + 1) that `mask_mod(b, h, q_idx,
    kv_idx)` AND the built-in `mask` (canonical (left, right), bottom-right
    aligned; -1 unbounded) show to some row of the group ((0, 0): none),
    then the first run [first, end) of keys the mask_mod alone shows to
    every row of it ((0, 0): none; the kernels run those key blocks without
    the mask_mod, the built-in mask still applied)."""
    for name, v in (("B", B), ("H", H), ("Nq", Nq), ("Nk", Nk), ("rows", rows)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "rows" else 0):
            raise ValueError(f"key_ranges: {name} must be an integer >= "
                             f"{1 if name == 'rows' else 0}, got {v!r}")
    left, right = mask
    groups = -(-Nq // rows)
    out = torch.zeros((B, H, groups, COLUMNS), dtype=torch.int32, device=device)
    key_groups = -(-Nk // rows)
    qout = torch.zeros((B, H, key_groups, 2), dtype=torch.int32, device=device)
    if Nq == 0 or Nk == 0:
        return out, qout
    # Per key: the first and one past the last query that sees it.
    qfirst = torch.full((B, H, Nk), Nq, dtype=torch.long, device=device)
    qend = torch.zeros((B, H, Nk), dtype=torch.long, device=device)
    bi = torch.arange(B, device=device).view(B, 1, 1, 1)
    hi = torch.arange(H, device=device).view(1, H, 1, 1)
    kj = torch.arange(Nk, device=device).view(1, 1, 1, Nk)
    # Whole groups per chunk, at least one.
    per_chunk = max(1, chunk_elements // max(1, B * H * Nk * rows)) * rows
    for r0 in range(0, Nq, per_chunk):
        r1 = min(Nq, r0 + per_chunk)
        qi = torch.arange(r0, r1, device=device).view(1, 1, r1 - r0, 1)
        vis = torch.ones((1, 1, r1 - r0, Nk), dtype=torch.bool, device=device)
        diag = qi + (Nk - Nq)
        if left >= 0:
            vis = vis & (kj >= diag - left)
        if right >= 0:
            vis = vis & (kj <= diag + right)
        shown = torch.ones((B, H, r1 - r0, Nk), dtype=torch.bool, device=device)
        if mask_mod is not None:
            shown = shown & torch.as_tensor(mask_mod(bi, hi, qi, kj), device=device).bool()
        vis = vis & shown
        seen_k = vis.any(-2)
        qfirst = torch.where(seen_k, torch.minimum(qfirst, vis.int().argmax(-2) + r0), qfirst)
        qend = torch.where(seen_k, torch.maximum(qend, r1 - vis.flip(-2).int().argmax(-2)), qend)
        seen = vis.any(-1)
        first = torch.where(seen, vis.int().argmax(-1), torch.full_like(seen, Nk, dtype=torch.long))
        last = torch.where(seen, Nk - vis.flip(-1).int().argmax(-1),
                           torch.zeros_like(seen, dtype=torch.long))
        # Per group of rows (the chunk holds whole groups, the last maybe
        # short): the union.
        n = r1 - r0
        pad = (-n) % rows
        if pad:
            first = torch.cat([first, first.new_full((B, H, pad), Nk)], -1)
            last = torch.cat([last, last.new_zeros((B, H, pad))], -1)
        lo = first.view(B, H, -1, rows).amin(-1)
        hi_ = last.view(B, H, -1, rows).amax(-1)
        empty = lo >= hi_
        g0 = r0 // rows
        g1 = g0 + lo.shape[-1]
        out[:, :, g0:g1, 0] = torch.where(empty, 0, lo).to(torch.int32)
        out[:, :, g0:g1, 1] = torch.where(empty, 0, hi_).to(torch.int32)
        # The keys the mask_mod shows every row of the group (rows past Nq
        # restrict nothing): the first run of them.
        if pad:
            shown = torch.cat([shown, shown.new_ones((B, H, pad, Nk))], -2)
        common = shown.view(B, H, -1, rows, Nk).all(-2)
        some = common.any(-1)
        f0 = common.int().argmax(-1)
        after = ~common & (kj.view(1, 1, 1, Nk) >= f0[..., None])
        f1 = torch.where(after.any(-1), after.int().argmax(-1),
                         torch.full_like(f0, Nk))
        out[:, :, g0:g1, 2] = torch.where(some, f0, 0).to(torch.int32)
        out[:, :, g0:g1, 3] = torch.where(some, f1, 0).to(torch.int32)
    # Per group of keys: the union.
    pad = key_groups * rows - Nk
    if pad:
        qfirst = torch.cat([qfirst, qfirst.new_full((B, H, pad), Nq)], -1)
        qend = torch.cat([qend, qend.new_zeros((B, H, pad))], -1)
    lo = qfirst.view(B, H, key_groups, rows).amin(-1)
    hi_ = qend.view(B, H, key_groups, rows).amax(-1)
    empty = lo >= hi_
    qout[..., 0] = torch.where(empty, 0, lo).to(torch.int32)
    qout[..., 1] = torch.where(empty, 0, hi_).to(torch.int32)
    return out, qout
