"""Kernel manifests (``<name>.json`` next to ``<name>.ptx``): parsing,
validation, and a consistency check against the PTX entry signatures.

Needs neither torch nor CUDA. Format version 1 (see python/README.md). A
forward manifest describes one launch at the top level::

    {"version": 1, "name": "...", "kind": "forward", "chip": "sm_80",
     "entry": "fa_fwd_kernel", "dtype": "bf16", "head_dim": 128,
     "value_head_dim": 128, "causal": true, "window": [-1, -1],
     "softcap": null, "scale": null, "threads": 128,
     "dynamic_shared_memory": 98304, "grid": ["ceildiv(Nq, 128)", "Hq", "B"],
     "params": [{"name": "q", "type": "memref", "rank": 4, "dtype": "bf16",
                 "dims": ["B", "Hq", "Nq", "D"]}, ...,
                {"name": "scale", "type": "f32", "role": "scale", "value": "scale"}]}

``scale`` and ``softcap`` say how a kernel gets them: ``"scale": null`` and
``"softcap": "runtime"`` mean a kernel parameter (a scalar whose ``value``
names ``scale`` / ``softcap``, bound to the call's values at launch), so one
kernel serves every value; a number means the value is built into the kernel
(an IR file with constants, or an older fa-compile) and the kernel serves
that value only. ``"softcap": null`` is a kernel without soft-capping.

A backward manifest (kind "backward") has the same top-level fields but no
entry/grid/params/threads: its launches are the ``kernels`` list, in launch
order on one stream, plus the buffers the caller allocates for them::

    {..., "kind": "backward", "deterministic": false,
     "workspace": [{"name": "delta", "dtype": "f32", "dims": ["B", "Hq", "Nq"]},
                   {"name": "dq_accum", "dtype": "f32", "dims": ["B", "Hq", "Nq", "D"]}],
     "kernels": [{"entry": "fa_bwd_preprocess_kernel", "grid": [...],
                  "block": [128, 1, 1], "threads": 128, "dynamic_shared_memory": 0,
                  "params": [<out>, <dout>, <delta>, <dq_accum>]}, ...]}

A backward kernel's memref parameters are user tensors (USER_TENSORS, whose
rank, dtype and dims are fixed by the op) or workspace buffers. A forward
with a workspace (split-KV decoding; the dynamic tile scheduler, whose
``tile_counter`` is ``"init": "zero"``: the caller zeroes it before the
launches) has the same ``kernels`` / ``workspace`` form.

Every memref parameter expands, in PTX order, to: allocated pointer, aligned
pointer, offset, sizes[rank], strides[rank] (all 64-bit). Scalar parameters
(an extension, ``{"name": ..., "type": "f32" | "f64" | "i32" | "u32" | "i64"
| "u64", "value": <number or expression>}``) pass one value of that type.
A tensor map parameter (``{"name": ..., "type": "tensormap", "tensor": <a
memref parameter of the same kernel>, "dtype": ..., "box": [...], "swizzle":
...}``, see `_tensormap`) passes the 128-byte CUtensorMap of that tensor,
encoded at launch (in the PTX: ``.param .align 64 .b8 name[128]``).

A kernel compiled with a score_mod / mask_mod (fa-compile --modifiers; a
dense forward, not split-KV, or a dense backward) has a ``"modifiers"``
section, ``{"key": <the runtime's key or null>, "captures": [{"name":
"capture0", "dtype": "f32", "shape": [8]}, ...]}``, and takes each captured
tensor as memref parameter ``capture<n>`` of dims ``capture<n>_<d>`` (in a
backward, in whichever of its launches read them). A forward whose op has
run-time key ranges (``key_ranges(%r rows G)``) says so in the section,
``"key_ranges": {"name": "key_ranges", "rows": G}``, and takes them as
memref parameter ``key_ranges``, i32 of dims [B, Hq, ceildiv(Nq, G), 4] (or
2: without the fully visible ranges). A backward of such modifiers takes
the queries of each group of G keys, ``"query_ranges": {"name":
"query_ranges", "rows": G}``, memref parameter ``query_ranges`` of dims [B,
Hkv, ceildiv(Nk, G), 2], and when deterministic the key ranges too.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import _expr
from . import _tensormap as T
from ._errors import ExpressionError, ManifestError

MANIFEST_VERSION = 1

KINDS = ("forward", "backward")

# Element types a memref parameter may have, with their size in bytes.
# (i1: a bool tensor, one byte per element, as torch.bool; captures only.)
ELEMENT_SIZES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i1": 1, "u8": 1,
                 "i16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8}

# Scalar parameter types: size in bytes of the kernel parameter.
SCALAR_SIZES = {"i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}

# Input element types an attention kernel may be built for.
ATTENTION_DTYPES = ("f16", "bf16")

_DTYPE_ALIASES = {"fp16": "f16", "float16": "f16", "half": "f16",
                  "bfloat16": "bf16", "float32": "f32", "fp32": "f32"}

# Names a kernel's grid and dims may use (bound at launch time).
FORWARD_NAMES = ("B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv", "G")
BACKWARD_NAMES = FORWARD_NAMES
# Grids may also name the launch device's multiprocessor count (a persistent
# kernel's grid is at most SMS blocks); the runtime binds it per device.
GRID_NAMES = FORWARD_NAMES + ("SMS",)

# The tensors a backward kernel may take from the caller, with their rank,
# element type ("input": the manifest's dtype) and [B, H, N, D] dims. Every
# other memref parameter must be a declared workspace buffer.
USER_TENSORS = {
    "q": ("input", ("B", "Hq", "Nq", "D")),
    "k": ("input", ("B", "Hkv", "Nk", "D")),
    "v": ("input", ("B", "Hkv", "Nk", "Dv")),
    "out": ("input", ("B", "Hq", "Nq", "Dv")),
    "dout": ("input", ("B", "Hq", "Nq", "Dv")),
    "lse": ("f32", ("B", "Hq", "Nq")),
    "dq": ("input", ("B", "Hq", "Nq", "D")),
    "dk": ("input", ("B", "Hkv", "Nk", "D")),
    "dv": ("input", ("B", "Hkv", "Nk", "Dv")),
}
# What the backward computes: some kernel must take each of these.
GRADIENTS = ("dq", "dk", "dv")

# Tensor forms of a forward (the manifest's "form"; absent: dense).
#   dense:  q [B, Hq, Nq, D], k/v [B, Hkv, Nk, D/Dv] (the op's tensors above)
#   varlen: packed sequences: q [Hq, Tq, D], k/v [Hkv, Tk, D/Dv], out
#           [Hq, Tq, Dv], lse [Hq, Tq], i32 cu_seqlens_q/k [B1] (B1 = B + 1
#           cumulative offsets); the grid names max_seqlen_q (the call's
#           bound on any sequence's query count, not a tensor dim)
#   paged:  q [B, Hq, Nq, D] against pages k_cache/v_cache [P, Hkv, S, D/Dv]
#           (S = the manifest's page_size) of an i32 page_table [B, MaxPages],
#           cache_seqlens (i32) [B] keys per batch
DENSE, VARLEN, PAGED = "dense", "varlen", "paged"
FORMS = (DENSE, VARLEN, PAGED)

# Dims and grid names of each form (FORWARD_NAMES / GRID_NAMES are the
# dense ones). SMS: the launch device's multiprocessor count.
FORM_NAMES = {
    DENSE: FORWARD_NAMES,
    VARLEN: ("B1", "Hq", "Hkv", "Tq", "Tk", "D", "Dv", "G"),
    PAGED: ("B", "Hq", "Hkv", "Nq", "P", "S", "MaxPages", "D", "Dv", "G"),
}
# Names a grid, a workspace dim or a scalar may use beyond the dims.
FORM_GRID_EXTRA = {DENSE: ("SMS",), VARLEN: ("SMS", "max_seqlen_q", "max_seqlen_k"),
                   PAGED: ("SMS",)}


def form_grid_names(form: str) -> Tuple[str, ...]:
    return FORM_NAMES[form] + FORM_GRID_EXTRA[form]


# The op's tensors of the packed forms (forward only): rank, element type
# and dims as USER_TENSORS. A forward kernel's memref parameter of such a
# form is one of these or a declared workspace buffer, and some kernel
# takes each of FORM_REQUIRED.
FORM_TENSORS = {
    DENSE: USER_TENSORS,
    VARLEN: {
        "q": ("input", ("Hq", "Tq", "D")),
        "k": ("input", ("Hkv", "Tk", "D")),
        "v": ("input", ("Hkv", "Tk", "Dv")),
        "out": ("input", ("Hq", "Tq", "Dv")),
        "lse": ("f32", ("Hq", "Tq")),
        "cu_seqlens_q": ("i32", ("B1",)),
        "cu_seqlens_k": ("i32", ("B1",)),
        # The packed backward's (its grid also names max_seqlen_k).
        "dout": ("input", ("Hq", "Tq", "Dv")),
        "dq": ("input", ("Hq", "Tq", "D")),
        "dk": ("input", ("Hkv", "Tk", "D")),
        "dv": ("input", ("Hkv", "Tk", "Dv")),
    },
    PAGED: {
        "q": ("input", ("B", "Hq", "Nq", "D")),
        "k_cache": ("input", ("P", "Hkv", "S", "D")),
        "v_cache": ("input", ("P", "Hkv", "S", "Dv")),
        "out": ("input", ("B", "Hq", "Nq", "Dv")),
        "lse": ("f32", ("B", "Hq", "Nq")),
        "page_table": ("i32", ("B", "MaxPages")),
        "cache_seqlens": ("i32", ("B",)),
    },
}
FORM_REQUIRED = {
    DENSE: ("q", "k", "v", "out", "lse"),
    VARLEN: ("q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k"),
    PAGED: tuple(FORM_TENSORS[PAGED]),
}
# Page sizes fa-compile takes (--page-size: a multiple of 16 in [16, 4096]).
PAGE_SIZE_MULTIPLE = 16
MAX_PAGE_SIZE = 4096

# Score / mask modifiers (the "modifiers" section of a dense forward, not
# split-KV, or of a dense backward): the element types a captured tensor
# may have, and the names of its kernel parameter (capture<n>, in the order
# of the section's captures; in a backward, of any of its launches) and of
# its dims (capture<n>_<d>, bound to the capture's static shape).
CAPTURE_DTYPES = ("f32", "f16", "bf16", "i32", "i64", "i1")
CAPTURE_NAME_RE = re.compile(r"^capture(\d+)$")
MAX_CAPTURE_RANK = 8


# The forward's run-time key ranges (the op's key_ranges operand): the
# memref parameter's name.
KEY_RANGES = "key_ranges"


# The backward's run-time query ranges (fa.attention_backward's
# query_ranges operand): the memref parameter's name.
QUERY_RANGES = "query_ranges"


def query_ranges_dims(rows: int) -> Tuple[str, ...]:
    """The dims of the query_ranges parameter for groups of `rows` keys."""
    return ("B", "Hkv", f"ceildiv(Nk, {rows})", "2")


def key_ranges_dims(rows: int, columns: int = 4) -> Tuple[str, ...]:
    """The dims of the key_ranges parameter for groups of `rows` query rows
    (4 columns: the key range and the fully visible one; 2: the first)."""
    return ("B", "Hq", f"ceildiv(Nq, {rows})", str(columns))


def capture_name(n: int) -> str:
    return f"capture{n}"


def capture_dim_name(n: int, d: int) -> str:
    return f"capture{n}_{d}"


def is_capture_param(p: "ParamSpec") -> bool:
    """Whether memref parameter `p` is a captured tensor of a modifier (the
    parser accepts such names only as the captures of a modifiers section)."""
    return p.is_memref and CAPTURE_NAME_RE.match(p.name) is not None


# Sample shapes on which manifest dims are compared with USER_TENSORS (two
# sets of distinct values, so that swapped names cannot agree by accident).
_SAMPLE_ENVS = (
    {"B": 3, "Hq": 12, "Hkv": 4, "Nq": 1009, "Nk": 2003, "D": 40, "Dv": 56, "G": 3,
     "B1": 17, "Tq": 3001, "Tk": 5003, "P": 211, "S": 48, "MaxPages": 23},
    {"B": 5, "Hq": 14, "Hkv": 7, "Nq": 97, "Nk": 31, "D": 128, "Dv": 64, "G": 2,
     "B1": 6, "Tq": 389, "Tk": 613, "P": 37, "S": 112, "MaxPages": 9},
)

_CHIP_RE = re.compile(r"^sm_(\d+)(\d)(a?)$")
_IDENT_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")

MEMREF_SLOT = 8  # every expanded memref slot (pointer or i64) is 8 bytes
TENSORMAP = "tensormap"

# The manifest's "softcap" (or "window") of a kernel that takes the value(s)
# as parameters.
RUNTIME = "runtime"


def normalize_dtype(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"dtype must be a string, got {type(name).__name__}")
    return _DTYPE_ALIASES.get(name.lower(), name.lower())


def parse_chip(chip: str) -> Tuple[int, int, bool]:
    """'sm_90a' -> (9, 0, True); 'sm_80' -> (8, 0, False)."""
    m = _CHIP_RE.match(chip) if isinstance(chip, str) else None
    if not m:
        raise ManifestError(f"bad chip {chip!r}: expected e.g. 'sm_80' or 'sm_90a'")
    return int(m.group(1)), int(m.group(2)), bool(m.group(3))


def chip_runs_on(chip: str, cc: Tuple[int, int]) -> bool:
    """Whether PTX built for `chip` can be JIT-compiled for a device of
    compute capability `cc`. Arch-specific targets (sm_90a) run only on that
    exact chip; plain ones on that chip and every later one."""
    major, minor, specific = parse_chip(chip)
    if specific:
        return (major, minor) == tuple(cc)
    return (major, minor) <= tuple(cc)


def chip_preference(chip: str, cc: Tuple[int, int]) -> Optional[Tuple]:
    """Sort key (smaller is preferred) of `chip` on a device of capability
    `cc`, or None when it cannot run there: an arch-specific target of the
    device first, then plain targets from the newest down."""
    if not chip_runs_on(chip, cc):
        return None
    major, minor, specific = parse_chip(chip)
    return (0 if specific else 1, -major, -minor)


# FAOps.h's kMaxWindowBound: the kernels compute the mask in i32.
MAX_WINDOW_BOUND = 2**31 - 1


def canonical_mask(causal: bool, window) -> Tuple[int, int]:
    """(left, right) with -1 unbounded; causal is right = 0 (FAOps.h's
    AttentionMask). Raises ValueError for invalid combinations."""
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if left < -1 or right < -1:
        raise ValueError(f"window bounds must be >= 0 or -1 (unbounded), got {window!r}")
    if left > MAX_WINDOW_BOUND or right > MAX_WINDOW_BOUND:
        raise ValueError(f"window bounds must be at most {MAX_WINDOW_BOUND} (the kernels "
                         f"compute the mask in i32), got {window!r}")
    if causal:
        if right not in (0, -1):
            raise ValueError(
                "causal attention sees no key to the right of the diagonal: "
                f"window right bound must be 0 (or -1), got {right}")
        right = 0
    return left, right


def is_windowed(mask: Tuple[int, int]) -> bool:
    """Whether a canonical mask has a sliding window (a bounded side beyond
    causal's right = 0): the mask kind a run-time-window kernel serves, with
    the causal-or-not of `mask[1] == 0`."""
    left, right = mask
    return left >= 0 or right > 0


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def _f32(x: float) -> float:
    """x rounded to the nearest f32 (as a Python float)."""
    return struct.unpack("f", struct.pack("f", x))[0]


_LOG2E_F32 = _f32(math.log2(math.e))


def score_scalars(scale: float, softcap: Optional[float]) -> Dict[str, float]:
    """The values of the score scalars a kernel parameter may name: the scale
    and softcap themselves, and the factors fa-compile's host code computes
    from them in f32 before a launch (ScoreFactors: "log2e_scale" =
    scale * log2(e), "scale_over_softcap", "log2e_softcap"). Each is the f32
    operation's correctly rounded result, as the host IR computes it."""
    s, c = _f32(scale), _f32(softcap or 0.0)
    return {"scale": scale, "softcap": softcap or 0.0,
            "log2e_scale": _f32(s * _LOG2E_F32),
            "log2e_softcap": _f32(c * _LOG2E_F32),
            "scale_over_softcap": _f32(s / c) if c else 0.0}


# What carries each run-time scalar into the kernels: the value itself, or
# factors that together determine it.
_SCALE_CARRIERS = ({"scale"}, {"log2e_scale"}, {"scale_over_softcap", "log2e_softcap"})
_SOFTCAP_CARRIERS = ({"softcap"}, {"log2e_softcap"})


def same_float(a: float, b: float, rel: float = 1e-6) -> bool:
    """Equality up to float32 rounding of a compile-time attribute."""
    return abs(a - b) <= rel * max(abs(a), abs(b))


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: str                                   # "memref", "tensormap" or a SCALAR_SIZES key
    rank: int = 0
    dtype: Optional[str] = None
    dims: Optional[Tuple[_expr.Expression, ...]] = None
    value: Optional[_expr.Expression] = None    # scalars only
    # tensor maps only: the memref parameter the map covers, the box (one
    # extent per dimension, outermost first) and the encoding options
    # (names of _tensormap's tables)
    tensor: Optional[str] = None
    box: Optional[Tuple[int, ...]] = None
    swizzle: Optional[str] = None
    oob_fill: Optional[str] = None
    l2_promotion: Optional[str] = None

    @property
    def is_memref(self) -> bool:
        return self.type == "memref"

    @property
    def is_tensormap(self) -> bool:
        return self.type == TENSORMAP

    @property
    def is_scalar(self) -> bool:
        return self.type in SCALAR_SIZES

    def slots(self) -> List[Tuple[str, str]]:
        """(label, slot type) of each kernel parameter this expands to; slot
        type is 'ptr', 'i64', 'tensormap' or a scalar type."""
        if not self.is_memref:
            return [(self.name, self.type)]
        out = [(f"{self.name}.allocated", "ptr"), (f"{self.name}.aligned", "ptr"),
               (f"{self.name}.offset", "i64")]
        out += [(f"{self.name}.sizes[{i}]", "i64") for i in range(self.rank)]
        out += [(f"{self.name}.strides[{i}]", "i64") for i in range(self.rank)]
        return out


def slot_size(slot_type: str) -> int:
    if slot_type == TENSORMAP:
        return T.MAP_BYTES
    return MEMREF_SLOT if slot_type in ("ptr", "i64") else SCALAR_SIZES[slot_type]


class _Params:
    """Lookups over a launch's `params` (EntrySpec and KernelSpec)."""

    def slots(self) -> List[Tuple[str, str]]:
        out: List[Tuple[str, str]] = []
        for p in self.params:
            out += p.slots()
        return out

    def param(self, name: str) -> Optional[ParamSpec]:
        for p in self.params:
            if p.name == name:
                return p
        return None


@dataclass(frozen=True)
class EntrySpec(_Params):
    """One launch of a manifest: a PTX entry with its grid, block, shared
    memory and parameters. `name` labels it in messages (the manifest's name
    for a forward kernel, ``name:entry`` for a kernel of a backward)."""

    name: str
    entry: str
    grid: Tuple[_expr.Expression, ...]
    threads: int
    block: Tuple[int, int, int]
    dynamic_shared_memory: int
    params: Tuple[ParamSpec, ...]



@dataclass(frozen=True)
class WorkspaceSpec:
    """A buffer the caller allocates (contiguous; uninitialized unless
    `zeroed`) for the kernels of a multi-launch manifest."""

    name: str
    dtype: str
    dims: Tuple[_expr.Expression, ...]
    # "init": "zero": the caller zeroes it before the launches (the dynamic
    # tile scheduler's counter).
    zeroed: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims)

    def shape(self, env) -> Tuple[int, ...]:
        return tuple(d.evaluate(env) for d in self.dims)


