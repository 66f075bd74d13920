"""Launch plans: the steady-state launch path.

A `LaunchPlan` is made once from a `_launch.PreparedLaunch`, i.e. after the
full packing and validation of one call (ranks, dtypes, dims against the
manifest, unit last stride, alignment, grid limits). It keeps the packed
parameters in ctypes storage with the `void*[]` array cuLaunchKernel takes,
and records which slots hold the pointers of which memref parameter. A later
call with the same kernel, shapes, strides, dtypes and options only writes
the new tensors' addresses into those slots (checking their 16-byte
alignment, the one property of a memref that can change between such
calls) and issues one cuLaunchKernel: no manifest, expression or dict work.

The plan is generic over the manifest's parameter list: every memref
parameter is bound by name to a position in the tuple of tensors a call
passes (`names`), every scalar parameter keeps the value it was packed with
(its expression's inputs are part of what makes calls share a plan).

Buffers carved out of one allocation (a backward's workspace) are bound as
`views`: the parameter's pointer is a byte tensor's address plus a fixed
offset, so a call allocates one buffer and builds no view tensors.

A tensor map parameter's storage is encoded (cuTensorMapEncodeTiled) after
the binding, from its memref's bound pointer, with the arguments computed
once per plan (sizes and strides are part of the key); its `BoundMap`
remembers the address the storage holds a map of, so a call with the tensor
at the same address encodes nothing. Every map of a sequence is encoded
before the first launch.

With the native launcher (`_native`), a PlanSequence (and a single plan)
binds and issues in one ctypes call; without it, or with FLASHMLIR_DEBUG or
FLASHMLIR_SYNC set, it binds and launches here.

Torch-free: tensors are read through ``data_ptr()`` and
``storage_offset()`` only.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from . import _launch, _native
from . import _manifest as M
from . import _tensormap
from ._errors import LaunchError

_c_void_p = ctypes.c_void_p


class LaunchPlan:
    """One kernel launch with everything fixed but the tensors' addresses
    and the stream.

    prep:  the PreparedLaunch of a validated call.
    names: the names of the tensors a call passes to `launch`, in order; every
           memref parameter of the kernel must be one of them or a view.
    views: {parameter: (name, byte offset)}: the parameter is the byte
           (uint8) tensor `name` of the call plus that offset."""

    __slots__ = ("name", "kernel", "names", "_storage", "_argv", "_binds", "_grid", "_block",
                 "_smem", "_ctx", "_lock", "_launch_fn", "_ctx_fn", "_ctx_out", "_ctx_ref",
                 "_drv", "_debug", "_sync", "packed", "_native", "_maps", "_encode_fn")

    def __init__(self, prep: _launch.PreparedLaunch, names: Sequence[str],
                 views: Optional[Mapping[str, Tuple[str, int]]] = None):
        from . import _cuda

        self.name = prep.name
        self.kernel = prep.kernel
        self.names = tuple(names)
        self.packed = prep.packed
        self._storage = [p.ctype() for p in prep.packed]
        n = len(self._storage)
        self._argv = (_c_void_p * max(n, 1))(*[ctypes.addressof(s) for s in self._storage])
        labels = {p.label: i for i, p in enumerate(prep.packed)}
        views = dict(views or {})
        # (tensor index, allocated slot, aligned slot, element size, byte offset)
        binds: List[Tuple[int, Any, Any, int, int]] = []
        for p in self.kernel.spec.params:
            if not p.is_memref:
                continue
            src, off, esize = p.name, 0, M.ELEMENT_SIZES[p.dtype]
            if p.name in views:
                (src, off), esize = views[p.name], 1
            if src not in self.names:
                raise LaunchError(f"{self.name}: parameter {p.name!r} is not among the "
                                  f"tensors of the call ({', '.join(self.names)})")
            binds.append((self.names.index(src),
                          self._storage[labels[f"{p.name}.allocated"]],
                          self._storage[labels[f"{p.name}.aligned"]], esize, int(off)))
        self._binds = tuple(binds)
        self._maps = tuple(
            _tensormap.BoundMap(p.name, p.tensor, prep.packed[labels[p.name]].value.encoding,
                                self._storage[labels[p.name]],
                                self._storage[labels[f"{p.tensor}.aligned"]])
            for p in self.kernel.spec.params if p.is_tensormap)
        self._grid = prep.grid
        self._block = prep.block
        self._smem = int(prep.shared_bytes)
        self._ctx = self.kernel.device.context
        self._lock = threading.Lock()
        drv = _cuda.driver()
        self._drv = drv
        self._encode_fn = _tensormap.encode_function(drv, self.name) if self._maps else None
        self._launch_fn = drv.fns["cuLaunchKernel"]
        self._ctx_fn = drv.fns["cuCtxGetCurrent"]
        self._ctx_out = _cuda.CUcontext()
        self._ctx_ref = ctypes.byref(self._ctx_out)
        # Read when the plan is made (flashmlir.clear_caches() makes new ones).
        self._debug = bool(os.environ.get("FLASHMLIR_DEBUG"))
        self._sync = bool(os.environ.get("FLASHMLIR_SYNC"))
        self._native = native_sequence([self])

    def bind(self, tensors: Sequence[Any]) -> None:
        """Writes the addresses of `tensors` (in `names` order) into the
        parameter slots. Raises ValueError (as the first call's validation
        does) for a pointer that is not 16-byte aligned; nothing is launched."""
        for i, alloc, aligned, esize, off in self._binds:
            t = tensors[i]
            ptr = t.data_ptr() + off
            if ptr % _launch.POINTER_ALIGNMENT:
                raise ValueError(f"{self.names[i]}'s data pointer {ptr:#x} is not "
                                 f"{_launch.POINTER_ALIGNMENT}-byte aligned (storage offset?); "
                                 f"call .clone() first ({self.name})")
            aligned.value = ptr
            alloc.value = ptr - off - t.storage_offset() * esize

    def launch(self, tensors: Sequence[Any], stream: int) -> None:
        """Binds `tensors` and issues the launch on `stream` (a CUstream
        handle as an int; 0 is the legacy default stream)."""
        if self._native is not None:
            self._native.launch(tensors, stream)
        else:
            self.launch_python(tensors, stream)

    def launch_python(self, tensors: Sequence[Any], stream: int) -> None:
        """`launch` through ctypes only (the path without the native launcher)."""
        with self._lock:
            self.bind(tensors)
            encode_maps((self,))
            self._issue(stream)

    def encode(self) -> None:
        """Encodes the tensor maps of the bound pointers (raises CudaError
        naming the parameter)."""
        for m in self._maps:
            m.encode(self._drv, self._encode_fn, self.name)

    def _issue(self, stream: int) -> None:
        if self._debug:
            self._print(stream)
        rc = self._ctx_fn(self._ctx_ref)
        if rc:
            self._drv.check("cuCtxGetCurrent", rc)
        g, b = self._grid, self._block
        if self._ctx_out.value == self._ctx:
            rc = self._launch_fn(self.kernel.function, g[0], g[1], g[2], b[0], b[1], b[2],
                                 self._smem, stream, self._argv, None)
        else:
            with self._drv.context(self._ctx):
                rc = self._launch_fn(self.kernel.function, g[0], g[1], g[2], b[0], b[1], b[2],
                                     self._smem, stream, self._argv, None)
        if rc:
            self._drv.check("cuLaunchKernel", rc,
                            f"({self.name} grid={g} block={b} dynamic_shared_memory="
                            f"{self._smem} stream={int(stream or 0):#x})")
        if self._sync:
            self._drv.stream_synchronize(stream, what=self.name)

    def current_params(self) -> List[_launch.PackedParam]:
        """The parameters as they are now (the last call's addresses)."""
        maps = {m.label: m for m in self._maps}
        out = []
        for p, s in zip(self.packed, self._storage):
            if p.type == M.TENSORMAP:
                m = maps[p.label]
                value = _tensormap.MapArg(m.tensor, m.address.value, m.encoding)
            else:
                value = s.value
            out.append(_launch.PackedParam(p.label, p.type, value))
        return out

    def _print(self, stream) -> None:
        print(f"flashmlir: launch {self.name} grid={self._grid} block={self._block} "
              f"smem={self._smem} stream={int(stream or 0):#x} (plan)\n"
              + _launch.describe_params(self.current_params()), file=sys.stderr)


class PlanSequence:
    """Several launch plans issued in order on one stream (a backward's
    kernels), all bound before the first launch so a misaligned tensor
    raises before anything runs."""

    __slots__ = ("plans", "_lock", "_native")

    def __init__(self, plans: Sequence[LaunchPlan]):
        self.plans = tuple(plans)
        self._lock = threading.Lock()
        self._native = native_sequence(self.plans)

    def launch(self, tensors: Sequence[Any], stream: int) -> None:
        if self._native is not None:
            self._native.launch(tensors, stream)
        else:
            self.launch_python(tensors, stream)

    def launch_python(self, tensors: Sequence[Any], stream: int) -> None:
        """`launch` through ctypes only (the path without the native launcher)."""
        with self._lock:
            for p in self.plans:
                p.bind(tensors)
            encode_maps(self.plans)
            for p in self.plans:
                p._issue(stream)


def encode_maps(plans: Sequence[LaunchPlan]) -> None:
    """Encodes the tensor maps of bound plans (of one driver and context)
    that do not hold their address's map yet, with that context current."""
    if all(m.current() for p in plans for m in p._maps):
        return
    with plans[0]._drv.context(plans[0]._ctx):
        for p in plans:
            p.encode()


def native_sequence(plans: Sequence[LaunchPlan]) -> Optional["_native.NativeSequence"]:
    """The plans as one native launcher call, or None: no launcher, no
    plans, plans that print or synchronize (FLASHMLIR_DEBUG, FLASHMLIR_SYNC:
    the Python path does that), or plans of different tensors or contexts."""
    run = _native.library()
    if run is None or not plans or any(p._debug or p._sync for p in plans):
        return None
    if any(p.names != plans[0].names or p._ctx != plans[0]._ctx or
           p._drv is not plans[0]._drv for p in plans):
        return None
    return _native.NativeSequence(run, plans, _launch.POINTER_ALIGNMENT)
