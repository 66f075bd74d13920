"""Argument checks of `flashmlir.attention` that need no torch: options,
shapes, strides and alignment, on plain Python values (so they can be
tested on a machine without torch or a GPU)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from . import _manifest as M

LAYOUTS = ("bhsd", "bshd")
MAX_HEAD_DIM = 256
# The longest sequence the GPU kernels take (kMaxKernelSequenceLength in
# include/fa/Dialect/FA/IR/KernelResources.h: 32-bit index and mask math).
MAX_SEQUENCE_LENGTH = 1 << 28


@dataclass(frozen=True)
class Options:
    causal: bool
    mask: Tuple[int, int]            # canonical (left, right); -1 unbounded
    scale: float                     # resolved
    softcap: Optional[float]
    scale_given: bool


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_bool(name: str, value) -> bool:
    """A Python bool (numpy.bool_ is not one: accepted by duck typing)."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ in ("bool_", "bool") and hasattr(value, "item"):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {type(value).__name__}")


def check_options(causal, window, scale, softcap, head_dim: int) -> Options:
    causal = check_bool("causal", causal)
    if window is not None:
        if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
            raise TypeError(f"window must be None or a pair (left, right), got {window!r}")
        w = []
        for x in window:
            if isinstance(x, bool) or not isinstance(x, numbers.Integral):
                raise TypeError(f"window bounds must be integers, got {window!r}")
            w.append(int(x))
        if w[0] < -1 or w[1] < -1:
            raise ValueError(f"window bounds must be >= 0, or -1 for unbounded; got {tuple(w)}")
        if causal and w[1] not in (0, -1):
            raise ValueError(
                "causal attention sees no key to the right of the diagonal: with "
                f"causal=True the window's right bound must be 0 (or -1), got {w[1]}")
        window = tuple(w)
    mask = M.canonical_mask(causal, window)
    scale_given = scale is not None
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    else:
        if not _is_real(scale):
            raise TypeError(f"scale must be a real number or None, got {type(scale).__name__}")
        scale = float(scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {scale}")
    if softcap is not None:
        if not _is_real(softcap):
            raise TypeError(f"softcap must be a real number or None, got {type(softcap).__name__}")
        softcap = float(softcap)
        if not (math.isfinite(softcap) and softcap > 0):
            raise ValueError(f"softcap must be None or a finite number > 0, got {softcap}")
    return Options(mask[1] == 0, mask, scale, softcap, scale_given)


@dataclass(frozen=True)
class Dims:
    B: int
    Hq: int
    Hkv: int
    Nq: int
    Nk: int
    D: int
    Dv: int

    def env(self):
        return {"B": self.B, "Hq": self.Hq, "Hkv": self.Hkv, "Nq": self.Nq,
                "Nk": self.Nk, "D": self.D, "Dv": self.Dv,
                "G": self.Hq // self.Hkv if self.Hkv else 0}

    @property
    def empty_output(self) -> bool:
        return self.B == 0 or self.Hq == 0 or self.Nq == 0


def to_bhsd(shape: Sequence[int], layout: str) -> Tuple[int, int, int, int]:
    """[B, H, N, D] from a shape given in `layout`."""
    b, x, y, d = shape
    return (b, x, y, d) if layout == "bhsd" else (b, y, x, d)


def check_layout(layout) -> str:
    if not isinstance(layout, str) or layout.lower() not in LAYOUTS:
        raise ValueError(f"layout must be 'bhsd' ([B, H, N, D]) or 'bshd' ([B, N, H, D]), "
                         f"got {layout!r}")
    return layout.lower()


def check_shapes(q_shape, k_shape, v_shape, layout: str) -> Dims:
    names = "[B, H, N, D]" if layout == "bhsd" else "[B, N, H, D]"
    for n, s in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(s) != 4:
            raise ValueError(f"{n} must have 4 dimensions {names} (layout={layout!r}), "
                             f"got shape {tuple(s)}")
    qb, qh, qn, qd = to_bhsd(q_shape, layout)
    kb, kh, kn, kd = to_bhsd(k_shape, layout)
    vb, vh, vn, vd = to_bhsd(v_shape, layout)
    if not qb == kb == vb:
        raise ValueError(f"batch sizes differ: q {qb}, k {kb}, v {vb}")
    if kh != vh:
        raise ValueError(f"k and v must have the same number of heads, got {kh} and {vh}")
    if kn != vn:
        raise ValueError(f"k and v must have the same sequence length, got {kn} and {vn}")
    if qd != kd:
        raise ValueError(f"q and k must have the same head dim, got {qd} and {kd}")
    if kh == 0 and qh > 0:
        raise ValueError(f"k and v have 0 heads but q has {qh}")
    if kh > 0 and qh % kh:
        raise ValueError(f"the number of query heads ({qh}) must be a multiple of the "
                         f"number of key/value heads ({kh})")
    for n, length in (("q", qn), ("k/v", kn)):
        if length >= MAX_SEQUENCE_LENGTH:
            raise ValueError(f"the sequence length of {n} ({length}) is too long: the kernels "
                             f"compute indices in 32 bits and take at most "
                             f"{MAX_SEQUENCE_LENGTH - 1}")
    for n, d in (("q/k", qd), ("v", vd)):
        if d < 8 or d > MAX_HEAD_DIM or d % 8:
            raise ValueError(f"unsupported head dim {d} of {n}: it must be a multiple of 8 "
                             f"in [8, {MAX_HEAD_DIM}]")
    return Dims(qb, qh, kh, qn, kn, qd, vd)


def check_strided(name: str, shape: Sequence[int], strides: Sequence[int], ptr: int,
                  element_size: int, alignment: int = 16, rows_aligned: bool = True) -> None:
    """The kernel's requirements on one operand: unit stride in the last
    dimension, a 16-byte aligned data pointer, and (`rows_aligned`, for q, k,
    v and out, whose rows the kernels move in 16-byte vectors) every other
    stride a multiple of 16 bytes. lse [B, H, Nq] needs no row alignment
    (a contiguous one has rows of any length Nq). Empty tensors pass."""
    if any(s == 0 for s in shape):
        return
    if shape[-1] > 1 and strides[-1] != 1:
        raise ValueError(f"{name}'s last dimension must be contiguous (stride 1), got strides "
                         f"{tuple(strides)}; call .contiguous() first")
    if ptr % alignment:
        raise ValueError(f"{name}'s data pointer {ptr:#x} is not {alignment}-byte aligned "
                         f"(storage offset?); call .clone() first")
    if not rows_aligned:
        return
    per = alignment // element_size if element_size < alignment else 1
    for i, (n, s) in enumerate(zip(shape[:-1], strides[:-1])):
        if n > 1 and s % per:
            raise ValueError(
                f"{name}'s stride {s} of dimension {i} is not a multiple of {per} elements "
                f"({alignment} bytes), so its rows are not {alignment}-byte aligned; "
                "call .contiguous() first")
