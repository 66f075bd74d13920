"""TMA tensor maps: the kernel parameters a ``"tensormap"`` manifest entry
describes (a CUtensorMap, 128 bytes, passed by value), encoded on the host
with the driver's cuTensorMapEncodeTiled for each call's tensor.

This module holds the one table of the manifest's option names and their
cuda.h values (CUDA 13.0: CUtensorMapDataType, CUtensorMapSwizzle,
CUtensorMapL2promotion, CUtensorMapFloatOOBfill, CUtensorMapInterleave);
the ctypes path passes these values to the driver, the native launcher gets
them in its plan struct (`_native`). `encoding` turns a tensor's sizes and
strides into the driver's arguments, checking the driver's rules with a
message naming the tensor; `BoundMap` is a plan's kernel-parameter storage
of one map with those arguments in ctypes arrays, re-encoded when the
tensor's address changes.

Needs neither torch nor CUDA (the driver is passed in).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from ._errors import LaunchError

# -- cuda.h's values (test_tensormap.py checks them against the header) ----------------

# manifest dtype -> CUtensorMapDataType
DATA_TYPES = {"f16": 6,     # CU_TENSOR_MAP_DATA_TYPE_FLOAT16
              "f32": 7,     # CU_TENSOR_MAP_DATA_TYPE_FLOAT32
              "bf16": 9}    # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
# manifest swizzle -> (CUtensorMapSwizzle, the most bytes the box's innermost
# extent may span with it; None: no limit)
SWIZZLES = {"none": (0, None),   # CU_TENSOR_MAP_SWIZZLE_NONE
            "32B": (1, 32),      # CU_TENSOR_MAP_SWIZZLE_32B
            "64B": (2, 64),      # CU_TENSOR_MAP_SWIZZLE_64B
            "128B": (3, 128)}    # CU_TENSOR_MAP_SWIZZLE_128B
# manifest l2_promotion -> CUtensorMapL2promotion
L2_PROMOTIONS = {"none": 0,      # CU_TENSOR_MAP_L2_PROMOTION_NONE
                 "64B": 1,       # CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                 "128B": 2,      # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                 "256B": 3}      # CU_TENSOR_MAP_L2_PROMOTION_L2_256B
# manifest oob_fill -> CUtensorMapFloatOOBfill
OOB_FILLS = {"zero": 0,          # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
             "nan": 1}           # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
# manifest interleave -> CUtensorMapInterleave (only none: the kernels' layout)
INTERLEAVES = {"none": 0}        # CU_TENSOR_MAP_INTERLEAVE_NONE

DEFAULT_OOB_FILL = "zero"
DEFAULT_L2_PROMOTION = "128B"

MAP_BYTES = 128          # sizeof(CUtensorMap): CU_TENSOR_MAP_NUM_QWORDS 64-bit words
# The driver wants the map it writes 64-byte aligned; cuda.h declares
# CUtensorMap alignas(128) (and nvcc's kernel parameter .align 128). The
# storage meets both.
MAP_ALIGNMENT = 64
STORAGE_ALIGNMENT = 128

# cuTensorMapEncodeTiled's rules (cuda.h) for interleave none.
MAX_RANK = 5
MAX_BOX = 256
BOX_INNER_MULTIPLE = 16  # bytes
ADDRESS_ALIGNMENT = 16   # bytes (32 with interleave 32B, not used)
STRIDE_MULTIPLE = 16     # bytes
MAX_STRIDE = 1 << 40     # bytes, exclusive
MAX_DIM = 1 << 32        # elements, inclusive


def box_error(box: Sequence[int], element_size: int, swizzle: str) -> Optional[str]:
    """Why `box` (the manifest's order, outermost first) breaks the driver's
    rules for this element size and swizzle, or None."""
    inner = box[-1] * element_size
    if inner % BOX_INNER_MULTIPLE:
        return (f"the innermost box extent {box[-1]} x {element_size} bytes = {inner} bytes "
                f"is not a multiple of {BOX_INNER_MULTIPLE} bytes")
    span = SWIZZLES[swizzle][1]
    if span is not None and inner > span:
        return (f"with swizzle {swizzle} the innermost box extent may span at most {span} "
                f"bytes, got {box[-1]} x {element_size} = {inner}")
    return None


@dataclass(frozen=True)
class Encoding:
    """cuTensorMapEncodeTiled's arguments for one tensor but its address, in
    the driver's order (innermost dimension first)."""

    data_type: int
    global_dim: Tuple[int, ...]
    global_strides: Tuple[int, ...]     # bytes, of dimensions 1..rank-1
    box: Tuple[int, ...]
    element_strides: Tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @property
    def rank(self) -> int:
        return len(self.global_dim)

    def describe(self) -> str:
        """The arguments, with the manifest's names of the enums."""
        return (f"{_name(DATA_TYPES, self.data_type)}, dims {list(self.global_dim)}, byte "
                f"strides {list(self.global_strides)}, box {list(self.box)}, swizzle "
                f"{_name({k: v[0] for k, v in SWIZZLES.items()}, self.swizzle)}, l2 promotion "
                f"{_name(L2_PROMOTIONS, self.l2_promotion)}, oob fill "
                f"{_name(OOB_FILLS, self.oob_fill)}")


def _name(table, value) -> str:
    return next((k for k, v in table.items() if v == value), str(value))


def encoding(where: str, p, sizes: Sequence[int], strides: Sequence[int],
             element_size: int) -> Encoding:
    """The encoding of tensor map parameter `p` (a tensormap ParamSpec) for
    a tensor of these sizes and strides (elements, outermost first). Raises
    LaunchError, naming `where` and the rule, for a tensor the driver
    cannot map. A size-1 dimension's stride never addresses memory (only
    coordinate 0 is in bounds, and the TMA unit reads nothing out of
    bounds): it is passed as the inner dimensions' extent, rounded up to
    16 bytes, whatever the tensor's stride."""
    rank = len(sizes)
    for i, n in enumerate(sizes):
        if not 1 <= n <= MAX_DIM:
            raise LaunchError(f"{where}: dimension {i} has size {n}; a tensor map needs "
                              f"sizes in [1, 2^32]")
    if sizes[-1] > 1 and strides[-1] != 1:
        raise LaunchError(f"{where}: the innermost dimension must have stride 1 element "
                          f"for a tensor map, got strides {list(strides)}")
    dims = tuple(reversed([int(n) for n in sizes]))
    byte_strides = []
    extent = dims[0] * element_size          # bytes the inner dimensions span (a bound)
    for j in range(1, rank):                 # driver dimension j = tensor dimension rank-1-j
        i = rank - 1 - j
        if sizes[i] == 1:
            s = -(-extent // STRIDE_MULTIPLE) * STRIDE_MULTIPLE
        else:
            s = strides[i] * element_size
        if s % STRIDE_MULTIPLE or not 0 <= s < MAX_STRIDE:
            raise LaunchError(
                f"{where}: dimension {i} has a stride of {strides[i]} elements = {s} "
                f"bytes; a tensor map needs strides that are multiples of "
                f"{STRIDE_MULTIPLE} bytes and less than 2^40 (strides {list(strides)})")
        byte_strides.append(s)
        extent = max(extent, s * dims[j])
    return Encoding(DATA_TYPES[p.dtype], dims, tuple(byte_strides),
                    tuple(reversed(p.box)), (1,) * rank, INTERLEAVES["none"],
                    SWIZZLES[p.swizzle][0], L2_PROMOTIONS[p.l2_promotion],
                    OOB_FILLS[p.oob_fill])


@dataclass(frozen=True)
class MapArg:
    """A packed tensor map parameter: the map of tensor `tensor` at `address`."""

    tensor: str
    address: int
    encoding: Encoding

    def __repr__(self) -> str:
        return f"map of {self.tensor} at {self.address:#x}: {self.encoding.describe()}"


def storage():
    """Zeroed kernel-parameter storage for one map (STORAGE_ALIGNMENT-byte
    aligned; keeps its buffer alive)."""
    buf = (ctypes.c_uint8 * (MAP_BYTES + STORAGE_ALIGNMENT))()
    return (ctypes.c_uint8 * MAP_BYTES).from_buffer(buf, -ctypes.addressof(buf) % STORAGE_ALIGNMENT)


def encode_function(drv, what: str):
    """The driver's cuTensorMapEncodeTiled, or a LaunchError naming `what`."""
    fn = drv.fns.get("cuTensorMapEncodeTiled")
    if fn is None:
        raise LaunchError(f"{what} takes a TMA tensor map but the CUDA driver has no "
                          "cuTensorMapEncodeTiled (CUDA 12.0 or newer is needed)")
    return fn


def failure_detail(what: str, label: str, tensor: str, address: int, enc: Encoding) -> str:
    return f"({what}: tensor map {label} of {tensor} at {address:#x}: {enc.describe()})"


class BoundMap:
    """One tensor map parameter of a launch: its kernel-parameter storage,
    the driver's arguments in ctypes arrays, and the address the storage
    holds an encoding of (`encoded`, 0: none), so that a call with the
    tensor at the same address as the last one encodes nothing. Shared by
    the ctypes path (`encode`) and the native launcher (which reads and
    writes the same fields)."""

    __slots__ = ("label", "tensor", "encoding", "storage", "address", "encoded", "global_dim",
                 "global_strides", "box", "element_strides")

    def __init__(self, label: str, tensor: str, enc: Encoding, storage_, address_slot):
        self.label, self.tensor, self.encoding = label, tensor, enc
        self.storage = storage_
        self.address = address_slot          # a c_uint64: the memref's aligned pointer slot
        self.encoded = ctypes.c_uint64(0)
        r = enc.rank
        self.global_dim = (ctypes.c_uint64 * r)(*enc.global_dim)
        self.global_strides = (ctypes.c_uint64 * max(r - 1, 1))(*enc.global_strides)
        self.box = (ctypes.c_uint32 * r)(*enc.box)
        self.element_strides = (ctypes.c_uint32 * r)(*enc.element_strides)

    def current(self) -> bool:
        """Whether the storage holds the map of the address in the slot."""
        return self.address.value == self.encoded.value

    def encode(self, drv, fn, what: str) -> None:
        """Encodes the map of the address in the address slot (unless the
        storage holds it already); raises CudaError naming the parameter."""
        address = self.address.value
        if address == self.encoded.value:
            return
        self.encoded.value = 0
        e = self.encoding
        rc = fn(ctypes.addressof(self.storage), e.data_type, e.rank, address, self.global_dim,
                self.global_strides, self.box, self.element_strides, e.interleave, e.swizzle,
                e.l2_promotion, e.oob_fill)
        if rc:
            drv.check("cuTensorMapEncodeTiled", rc,
                      failure_detail(what, self.label, self.tensor, address, e))
        self.encoded.value = address