@dataclass(frozen=True)
class CaptureSpec:
    """A tensor a score_mod / mask_mod reads: kernel parameter `name`
    (capture<n>), of element type `dtype` (CAPTURE_DTYPES) and a static
    shape; any strides (the kernel reads them from the memref descriptor)."""

    name: str
    dtype: str
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class ModifiersSpec:
    """The "modifiers" section of a dense forward or backward: the kernels
    compute a score_mod / mask_mod (a backward: P recomputed with them, dS
    times the score_mod's derivative; no gradients of the captures); `key`
    is the runtime's cache key of them (fa-compile --modifiers-key; None:
    the kernel serves no request), `captures` the tensors they read, in the
    order of their parameters."""

    key: Optional[str]
    captures: Tuple[CaptureSpec, ...] = ()
    # The softcap the score_mod states, built into the kernels
    # (fa-recognize-builtin-modifiers; None: none): a call of these
    # modifiers gives no softcap of its own, the launch binds this one.
    softcap: Optional[float] = None
    # The query rows per group of the key_ranges parameter (None: the
    # kernel takes none; a backward takes them when deterministic).
    key_range_rows: Optional[int] = None
    # The keys per group of a backward's query_ranges parameter (None:
    # none): the backward of modifiers with key ranges.
    query_range_rows: Optional[int] = None

    def dims(self) -> Dict[str, int]:
        """The capture dims' names (capture<n>_<d>) bound to their sizes."""
        return {capture_dim_name(n, d): size for n, c in enumerate(self.captures)
                for d, size in enumerate(c.shape)}


