"""Parameter packing, grid evaluation and the launch itself.

Torch-free: tensors are read through duck typing (``data_ptr()``,
``untyped_storage()``, ``shape``, ``stride()``, ``dtype``) or given as
`Memref` values, so the packing can be tested with fake pointers.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from typing import Any, List, Mapping, Sequence, Tuple

from . import _manifest as M
from ._errors import ExpressionError, LaunchError

# torch dtype (as str()) -> manifest element type
_TORCH_DTYPES = {
    "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
    "torch.float64": "f64", "torch.int8": "i8", "torch.uint8": "u8",
    "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
    "torch.uint32": "u32", "torch.uint64": "u64",
}

POINTER_ALIGNMENT = 16

# Largest grid the CUDA launch API accepts on any device of sm_80 or newer.
DEFAULT_MAX_GRID = (2 ** 31 - 1, 65535, 65535)


@dataclass(frozen=True)
class Memref:
    """An expanded memref descriptor: pointers are device addresses (ints),
    sizes and strides are in elements."""

    allocated: int
    aligned: int
    offset: int
    sizes: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str


def dtype_name(dtype: Any) -> str:
    s = str(dtype)
    if s in _TORCH_DTYPES:
        return _TORCH_DTYPES[s]
    return M.normalize_dtype(s)


def memref_from_tensor(t: Any) -> Memref:
    """The descriptor of a (torch) tensor: the storage's base as the
    allocated pointer, data_ptr() (storage offset already folded in) as the
    aligned pointer, offset 0."""
    if isinstance(t, Memref):
        return t
    aligned = int(t.data_ptr())
    try:
        allocated = int(t.untyped_storage().data_ptr())
    except Exception:
        allocated = aligned
    return Memref(allocated, aligned, 0, tuple(int(s) for s in t.shape),
                  tuple(int(s) for s in t.stride()), dtype_name(t.dtype))


_CTYPES = {
    "ptr": ctypes.c_uint64, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
    "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
    "f32": ctypes.c_float, "f64": ctypes.c_double,
}
_INT_RANGES = {"i32": (-2 ** 31, 2 ** 31 - 1), "u32": (0, 2 ** 32 - 1),
               "i64": (-2 ** 63, 2 ** 63 - 1), "u64": (0, 2 ** 64 - 1),
               "ptr": (0, 2 ** 64 - 1)}


@dataclass(frozen=True)
class PackedParam:
    label: str
    type: str          # 'ptr', 'i64', 'i32', 'f32', ...
    value: Any         # the Python value

    def ctype(self):
        return _CTYPES[self.type](self.value)


def _slot(label: str, typ: str, value) -> PackedParam:
    if typ in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise LaunchError(f"parameter {label} ({typ}) needs an integer, got {value!r}")
        lo, hi = _INT_RANGES[typ]
        if not lo <= value <= hi:
            raise LaunchError(f"parameter {label} = {value} does not fit in {typ}")
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LaunchError(f"parameter {label} ({typ}) needs a number, got {value!r}")
        value = float(value)
    return PackedParam(label, typ, value)


def pack_params(spec: M.KernelSpec, args: Mapping[str, Any],
                env: Mapping[str, Any]) -> List[PackedParam]:
    """Expands the manifest's parameters, in PTX order, from `args` (memref
    parameters: tensors or Memref; scalar parameters: evaluated from their
    manifest 'value' against `env` plus the non-tensor entries of `args`).
    Checks rank, dtype, dims (against `env`), unit last stride and 16-byte
    alignment of every memref."""
    out: List[PackedParam] = []
    scalar_env = dict(env)
    for k, v in args.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            scalar_env[k] = v
    for p in spec.params:
        if not p.is_memref:
            try:
                val = p.value.evaluate(scalar_env)
            except ExpressionError as exc:
                raise LaunchError(f"{spec.name}: scalar parameter {p.name}: {exc}") from None
            out.append(_slot(p.name, p.type, val))
            continue
        if p.name not in args:
            raise LaunchError(f"{spec.name}: no tensor given for parameter {p.name!r} "
                              f"(given: {', '.join(sorted(args))})")
        m = memref_from_tensor(args[p.name])
        where = f"{spec.name}: parameter {p.name}"
        if len(m.sizes) != p.rank or len(m.strides) != p.rank:
            raise LaunchError(f"{where} has rank {p.rank} but the tensor has "
                              f"{len(m.sizes)} dimensions")
        if m.dtype != p.dtype:
            raise LaunchError(f"{where} must be {p.dtype}, got {m.dtype}")
        if p.dims is not None:
            try:
                want = tuple(d.evaluate(env) for d in p.dims)
            except ExpressionError as exc:
                raise LaunchError(f"{where}: {exc}") from None
            if want != m.sizes:
                raise LaunchError(
                    f"{where}: sizes {list(m.sizes)} differ from the manifest's "
                    f"[{', '.join(d.text for d in p.dims)}] = {list(want)}")
        if any(s < 0 for s in m.sizes) or any(s < 0 for s in m.strides):
            raise LaunchError(f"{where}: negative size or stride {m.sizes} {m.strides}")
        if p.rank > 0 and m.sizes[-1] > 1 and m.strides[-1] != 1:
            raise LaunchError(f"{where}: the last dimension must be contiguous "
                              f"(stride 1), got strides {list(m.strides)}")
        if m.aligned % POINTER_ALIGNMENT:
            raise LaunchError(f"{where}: data pointer {m.aligned:#x} is not "
                              f"{POINTER_ALIGNMENT}-byte aligned")
        out.append(_slot(f"{p.name}.allocated", "ptr", m.allocated))
        out.append(_slot(f"{p.name}.aligned", "ptr", m.aligned))
        out.append(_slot(f"{p.name}.offset", "i64", m.offset))
        out += [_slot(f"{p.name}.sizes[{i}]", "i64", s) for i, s in enumerate(m.sizes)]
        out += [_slot(f"{p.name}.strides[{i}]", "i64", s) for i, s in enumerate(m.strides)]
    return out


def grid_dims(spec: M.KernelSpec, env: Mapping[str, Any],
              max_grid: Sequence[int] = DEFAULT_MAX_GRID) -> Tuple[int, int, int]:
    """Evaluates the manifest's grid expressions; pads to 3 dims with 1."""
    dims = []
    for i, e in enumerate(spec.grid):
        try:
            v = e.evaluate(env)
        except ExpressionError as exc:
            raise LaunchError(f"{spec.name}: grid[{i}]: {exc}") from None
        if isinstance(v, bool) or not isinstance(v, int):
            raise LaunchError(f"{spec.name}: grid[{i}] = {e.text!r} is not an integer ({v!r})")
        dims.append(v)
    dims += [1] * (3 - len(dims))
    for i, (v, lim) in enumerate(zip(dims, max_grid)):
        if v < 1:
            raise LaunchError(f"{spec.name}: grid[{i}] evaluates to {v}; nothing to launch "
                              "(empty problems must be handled before launching)")
        if v > lim:
            axis = "xyz"[i]
            raise LaunchError(f"{spec.name}: grid {axis} = {v} exceeds the device limit {lim} "
                              f"(grid {[e.text for e in spec.grid]} with {dict(env)})")
    return tuple(dims)


