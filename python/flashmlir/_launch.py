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
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from . import _manifest as M
from . import _tensormap as T
from ._errors import ExpressionError, LaunchError

# torch dtype (as str()) -> manifest element type
_TORCH_DTYPES = {
    "torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
    "torch.float64": "f64", "torch.int8": "i8", "torch.uint8": "u8",
    "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
    "torch.uint32": "u32", "torch.uint64": "u64", "torch.bool": "i1",
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
    type: str          # 'ptr', 'i64', 'i32', 'f32', ..., 'tensormap'
    value: Any         # the Python value (a tensor map: a _tensormap.MapArg)

    def ctype(self):
        """The parameter's storage (a tensor map's: zeroed, encoded at launch)."""
        if self.type == M.TENSORMAP:
            return T.storage()
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
    Checks rank, dtype, dims (against `env`), unit last stride (not of a
    modifier's captured tensor) and 16-byte alignment of every memref, and
    that the driver can map each tensor map parameter's memref (its
    encoding, `_tensormap.encoding`)."""
    out: List[PackedParam] = []
    scalar_env = dict(env)
    for k, v in args.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            scalar_env[k] = v
    memrefs = {p.name: _memref(spec, p, args, env) for p in spec.params if p.is_memref}
    for p in spec.params:
        if p.is_memref:
            out += _memref_slots(p.name, memrefs[p.name])
        elif p.is_tensormap:
            out.append(_map_slot(spec, p, memrefs[p.tensor]))
        else:
            try:
                val = p.value.evaluate(scalar_env)
            except ExpressionError as exc:
                raise LaunchError(f"{spec.name}: scalar parameter {p.name}: {exc}") from None
            out.append(_slot(p.name, p.type, val))
    return out


def _map_slot(spec: M.KernelSpec, p: M.ParamSpec, m: Memref) -> PackedParam:
    """The tensor map `p` of the (checked) memref `m`."""
    where = f"{spec.name}: tensor map {p.name} of {p.tensor}"
    if m.aligned % T.ADDRESS_ALIGNMENT:
        raise LaunchError(f"{where}: data pointer {m.aligned:#x} is not "
                          f"{T.ADDRESS_ALIGNMENT}-byte aligned")
    enc = T.encoding(where, p, m.sizes, m.strides, M.ELEMENT_SIZES[m.dtype])
    return PackedParam(p.name, M.TENSORMAP, T.MapArg(p.tensor, m.aligned, enc))


def _memref(spec: M.KernelSpec, p: M.ParamSpec, args: Mapping[str, Any],
            env: Mapping[str, Any]) -> Memref:
    """The checked descriptor of memref parameter `p`'s tensor."""
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
    # (A modifier's captured tensor and the key ranges may have any strides:
    # the kernel reads elements one at a time, at the descriptor's strides.)
    if (p.rank > 0 and m.sizes[-1] > 1 and m.strides[-1] != 1 and not M.is_capture_param(p)
            and p.name != M.KEY_RANGES):
        raise LaunchError(f"{where}: the last dimension must be contiguous "
                          f"(stride 1), got strides {list(m.strides)}")
    if m.aligned % POINTER_ALIGNMENT:
        raise LaunchError(f"{where}: data pointer {m.aligned:#x} is not "
                          f"{POINTER_ALIGNMENT}-byte aligned")
    return m


def _memref_slots(name: str, m: Memref) -> List[PackedParam]:
    return ([_slot(f"{name}.allocated", "ptr", m.allocated),
             _slot(f"{name}.aligned", "ptr", m.aligned),
             _slot(f"{name}.offset", "i64", m.offset)]
            + [_slot(f"{name}.sizes[{i}]", "i64", s) for i, s in enumerate(m.sizes)]
            + [_slot(f"{name}.strides[{i}]", "i64", s) for i, s in enumerate(m.strides)])


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


def multiprocessors(count: int) -> int:
    """The SMS a grid sees: the device's multiprocessor count, or
    $FLASHMLIR_SMS (a positive integer) so that tests make a persistent
    kernel's blocks loop over many tiles on small problems."""
    text = os.environ.get("FLASHMLIR_SMS")
    if not text:
        return count
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise LaunchError(f"FLASHMLIR_SMS must be a positive integer, got {text!r}")
    return value


def prepare(kernel, args: Mapping[str, Any], env: Mapping[str, Any]) -> PreparedLaunch:
    """Packs `args` for a `_kernels.LoadedKernel` and evaluates its grid
    (raises LaunchError; launches nothing)."""
    spec = kernel.spec
    packed = pack_params(spec, args, env)
    # SMS: a persistent kernel's grid is at most one block per multiprocessor.
    grid = grid_dims(spec, {**env, "SMS": multiprocessors(kernel.device.sm_count)},
                     kernel.device.max_grid)
    block = tuple(getattr(spec, "block", None) or (spec.threads, 1, 1))
    return PreparedLaunch(kernel, tuple(packed), grid, block, spec.dynamic_shared_memory)


def param_storage(prep: PreparedLaunch) -> List[Any]:
    """The ctypes storage of the parameters of `prep`, its tensor maps
    encoded (raises CudaError naming a map the driver refuses)."""
    from . import _cuda

    storage = [p.ctype() for p in prep.packed]
    maps = [(p, s) for p, s in zip(prep.packed, storage) if p.type == M.TENSORMAP]
    if maps:
        drv = _cuda.driver()
        fn = T.encode_function(drv, prep.name)
        with drv.context(prep.kernel.device.context):
            for p, s in maps:
                arg = p.value
                T.BoundMap(p.label, arg.tensor, arg.encoding, s,
                           ctypes.c_uint64(arg.address)).encode(drv, fn, prep.name)
    return storage


def launch_prepared(prep: PreparedLaunch, stream: int,
                    storage: Optional[Sequence[Any]] = None) -> None:
    """Issues a prepared launch on `stream` (a CUstream handle as an int; 0
    is the legacy default stream), with its `param_storage` (made here
    when not given)."""
    from . import _cuda

    kernel = prep.kernel
    if os.environ.get("FLASHMLIR_DEBUG"):
        print(f"flashmlir: launch {prep.name} grid={prep.grid} block={prep.block} "
              f"smem={prep.shared_bytes} stream={int(stream or 0):#x}\n"
              + describe_params(prep.packed), file=sys.stderr)
    if storage is None:
        storage = param_storage(prep)
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