@dataclass(frozen=True)
class KernelSpec(_Params):
    """A validated manifest. A forward manifest is one launch, described by
    entry/threads/dynamic_shared_memory/grid/params (and `kernels` holds it
    as its single EntrySpec). A backward manifest has entry None, threads 0,
    no grid or params: its launches are `kernels`, in order, and `workspace`
    lists the buffers they share."""

    name: str
    kind: str
    chip: str
    entry: Optional[str]
    dtype: str
    head_dim: int
    value_head_dim: int
    causal: bool
    window: Any                    # (left, right) built in, or "runtime"
    softcap: Any                   # None, "runtime" or a built-in value
    scale: Optional[float]         # None: a run-time parameter
    threads: int
    dynamic_shared_memory: int
    grid: Tuple[_expr.Expression, ...]
    params: Tuple[ParamSpec, ...]
    json_path: str
    ptx_path: str
    block_q: Optional[int] = None
    block_kv: Optional[int] = None
    warps: Optional[int] = None
    stages: Optional[int] = None
    kernels: Tuple[EntrySpec, ...] = ()
    workspace: Tuple[WorkspaceSpec, ...] = ()
    deterministic: bool = False
    # Split-KV forward (decoding): None, "auto" (a run-time split count) or
    # a fixed count; its kernels are the split attention, then the merge.
    kv_splits: Any = None
    # The tensor form (FORMS) and, for "paged", the keys per page S.
    form: str = DENSE
    page_size: Optional[int] = None
    # The score_mod / mask_mod the kernel computes (None: none).
    modifiers: Optional[ModifiersSpec] = None
    # ptxas's binary of the PTX for `chip` (None: none), loaded instead of
    # the PTX on a device of exactly that chip (no JIT at load).
    cubin_path: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def modifiers_key(self) -> Optional[str]:
        """The key of the kernel's modifiers (None without modifiers, and for
        modifiers compiled without a key)."""
        return self.modifiers.key if self.modifiers is not None else None

    @property
    def captures(self) -> Tuple[CaptureSpec, ...]:
        return self.modifiers.captures if self.modifiers is not None else ()

    def capture_dims(self) -> Dict[str, int]:
        """What the capture parameters' dims name (see ModifiersSpec.dims)."""
        return self.modifiers.dims() if self.modifiers is not None else {}

    @property
    def mask(self) -> Tuple[int, int]:
        """The built-in mask (left, right); a kernel whose window sizes are
        parameters has none (see serves_mask)."""
        if self.window == RUNTIME:
            raise ValueError(f"{self.name}: the window sizes are kernel parameters")
        return canonical_mask(self.causal, self.window)

    def serves_mask(self, mask: Tuple[int, int]) -> bool:
        """Whether this kernel computes with the canonical `mask`: a
        run-time window serves every windowed mask of its causal-or-not
        (the sizes are parameters), a built-in mask only itself."""
        if self.window == RUNTIME:
            return is_windowed(mask) and (mask[1] == 0) == self.causal
        return self.mask == mask

    @property
    def has_softcap(self) -> bool:
        return self.softcap is not None

    def serves_scalars(self, scale: float, softcap: Optional[float]) -> bool:
        """Whether this kernel computes with `scale` and `softcap` (None: no
        softcap): a run-time parameter takes any value, a built-in value
        only itself. A softcap that the modifiers state is built in for
        calls without a softcap of their own."""
        if self.modifiers is not None and self.modifiers.softcap is not None:
            return softcap is None and (self.scale is None or same_float(self.scale, scale))
        if (self.softcap is None) != (softcap is None):
            return False
        if self.softcap not in (None, RUNTIME) and not same_float(self.softcap, softcap):
            return False
        return self.scale is None or same_float(self.scale, scale)

    @property
    def block(self) -> Tuple[int, int, int]:
        return (self.threads, 1, 1)

    @property
    def is_backward(self) -> bool:
        return self.kind == "backward"

    @property
    def is_multi_launch(self) -> bool:
        """Whether the manifest lists its launches in 'kernels' with a
        workspace (a backward, a split-KV forward, a forward with a
        workspace such as the dynamic tile scheduler's counter)."""
        return self.is_backward or self.kv_splits is not None or bool(self.workspace)

    @property
    def zeroed_workspace(self) -> bool:
        """Whether some workspace buffer must be zero before the launches."""
        return any(w.zeroed for w in self.workspace)


    def describe(self) -> str:
        bits = [self.kind, self.chip, self.dtype, f"D={self.head_dim}"]
        if self.form != DENSE:
            bits.insert(1, self.form + (f"(S={self.page_size})" if self.page_size else ""))
        if self.value_head_dim != self.head_dim:
            bits.append(f"Dv={self.value_head_dim}")
        if self.window == RUNTIME:
            bits += ["causal", "window"] if self.causal else ["window"]
        else:
            left, right = self.mask
            if right == 0:
                bits.append("causal")
            if (left, right) not in ((-1, -1), (-1, 0)):
                bits.append(f"window=({left},{right})")
        if self.softcap == RUNTIME:
            bits.append("softcap")
        elif self.softcap is not None:
            bits.append(f"softcap={self.softcap:g}")
        if self.scale is not None and not same_float(self.scale, default_scale(self.head_dim)):
            bits.append(f"scale={self.scale:g}")
        if self.deterministic:
            bits.append("deterministic")
        if self.kv_splits is not None:
            bits.append(f"kv_splits={self.kv_splits}")
        if self.modifiers is not None:
            key = self.modifiers.key
            bits.append(f"modifiers={key[:16] if key else '(no key)'}")
        return f"{self.name} [{' '.join(bits)}]"