def describe_params(packed: Sequence[PackedParam]) -> str:
    rows = []
    for i, p in enumerate(packed):
        v = f"{p.value:#x}" if p.type == "ptr" else repr(p.value)
        rows.append(f"  [{i:2d}] {p.label:<22} {p.type:<4} {v}")
    return "\n".join(rows)


@dataclass(frozen=True)
class PreparedLaunch:
    """A launch whose parameters are packed and whose grid is evaluated, so
    that a sequence of launches can be checked completely before the first
    one is issued."""

    kernel: Any                    # _kernels.LoadedKernel
    packed: Tuple[PackedParam, ...]
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    shared_bytes: int

    @property
    def name(self) -> str:
        return self.kernel.spec.name


def prepare(kernel, args: Mapping[str, Any], env: Mapping[str, Any]) -> PreparedLaunch:
    """Packs `args` for a `_kernels.LoadedKernel` and evaluates its grid
    (raises LaunchError; launches nothing)."""
    spec = kernel.spec
    packed = pack_params(spec, args, env)
    grid = grid_dims(spec, env, kernel.device.max_grid)
    block = tuple(getattr(spec, "block", None) or (spec.threads, 1, 1))
    return PreparedLaunch(kernel, tuple(packed), grid, block, spec.dynamic_shared_memory)


def launch_prepared(prep: PreparedLaunch, stream: int) -> None:
    """Issues a prepared launch on `stream` (a CUstream handle as an int; 0
    is the legacy default stream)."""
    from . import _cuda

    kernel = prep.kernel
    if os.environ.get("FLASHMLIR_DEBUG"):
        print(f"flashmlir: launch {prep.name} grid={prep.grid} block={prep.block} "
              f"smem={prep.shared_bytes} stream={int(stream or 0):#x}\n"
              + describe_params(prep.packed), file=sys.stderr)
    storage = [p.ctype() for p in prep.packed]
    drv = _cuda.driver()
    with drv.context(kernel.device.context):
        drv.launch(kernel.function, prep.grid, prep.block, prep.shared_bytes, stream,
                   storage, what=prep.name)
        if os.environ.get("FLASHMLIR_SYNC"):
            drv.stream_synchronize(stream, what=prep.name)


def launch(kernel, args: Mapping[str, Any], env: Mapping[str, Any], stream: int) -> None:
    """Packs and launches a `_kernels.LoadedKernel` on `stream` (a CUstream
    handle as an int; 0 is the legacy default stream)."""
    launch_prepared(prepare(kernel, args, env), stream)