class _Ctx:
    """Collects the location of a manifest for error messages."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, msg: str) -> ManifestError:
        return ManifestError(f"{self.path}: {msg}")


def _get(d: dict, key: str, ctx: _Ctx, types, required=True, default=None,
         where="manifest"):
    if d.get(key) is None:
        if required:
            what = "missing field" if key not in d else "null field"
            raise ctx.fail(f"{where}: {what} {key!r}")
        return default
    val = d[key]
    # bool is an int in Python: keep them apart.
    if types is int and isinstance(val, bool):
        raise ctx.fail(f"{where}: field {key!r} must be an integer, got {val!r}")
    if types is float and (isinstance(val, bool) or not isinstance(val, (int, float))):
        raise ctx.fail(f"{where}: field {key!r} must be a number, got {val!r}")
    if types is float:
        return float(val)
    if not isinstance(val, types):
        tn = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ctx.fail(f"{where}: field {key!r} must be {tn}, got {val!r}")
    return val


def _parse_expr(text, ctx: _Ctx, where: str, allowed_names) -> _expr.Expression:
    try:
        e = _expr.parse(text)
    except ExpressionError as exc:
        raise ctx.fail(f"{where}: {exc}") from None
    if allowed_names is not None:
        bad = [n for n in e.names if n not in allowed_names]
        if bad:
            raise ctx.fail(f"{where}: unknown name(s) {', '.join(bad)} in {text!r} "
                           f"(known: {', '.join(allowed_names)})")
    return e


def _parse_param(p, i: int, ctx: _Ctx, allowed_names, prefix: str = "") -> ParamSpec:
    where = f"{prefix}params[{i}]"
    if not isinstance(p, dict):
        raise ctx.fail(f"{where} must be an object, got {p!r}")
    name = _get(p, "name", ctx, str, where=where)
    if not _IDENT_RE.match(name):
        raise ctx.fail(f"{where}: bad parameter name {name!r}")
    where = f"{prefix}params[{i}] ({name})"
    ptype = _get(p, "type", ctx, str, where=where)
    if ptype == "memref":
        rank = _get(p, "rank", ctx, int, where=where)
        if not 0 <= rank <= 8:
            raise ctx.fail(f"{where}: rank must be in [0, 8], got {rank}")
        dtype = normalize_dtype(_get(p, "dtype", ctx, str, where=where))
        if dtype not in ELEMENT_SIZES:
            raise ctx.fail(f"{where}: unknown dtype {dtype!r} "
                           f"(known: {', '.join(ELEMENT_SIZES)})")
        dims = p.get("dims")
        parsed_dims = None
        if dims is not None:
            if not isinstance(dims, list) or len(dims) != rank:
                raise ctx.fail(f"{where}: dims must be a list of {rank} entries, got {dims!r}")
            parsed_dims = tuple(_parse_expr(d, ctx, f"{where} dims[{j}]", allowed_names)
                                for j, d in enumerate(dims))
        return ParamSpec(name, "memref", rank, dtype, parsed_dims)
    if ptype in SCALAR_SIZES:
        if "value" not in p:
            raise ctx.fail(f"{where}: scalar parameter needs a 'value' "
                           "(a number or an expression)")
        value = _parse_expr(p["value"], ctx, f"{where} value", None)
        return ParamSpec(name, ptype, value=value)
    if ptype == TENSORMAP:
        return _parse_tensormap(p, name, ctx, where)
    raise ctx.fail(f"{where}: unknown parameter type {ptype!r} "
                   f"(known: memref, {TENSORMAP}, {', '.join(SCALAR_SIZES)})")


def _choice(p: dict, key: str, table, ctx: _Ctx, where: str, default=None) -> str:
    val = _get(p, key, ctx, str, required=default is None, default=default, where=where)
    if val not in table:
        raise ctx.fail(f"{where}: unknown {key} {val!r} (known: {', '.join(table)})")
    return val


def _parse_tensormap(p: dict, name: str, ctx: _Ctx, where: str) -> ParamSpec:
    """A tensor map parameter; whether its tensor is a memref of the same
    rank and dtype is checked with the whole parameter list."""
    tensor = _get(p, "tensor", ctx, str, where=where)
    dtype = normalize_dtype(_get(p, "dtype", ctx, str, where=where))
    if dtype not in T.DATA_TYPES:
        raise ctx.fail(f"{where}: a tensor map's dtype must be one of "
                       f"{', '.join(T.DATA_TYPES)}, got {dtype!r}")
    box = p.get("box")
    if (not isinstance(box, list) or not 1 <= len(box) <= T.MAX_RANK
            or any(isinstance(b, bool) or not isinstance(b, int) for b in box)):
        raise ctx.fail(f"{where}: box must be a list of 1 to {T.MAX_RANK} integers "
                       f"(one per dimension of the tensor, outermost first), got {box!r}")
    bad = [b for b in box if not 1 <= b <= T.MAX_BOX]
    if bad:
        raise ctx.fail(f"{where}: box extents must be in [1, {T.MAX_BOX}], got {box}")
    swizzle = _choice(p, "swizzle", T.SWIZZLES, ctx, where)
    _choice(p, "interleave", T.INTERLEAVES, ctx, where, default="none")
    oob_fill = _choice(p, "oob_fill", T.OOB_FILLS, ctx, where, default=T.DEFAULT_OOB_FILL)
    l2 = _choice(p, "l2_promotion", T.L2_PROMOTIONS, ctx, where,
                 default=T.DEFAULT_L2_PROMOTION)
    why = T.box_error(box, ELEMENT_SIZES[dtype], swizzle)
    if why:
        raise ctx.fail(f"{where}: box {box}: {why}")
    return ParamSpec(name, TENSORMAP, len(box), dtype, tensor=tensor, box=tuple(box),
                     swizzle=swizzle, oob_fill=oob_fill, l2_promotion=l2)


def _check_tensormaps(parsed: Tuple[ParamSpec, ...], ctx: _Ctx, prefix: str) -> None:
    """Every tensor map covers a memref parameter of the same kernel, of its
    rank and dtype."""
    memrefs = {p.name: p for p in parsed if p.is_memref}
    for i, p in enumerate(parsed):
        if not p.is_tensormap:
            continue
        where = f"{prefix}params[{i}] ({p.name})"
        m = memrefs.get(p.tensor)
        if m is None:
            raise ctx.fail(f"{where}: tensor {p.tensor!r} is not a memref parameter of this "
                           f"kernel (memrefs: {', '.join(memrefs) or 'none'})")
        if m.rank != p.rank:
            raise ctx.fail(f"{where}: box {list(p.box)} has {p.rank} extents but memref "
                           f"{m.name} has rank {m.rank}")
        if m.dtype != p.dtype:
            raise ctx.fail(f"{where}: dtype {p.dtype} differs from memref {m.name}'s "
                           f"{m.dtype}")


def _parse_params(params, ctx: _Ctx, allowed, prefix: str = "") -> Tuple[ParamSpec, ...]:
    if not isinstance(params, list) or not params:
        raise ctx.fail(f"{prefix}params must be a non-empty list")
    parsed = tuple(_parse_param(p, i, ctx, allowed, prefix) for i, p in enumerate(params))
    names = [p.name for p in parsed]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ctx.fail(f"{prefix}duplicate parameter name(s): {', '.join(dup)}")
    _check_tensormaps(parsed, ctx, prefix)
    return parsed


def _parse_grid(grid, ctx: _Ctx, allowed, prefix: str = "") -> Tuple[_expr.Expression, ...]:
    if not isinstance(grid, list) or not 1 <= len(grid) <= 3:
        raise ctx.fail(f"{prefix}grid must be a list of 1 to 3 expressions, got {grid!r}")
    return tuple(_parse_expr(g, ctx, f"{prefix}grid[{i}]", allowed) for i, g in enumerate(grid))


def _parse_threads(d: dict, ctx: _Ctx, where: str) -> int:
    threads = _get(d, "threads", ctx, int, where=where)
    if not 1 <= threads <= 1024:
        raise ctx.fail(f"{where}: threads must be in [1, 1024], got {threads}")
    return threads


def _parse_smem(d: dict, ctx: _Ctx, where: str) -> int:
    smem = _get(d, "dynamic_shared_memory", ctx, int, required=False, default=0, where=where)
    if smem < 0:
        raise ctx.fail(f"{where}: dynamic_shared_memory must be >= 0, got {smem}")
    return smem


def _sample_envs(page_size: Optional[int] = None):
    """The sample shapes, with S the manifest's page size (a paged kernel's
    S is static: its dims may spell it as the number)."""
    if page_size is None:
        return _SAMPLE_ENVS
    return tuple(dict(env, S=page_size) for env in _SAMPLE_ENVS)


def _same_dims(dims: Tuple[_expr.Expression, ...], names: Tuple[str, ...],
               envs=_SAMPLE_ENVS) -> bool:
    """Whether `dims` denote `names` (compared by value on sample shapes, so
    that e.g. "Hkv * G" is accepted for "Hq")."""
    if len(dims) != len(names):
        return False
    try:
        return all(tuple(d.evaluate(env) for d in dims) == tuple(env[n] for n in names)
                   for env in envs)
    except ExpressionError:
        return False


def _dims_equal(dims: Tuple[_expr.Expression, ...], want: Tuple[str, ...]) -> bool:
    """Whether `dims` equal the expressions `want` on the sample shapes."""
    try:
        want_e = tuple(_expr.parse(w) for w in want)
        return len(dims) == len(want) and all(
            tuple(d.evaluate(env) for d in dims) == tuple(w.evaluate(env) for w in want_e)
            for env in _SAMPLE_ENVS)
    except ExpressionError:
        return False


def _parse_workspace(ws, ctx: _Ctx, allowed=GRID_NAMES,
                     tensors=USER_TENSORS) -> Tuple[WorkspaceSpec, ...]:
    if not isinstance(ws, list):
        raise ctx.fail(f"workspace must be a list of buffers, got {ws!r}")
    out: List[WorkspaceSpec] = []
    for i, w in enumerate(ws):
        where = f"workspace[{i}]"
        if not isinstance(w, dict):
            raise ctx.fail(f"{where} must be an object, got {w!r}")
        name = _get(w, "name", ctx, str, where=where)
        if not _IDENT_RE.match(name):
            raise ctx.fail(f"{where}: bad buffer name {name!r}")
        where = f"workspace[{i}] ({name})"
        if name in tensors:
            raise ctx.fail(f"{where}: {name!r} is a tensor of the op, not a workspace buffer")
        if any(o.name == name for o in out):
            raise ctx.fail(f"{where}: duplicate workspace buffer {name!r}")
        dtype = normalize_dtype(_get(w, "dtype", ctx, str, where=where))
        if dtype not in ELEMENT_SIZES:
            raise ctx.fail(f"{where}: unknown dtype {dtype!r} (known: {', '.join(ELEMENT_SIZES)})")
        dims = w.get("dims")
        if not isinstance(dims, list) or not 1 <= len(dims) <= 8:
            raise ctx.fail(f"{where}: dims must be a list of 1 to 8 expressions, got {dims!r}")
        # (A split-KV forward's partials are as many as its run-time split
        # count, which depends on SMS.)
        parsed = tuple(_parse_expr(d, ctx, f"{where} dims[{j}]", allowed)
                       for j, d in enumerate(dims))
        init = w.get("init")
        if init not in (None, "zero"):
            raise ctx.fail(f"{where}: init must be \"zero\" or absent, got {init!r}")
        out.append(WorkspaceSpec(name, dtype, parsed, init == "zero"))
    return tuple(out)


def _check_memrefs(params: Tuple[ParamSpec, ...], ctx: _Ctx, where: str, dtype: str,
                   workspace: Dict[str, WorkspaceSpec], form: str = DENSE,
                   page_size: Optional[int] = None) -> None:
    """Every memref parameter is a tensor of the op (the form's FORM_TENSORS:
    its rank, element type and dims) or a declared workspace buffer."""
    tensors = FORM_TENSORS[form]
    envs = _sample_envs(page_size)
    for p in params:
        if not p.is_memref or is_capture_param(p) or p.name in (KEY_RANGES, QUERY_RANGES):
            continue   # (captures and ranges: _check_captures)
        pw = f"{where}parameter {p.name}"
        if p.name in tensors:
            want_dtype, want_dims = tensors[p.name]
            want_dtype = dtype if want_dtype == "input" else want_dtype
            if p.rank != len(want_dims):
                raise ctx.fail(f"{pw} must have rank {len(want_dims)} "
                               f"[{', '.join(want_dims)}], got {p.rank}")
            if p.dtype != want_dtype:
                raise ctx.fail(f"{pw} must be {want_dtype}, got {p.dtype}")
            if p.dims is not None and not _same_dims(p.dims, want_dims, envs):
                raise ctx.fail(f"{pw} has dims [{', '.join(d.text for d in p.dims)}] but "
                               f"must be [{', '.join(want_dims)}]")
        elif p.name in workspace:
            w = workspace[p.name]
            if p.rank != w.rank or p.dtype != w.dtype:
                raise ctx.fail(f"{pw} is rank {p.rank} {p.dtype} but workspace buffer "
                               f"{p.name!r} is rank {w.rank} {w.dtype}")
        else:
            what = f"a {form} kernel's tensors" if form != DENSE else "a tensor of the op"
            raise ctx.fail(f"{pw} is neither {what} "
                           f"({', '.join(tensors)}) nor a workspace buffer "
                           f"({', '.join(workspace) or 'none declared'})")


def _parse_kernel(k, i: int, ctx: _Ctx, manifest_name: str, dtype: str,
                  workspace: Dict[str, WorkspaceSpec], form: str = DENSE,
                  page_size: Optional[int] = None, capture_dims=()) -> EntrySpec:
    where = f"kernels[{i}]"
    if not isinstance(k, dict):
        raise ctx.fail(f"{where} must be an object, got {k!r}")
    entry = _get(k, "entry", ctx, str, where=where)
    if not _IDENT_RE.match(entry):
        raise ctx.fail(f"{where}: bad entry name {entry!r}")
    where = f"kernels[{i}] ({entry})"
    grid = _parse_grid(k.get("grid"), ctx, form_grid_names(form), f"{where}: ")
    threads = _parse_threads(k, ctx, where)
    block = k.get("block")
    if block is None:
        block = [threads]
    if (not isinstance(block, list) or not 1 <= len(block) <= 3
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in block)):
        raise ctx.fail(f"{where}: block must be a list of 1 to 3 positive integers, got {block!r}")
    block3 = tuple(block) + (1,) * (3 - len(block))
    if block3[0] * block3[1] * block3[2] != threads:
        raise ctx.fail(f"{where}: block {list(block)} has {block3[0] * block3[1] * block3[2]} "
                       f"threads but threads is {threads}")
    smem = _parse_smem(k, ctx, where)
    params = _parse_params(k.get("params"), ctx, FORM_NAMES[form] + ("SMS",) + capture_dims,
                           f"{where}: ")
    _check_memrefs(params, ctx, f"{where}: ", dtype, workspace, form, page_size)
    return EntrySpec(f"{manifest_name}:{entry}", entry, grid, threads, block3, smem, params)


def _parse_modifiers(data: dict, ctx: _Ctx, kind: str, form: str,
                     kv_splits) -> Optional[ModifiersSpec]:
    """The "modifiers" section (absent or null: none)."""
    mods = data.get("modifiers")
    if mods is None:
        return None
    if not isinstance(mods, dict):
        raise ctx.fail(f"modifiers must be an object, got {mods!r}")
    unknown = sorted(set(mods) - {"key", "captures", "softcap", "key_ranges", "query_ranges"})
    if unknown:
        raise ctx.fail(f"modifiers: unknown field(s) {', '.join(unknown)} "
                       "(known: key, captures, softcap, key_ranges, query_ranges)")

    def ranges_field(field: str, what: str) -> Optional[int]:
        ranges = mods.get(field)
        if ranges is None:
            return None
        if not isinstance(ranges, dict) or set(ranges) != {"name", "rows"} \
                or ranges["name"] != field:
            raise ctx.fail(f"modifiers: {field} must be {{\"name\": \"{field}\", "
                           f"\"rows\": <{what} per group>}}, got {ranges!r}")
        rows = ranges["rows"]
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ctx.fail(f"modifiers: {field}.rows must be an integer >= 1, got {rows!r}")
        return rows

    rows = ranges_field(KEY_RANGES, "query rows")
    qrows = ranges_field(QUERY_RANGES, "keys")
    if kind == "forward" and qrows is not None:
        raise ctx.fail("modifiers: query_ranges are an operand of backward kernels only")
    if kind != "forward" and rows is not None and qrows != rows:
        raise ctx.fail(f"modifiers: a backward's key_ranges (rows {rows}) come with "
                       f"query_ranges of as many keys per group, got {mods.get(QUERY_RANGES)!r}")
    if kind != "forward" and (rows is not None) != (qrows is not None
                                                     and bool(data.get("deterministic"))):
        raise ctx.fail("modifiers: a backward takes key_ranges exactly when it is "
                       "deterministic and has query_ranges")
    cap = mods.get("softcap")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float))
                            or not math.isfinite(cap) or cap <= 0):
        raise ctx.fail(f"modifiers: softcap must be a finite number > 0 or null, got {cap!r}")
    if cap is not None and not (isinstance(data.get("softcap"), (int, float))
                                and same_float(float(data["softcap"]), float(cap))):
        raise ctx.fail(f"modifiers: softcap {cap!r} is built in, so the manifest's softcap "
                       f"must be the same number, got {data.get('softcap')!r}")
    if form != DENSE or kv_splits is not None:
        raise ctx.fail("modifiers: only dense kernels (a forward, not split-KV, or a backward) "
                       f"compute score_mod / mask_mod; this manifest is a {form} {kind}"
                       + (" with kv_splits" if kv_splits is not None else ""))
    key = mods.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise ctx.fail(f"modifiers: key must be a non-empty string or null, got {key!r}")
    caps = mods.get("captures")
    if not isinstance(caps, list):
        raise ctx.fail(f"modifiers: captures must be a list, got {caps!r}")
    out = []
    for n, c in enumerate(caps):
        where = f"modifiers.captures[{n}]"
        if not isinstance(c, dict):
            raise ctx.fail(f"{where} must be an object, got {c!r}")
        name = _get(c, "name", ctx, str, where=where)
        if name != capture_name(n):
            raise ctx.fail(f"{where}: name must be {capture_name(n)!r} (captures are listed in "
                           f"the order of their parameters), got {name!r}")
        dtype = _get(c, "dtype", ctx, str, where=where)
        if dtype not in CAPTURE_DTYPES:
            raise ctx.fail(f"{where}: unknown dtype {dtype!r} (known: {', '.join(CAPTURE_DTYPES)})")
        shape = c.get("shape")
        if (not isinstance(shape, list) or not 1 <= len(shape) <= MAX_CAPTURE_RANK
                or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in shape)):
            raise ctx.fail(f"{where}: shape must be a list of 1 to {MAX_CAPTURE_RANK} sizes "
                           f"(integers >= 0), got {shape!r}")
        out.append(CaptureSpec(name, dtype, tuple(shape)))
    return ModifiersSpec(key, tuple(out), None if cap is None else float(cap), rows, qrows)


def _capture_dims_ok(dims, want: List[str], shape: Tuple[int, ...], env) -> bool:
    """Whether each of `dims` names its own capture dim `want[d]` (or none)
    and evaluates to `shape[d]`."""
    if dims is None:
        return False
    try:
        return all(set(x.names) <= {w} and x.evaluate(env) == size
                   for x, w, size in zip(dims, want, shape))
    except ExpressionError:
        return False


def _check_captures(entries: Tuple[EntrySpec, ...], modifiers: Optional[ModifiersSpec],
                    ctx: _Ctx) -> None:
    """Every capture of the modifiers section is a memref parameter of some
    launch, of its rank, dtype and dims [capture<n>_0, ...] (each the
    capture's dim name or its size); a parameter named like a capture is
    one; no other parameter's dims name a capture's."""
    captures = {c.name: c for c in (modifiers.captures if modifiers else ())}
    env = modifiers.dims() if modifiers else {}
    rows = modifiers.key_range_rows if modifiers else None
    qrows = modifiers.query_range_rows if modifiers else None
    taken = set()
    for e in entries:
        for p in e.params:
            pw = (f"kernels ({e.entry}): " if len(entries) > 1 else "") + f"parameter {p.name}"
            ranged = {QUERY_RANGES: (qrows, "query ranges",
                                     lambda r: [query_ranges_dims(r)]),
                      KEY_RANGES: (rows, "key ranges",
                                   lambda r: [key_ranges_dims(r, c) for c in (4, 2)])}
            if p.name in ranged and p.is_memref:
                r, what, dims_of = ranged[p.name]
                if r is None:
                    raise ctx.fail(f"{pw}: the kernel takes {what} but its modifiers "
                                   f"section has no {p.name}")
                options = dims_of(r)
                if (p.rank != 4 or p.dtype != "i32" or p.dims is None
                        or not any(_dims_equal(p.dims, w) for w in options)):
                    got = "none" if p.dims is None else ", ".join(d.text for d in p.dims)
                    raise ctx.fail(f"{pw} is rank {p.rank} {p.dtype} of dims [{got}] but must "
                                   f"be i32 of dims [{', '.join(options[0])}]"
                                   + (" (or 2 columns)" if len(options) > 1 else ""))
                taken.add(p.name)
                continue
            if CAPTURE_NAME_RE.match(p.name) is None:
                if p.dims is not None and any(n in env for d in p.dims for n in d.names):
                    raise ctx.fail(f"{pw}: its dims name a capture's "
                                   f"([{', '.join(d.text for d in p.dims)}])")
                continue
            c = captures.get(p.name)
            if c is None:
                raise ctx.fail(f"{pw} is named like a captured tensor but "
                               + ("the modifiers section lists no such capture" if modifiers
                                  else "the manifest has no 'modifiers' section"))
            if not p.is_memref:
                raise ctx.fail(f"{pw} must be a memref (the captured tensor), got {p.type}")
            if p.rank != len(c.shape) or p.dtype != c.dtype:
                raise ctx.fail(f"{pw} is rank {p.rank} {p.dtype} but the capture is "
                               f"{c.dtype} of shape {list(c.shape)}")
            n = int(CAPTURE_NAME_RE.match(p.name).group(1))
            want = [capture_dim_name(n, d) for d in range(len(c.shape))]
            if not _capture_dims_ok(p.dims, want, c.shape, env):
                got = "none" if p.dims is None else ", ".join(d.text for d in p.dims)
                raise ctx.fail(f"{pw} has dims [{got}] but must be [{', '.join(want)}] "
                               f"= {list(c.shape)} (the capture's shape)")
            taken.add(p.name)
    if rows is not None and KEY_RANGES not in taken:
        raise ctx.fail(f"modifiers: key_ranges: no kernel parameter {KEY_RANGES!r} takes them")
    if qrows is not None and QUERY_RANGES not in taken:
        raise ctx.fail(f"modifiers: query_ranges: no kernel parameter {QUERY_RANGES!r} "
                       "takes them")
    missing = [n for n in captures if n not in taken]
    if missing:
        raise ctx.fail(f"modifiers: no kernel parameter takes {', '.join(missing)} (every "
                       "capture is a memref parameter of that name)")


def parse_manifest(data: Any, json_path: str = "<manifest>",
                   check_files: bool = True) -> KernelSpec:
    """Validates a decoded manifest and returns its KernelSpec. Raises
    ManifestError naming the file and the field on any problem."""
    ctx = _Ctx(json_path)
    if not isinstance(data, dict):
        raise ctx.fail("manifest must be a JSON object")
    version = data.get("version")
    if version != MANIFEST_VERSION:
        raise ctx.fail(f"unsupported manifest version {version!r} "
                       f"(this package reads version {MANIFEST_VERSION})")
    name = _get(data, "name", ctx, str)
    if not re.match(r"^[A-Za-z0-9_.\-]+$", name):
        raise ctx.fail(f"bad kernel name {name!r}")
    stem = os.path.splitext(os.path.basename(json_path))[0]
    if json_path != "<manifest>" and stem != name:
        raise ctx.fail(f"kernel name {name!r} does not match the file name {stem!r}.json")
    kind = _get(data, "kind", ctx, str)
    if kind not in KINDS:
        raise ctx.fail(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    backward = kind == "backward"
    form = data.get("form")
    if form is None:
        form = DENSE      # manifests from before the packed forms
    if form not in FORMS:
        raise ctx.fail(f"unknown form {form!r} (known: {', '.join(FORMS)})")
    if backward and form == PAGED:
        raise ctx.fail("a backward manifest must be dense or varlen: a paged cache has no "
                       "backward")
    page_size = data.get("page_size")
    if form == PAGED:
        if (isinstance(page_size, bool) or not isinstance(page_size, int)
                or not PAGE_SIZE_MULTIPLE <= page_size <= MAX_PAGE_SIZE
                or page_size % PAGE_SIZE_MULTIPLE):
            raise ctx.fail(f"a paged manifest needs page_size, a multiple of "
                           f"{PAGE_SIZE_MULTIPLE} in [{PAGE_SIZE_MULTIPLE}, {MAX_PAGE_SIZE}], "
                           f"got {page_size!r}")
    elif page_size is not None:
        raise ctx.fail(f"page_size is a paged key; this manifest's form is {form}")
    chip = _get(data, "chip", ctx, str)
    try:
        parse_chip(chip)
    except ManifestError as exc:
        raise ctx.fail(str(exc)) from None
    kv_splits = data.get("kv_splits")
    if kv_splits is not None:
        if backward:
            raise ctx.fail("kv_splits is a forward key (split-KV)")
        if form == VARLEN:
            raise ctx.fail("kv_splits: split-KV takes dense tensors or a paged cache, "
                           "not packed sequences (form varlen)")
        if kv_splits != "auto" and (isinstance(kv_splits, bool) or not isinstance(kv_splits, int)
                                    or kv_splits < 1):
            raise ctx.fail(f"kv_splits must be \"auto\" or a positive integer, got {kv_splits!r}")
    modifiers = _parse_modifiers(data, ctx, kind, form, kv_splits)
    capture_dims = tuple(modifiers.dims()) if modifiers is not None else ()
    # A backward, a split-KV forward (the split kernel, then the merge) and a
    # forward with a workspace (the dynamic tile scheduler's counter) list
    # their launches in 'kernels', with their workspace.
    multi = backward or kv_splits is not None or "workspace" in data
    if multi:
        what = ("backward" if backward else "split-KV" if kv_splits is not None
                else "workspace-taking")
        for key in ("entry", "grid", "params"):
            if key in data:
                raise ctx.fail(f"a {what} manifest lists its "
                               f"launches in 'kernels'; top-level {key!r} is not allowed")
        entry = None
    else:
        entry = _get(data, "entry", ctx, str)
        if not _IDENT_RE.match(entry):
            raise ctx.fail(f"bad entry name {entry!r}")
    dtype = normalize_dtype(_get(data, "dtype", ctx, str))
    if dtype not in ATTENTION_DTYPES + ("f32",):
        raise ctx.fail(f"unsupported dtype {dtype!r} (known: f16, bf16, f32)")
    head_dim = _get(data, "head_dim", ctx, int)
    value_head_dim = _get(data, "value_head_dim", ctx, int, required=False,
                          default=head_dim)
    for fname, d in (("head_dim", head_dim), ("value_head_dim", value_head_dim)):
        if d < 8 or d > 256 or d % 8:
            raise ctx.fail(f"{fname} must be a multiple of 8 in [8, 256], got {d}")
    causal = _get(data, "causal", ctx, bool)
    window = data.get("window", None)
    if window is None:
        window = [-1, -1]
    if window != RUNTIME:
        if (not isinstance(window, list) or len(window) != 2
                or any(isinstance(w, bool) or not isinstance(w, int) for w in window)):
            raise ctx.fail(f"window must be \"runtime\" or [left, right] integers, "
                           f"got {window!r}")
        try:
            canonical_mask(causal, window)
        except ValueError as exc:
            raise ctx.fail(str(exc)) from None
    softcap = data.get("softcap")
    if softcap != RUNTIME:
        softcap = _get(data, "softcap", ctx, float, required=False)
        if softcap is not None and not (softcap > 0 and math.isfinite(softcap)):
            raise ctx.fail(f"softcap must be null, \"runtime\" or a finite number > 0, "
                           f"got {softcap!r}")
    scale = _get(data, "scale", ctx, float, required=False)
    if scale is not None and not (scale > 0 and math.isfinite(scale)):
        raise ctx.fail(f"scale must be null or a finite number > 0, got {scale!r}")
    scale_is_default = _get(data, "scale_is_default", ctx, bool, required=False)
    if scale_is_default and scale is not None and not same_float(scale, default_scale(head_dim)):
        raise ctx.fail(f"scale_is_default is true but scale {scale!r} is not "
                       f"1/sqrt({head_dim}) = {default_scale(head_dim)!r}")
    warps = _get(data, "warps", ctx, int, required=False)
    deterministic = _get(data, "deterministic", ctx, bool, required=backward, default=False)
    if multi:
        threads, smem, grid_e, parsed = 0, 0, (), ()
        workspace = _parse_workspace(data.get("workspace", None), ctx,
                                     FORM_NAMES[form] + ("SMS",), FORM_TENSORS[form])
        kernels = data.get("kernels")
        if not isinstance(kernels, list) or not kernels:
            raise ctx.fail("kernels must be a non-empty list of launches")
        ws = {w.name: w for w in workspace}
        entries = tuple(_parse_kernel(k, i, ctx, name, dtype, ws, form, page_size,
                                      capture_dims) for i, k in enumerate(kernels))
        taken = {p.name for e in entries for p in e.params if p.is_memref}
        wanted = GRADIENTS if backward else FORM_REQUIRED[form] if form != DENSE else \
            ("out", "lse")
        missing = [g for g in wanted if g not in taken]
        if missing and not backward:
            raise ctx.fail(f"no kernel takes {', '.join(missing)}: the forward would not "
                           "compute its results")
        if missing:
            raise ctx.fail(f"no kernel takes {', '.join(missing)}: the backward would not "
                           "compute every gradient")
    else:
        if "kernels" in data:
            raise ctx.fail("'kernels' is only allowed in a backward, split-KV or "
                           "workspace-taking manifest")
        threads = _parse_threads(data, ctx, "manifest")
        smem = _parse_smem(data, ctx, "manifest")
        grid_e = _parse_grid(data.get("grid"), ctx, form_grid_names(form))
        parsed = _parse_params(data.get("params"), ctx, FORM_NAMES[form] + capture_dims)
        workspace = ()
        if form != DENSE:
            # (Dense single-launch manifests predate these checks.)
            _check_memrefs(parsed, ctx, "", dtype, {}, form, page_size)
            taken = {p.name for p in parsed if p.is_memref}
            missing = [n for n in FORM_REQUIRED[form] if n not in taken]
            if missing:
                raise ctx.fail(f"a {form} kernel must take {', '.join(missing)} (its "
                               f"tensors: {', '.join(FORM_REQUIRED[form])})")
        entries = (EntrySpec(name, entry, grid_e, threads, (threads, 1, 1), smem, parsed),)
    _check_captures(entries, modifiers, ctx)
    # A run-time scalar must reach the kernels: some scalar parameter names it.
    named = set()
    for e in entries:
        for p in e.params:
            if p.is_scalar:
                named.update(p.value.names)
    # (With a built-in softcap, scale / softcap alone determines the scale.)
    carriers = _SCALE_CARRIERS + (({"scale_over_softcap"},)
                                  if softcap not in (None, RUNTIME) else ())
    if scale is None and not any(c <= named for c in carriers):
        raise ctx.fail("scale is null (a run-time parameter) but no kernel parameter "
                       "takes it (a scalar whose value names 'scale' or 'log2e_scale', "
                       "or 'scale_over_softcap' and 'log2e_softcap')")
    if softcap == RUNTIME and not any(c <= named for c in _SOFTCAP_CARRIERS):
        raise ctx.fail("softcap is \"runtime\" but no kernel parameter takes it "
                       "(a scalar whose value names 'softcap' or 'log2e_softcap')")
    # A causal kernel's right bound is 0 by its kind: it takes the left only.
    sizes = ["window_left"] if causal else ["window_left", "window_right"]
    if window == RUNTIME and not set(sizes) <= named:
        raise ctx.fail("window is \"runtime\" but no kernel parameters take its sizes "
                       "(scalars whose values name " + " and ".join(f"'{n}'" for n in sizes)
                       + ")")
    extras = {}
    for key in ("block_q", "block_kv", "stages"):
        extras[key] = _get(data, key, ctx, int, required=False)
    ptx_name = data.get("ptx", name + ".ptx")
    if not isinstance(ptx_name, str) or os.path.basename(ptx_name) != ptx_name:
        raise ctx.fail(f"'ptx' must be a file name in the manifest's folder, got {ptx_name!r}")
    ptx_path = os.path.join(os.path.dirname(os.path.abspath(json_path)), ptx_name)
    if check_files and json_path != "<manifest>" and not os.path.isfile(ptx_path):
        raise ctx.fail(f"PTX file {ptx_path} is missing")
    cubin_path = None
    if "cubin" in data:
        cubin = data["cubin"]
        if not isinstance(cubin, str) or not cubin or os.path.basename(cubin) != cubin:
            raise ctx.fail(f"'cubin' must be a file name in the manifest's folder, got {cubin!r}")
        cubin_path = os.path.join(os.path.dirname(ptx_path), cubin)
    return KernelSpec(
        name=name, kind=kind, chip=chip, entry=entry, dtype=dtype,
        head_dim=head_dim, value_head_dim=value_head_dim, causal=causal,
        window=window if window == RUNTIME else (window[0], window[1]),
        softcap=softcap, scale=scale,
        threads=threads, dynamic_shared_memory=smem, grid=grid_e,
        params=parsed, json_path=os.path.abspath(json_path) if json_path != "<manifest>" else json_path,
        ptx_path=ptx_path, warps=warps, kernels=entries, workspace=workspace,
        deterministic=deterministic, kv_splits=kv_splits, form=form, page_size=page_size,
        modifiers=modifiers, cubin_path=cubin_path, raw=data, **extras)


def load_manifest(json_path: str, check_files: bool = True) -> KernelSpec:
    try:
        with open(json_path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{json_path}: not valid JSON: {exc}") from None
    except OSError as exc:
        raise ManifestError(f"{json_path}: cannot read: {exc}") from None
    return parse_manifest(data, json_path, check_files=check_files)


# ---------------------------------------------------------------------------
# PTX entry signatures
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PtxEntry:
    name: str
    param_sizes: Tuple[int, ...]
    param_types: Tuple[str, ...]
    maxntid: Optional[Tuple[int, ...]] = None
    reqntid: Optional[Tuple[int, ...]] = None
    param_aligns: Tuple[Optional[int], ...] = ()    # .align of each parameter (None: none)


@dataclass(frozen=True)
class PtxInfo:
    version: Optional[str]
    target: Optional[str]
    entries: Dict[str, PtxEntry]


_PTX_TYPE_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2,
                   "f16": 2, "bf16": 2, "b32": 4, "u32": 4, "s32": 4, "f32": 4,
                   "b64": 8, "u64": 8, "s64": 8, "f64": 8}
_ENTRY_RE = re.compile(
    r"(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\((.*?)\)"
    r"(.*?)\{", re.S)
_PARAM_RE = re.compile(
    r"^\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(?:\.ptr\s+)?(?:\.(?:global|shared|const|local)\s+)?"
    r"(?:\.align\s+\d+\s+)?([A-Za-z_$][\w$]*)\s*(?:\[(\d+)\])?$")
_DIRECTIVE_RE = re.compile(r"\.(maxntid|reqntid)\s+(\d+(?:\s*,\s*\d+)*)")


def _strip_ptx_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_ptx(text: str) -> PtxInfo:
    """Finds the .version, .target and every .entry with its parameter sizes."""
    text = _strip_ptx_comments(text)
    version = re.search(r"^\s*\.version\s+(\S+)", text, re.M)
    target = re.search(r"^\s*\.target\s+([^\s,]+)", text, re.M)
    entries = {}
    for m in _ENTRY_RE.finditer(text):
        name, plist, directives = m.group(1), m.group(2), m.group(3)
        sizes, types, aligns = [], [], []
        for raw in plist.split(","):
            raw = " ".join(raw.split())
            if not raw:
                continue
            pm = _PARAM_RE.match(raw)
            if not pm:
                raise ManifestError(f"cannot parse PTX parameter {raw!r} of entry {name}")
            align, ptype, count = pm.group(1), pm.group(2), pm.group(4)
            if ptype not in _PTX_TYPE_SIZES:
                raise ManifestError(f"unknown PTX parameter type .{ptype} in entry {name}")
            size = _PTX_TYPE_SIZES[ptype] * (int(count) if count else 1)
            sizes.append(size)
            types.append(ptype + (f"[{count}]" if count else ""))
            aligns.append(int(align) if align else None)
        dirs = {}
        for dm in _DIRECTIVE_RE.finditer(directives):
            dirs[dm.group(1)] = tuple(int(x) for x in dm.group(2).split(","))
        entries[name] = PtxEntry(name, tuple(sizes), tuple(types),
                                 dirs.get("maxntid"), dirs.get("reqntid"), tuple(aligns))
    return PtxInfo(version.group(1) if version else None,
                   target.group(1) if target else None, entries)


def check_against_ptx(spec: KernelSpec, ptx_text: str) -> PtxInfo:
    """Raises ManifestError when the manifest does not describe the PTX: wrong
    target, or for any of its kernels (every launch of a backward manifest) a
    missing entry, wrong parameter count or sizes, or more threads than the
    entry allows."""
    info = parse_ptx(ptx_text)
    where = f"{spec.json_path} vs {os.path.basename(spec.ptx_path)}"
    if info.target is not None and info.target != spec.chip:
        raise ManifestError(f"{where}: PTX .target is {info.target} but the manifest "
                            f"says chip {spec.chip}")
    for i, k in enumerate(spec.kernels):
        _check_entry(k, info, f"{where}: kernels[{i}] ({k.entry})" if spec.is_multi_launch
                     else where)
    return info


# A tensor map parameter in the PTX: CUDA's `const __grid_constant__
# CUtensorMap`, 128 bytes at a 64-byte aligned offset (nvcc declares .align
# 128, cuda.h's alignas; LLVM's NVPTX the .align of the byval argument).
_TENSORMAP_PTX_TYPE = f"b8[{T.MAP_BYTES}]"


def _check_tensormap_param(entry: PtxEntry, i: int, label: str, where: str) -> None:
    align = entry.param_aligns[i] if i < len(entry.param_aligns) else None
    if entry.param_types[i] != _TENSORMAP_PTX_TYPE or not align or align % T.MAP_ALIGNMENT:
        got = (f".align {align} " if align else "") + f".{entry.param_types[i]}"
        raise ManifestError(
            f"{where}: parameter {i} ({label}) is a tensor map: the PTX must declare it "
            f".param .align {T.MAP_ALIGNMENT} .{_TENSORMAP_PTX_TYPE} (an .align that is a "
            f"multiple of {T.MAP_ALIGNMENT}), got .param {got}")


def _check_entry(k: EntrySpec, info: PtxInfo, where: str) -> None:
    entry = info.entries.get(k.entry)
    if entry is None:
        raise ManifestError(f"{where}: no .entry {k.entry} in the PTX "
                            f"(entries: {', '.join(info.entries) or 'none'})")
    slots = k.slots()
    want = tuple(slot_size(t) for _, t in slots)
    if len(want) != len(entry.param_sizes):
        raise ManifestError(
            f"{where}: entry {k.entry} takes {len(entry.param_sizes)} parameters "
            f"but the manifest's params expand to {len(want)} "
            f"({', '.join(l for l, _ in slots)})")
    for i, ((label, typ), w, got) in enumerate(zip(slots, want, entry.param_sizes)):
        if w != got:
            raise ManifestError(
                f"{where}: parameter {i} ({label}) is {w} bytes in the manifest but "
                f"{got} bytes (.{entry.param_types[i]}) in the PTX")
        if typ == TENSORMAP:
            _check_tensormap_param(entry, i, label, where)
    for which in ("maxntid", "reqntid"):
        dims = getattr(entry, which)
        if dims is None:
            continue
        total = 1
        for d in dims:
            total *= d
        if which == "maxntid" and k.threads > total:
            raise ManifestError(f"{where}: manifest threads {k.threads} exceeds the "
                                f"entry's .maxntid {dims}")
        if which == "reqntid" and k.threads != total:
            raise ManifestError(f"{where}: manifest threads {k.threads} differs from "
                                f"the entry's .reqntid {dims}")
