"""The native launcher (lib/Launcher/launcher.c, built by the project's
CMake into <build>/lib): one ctypes call per plan sequence writes a call's
tensor addresses into the plans' prepacked parameter slots, encodes their
tensor maps (cuTensorMapEncodeTiled, with the arguments `_tensormap`
computed for the plan) and issues every launch, where the Python path makes
a ctypes call per slot value, per map and two per launch. It is optional:
without it (a wheel, no build) `library()` is None and the plans launch
through ctypes as before.

Found as (first match): $FLASHMLIR_LAUNCHER (a path; "0", "off" or "no"
disables it), the package folder, $FA_BUILD_DIR/lib, <repo>/build/lib.

The driver entry points the C code calls are the ones of the loaded
`_cuda.driver()` (taken as function pointers), so it runs on the tests' fake
driver as on libcuda. Torch-free.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Optional, Sequence

from . import _tensormap

_ABI = 2
LIBRARY_NAME = "libflashmlir_launcher.so"

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(os.path.dirname(_PKG_DIR))

# What failed (launcher.c's enum) -> the driver function to name.
_MISALIGNED, _CTX_GET, _CTX_PUSH, _LAUNCH, _CTX_POP, _ENCODE = 1, 2, 3, 4, 5, 6
_FAILED_CALL = {_CTX_GET: "cuCtxGetCurrent", _CTX_PUSH: "cuCtxPushCurrent_v2",
                _LAUNCH: "cuLaunchKernel", _CTX_POP: "cuCtxPopCurrent_v2",
                _ENCODE: "cuTensorMapEncodeTiled"}


class _Bind(ctypes.Structure):
    _fields_ = [("tensor", ctypes.c_int64), ("element_size", ctypes.c_int64),
                ("byte_offset", ctypes.c_int64), ("aligned", ctypes.c_void_p),
                ("allocated", ctypes.c_void_p)]


class _Kernel(ctypes.Structure):
    _fields_ = [("function", ctypes.c_void_p), ("grid", ctypes.c_uint32 * 3),
                ("block", ctypes.c_uint32 * 3), ("shared_bytes", ctypes.c_uint32),
                ("pad", ctypes.c_uint32), ("params", ctypes.c_void_p)]


class _TensorMap(ctypes.Structure):
    _fields_ = [("address", ctypes.c_void_p), ("map", ctypes.c_void_p),
                ("encoded", ctypes.c_void_p), ("global_dim", ctypes.c_void_p),
                ("global_strides", ctypes.c_void_p), ("box", ctypes.c_void_p),
                ("element_strides", ctypes.c_void_p), ("data_type", ctypes.c_uint32),
                ("rank", ctypes.c_uint32), ("interleave", ctypes.c_uint32),
                ("swizzle", ctypes.c_uint32), ("l2_promotion", ctypes.c_uint32),
                ("oob_fill", ctypes.c_uint32)]


class _Sequence(ctypes.Structure):
    _fields_ = [("nkernels", ctypes.c_int64), ("nbinds", ctypes.c_int64),
                ("kernels", ctypes.c_void_p), ("binds", ctypes.c_void_p),
                ("context", ctypes.c_void_p), ("launch", ctypes.c_void_p),
                ("ctx_get", ctypes.c_void_p), ("ctx_push", ctypes.c_void_p),
                ("ctx_pop", ctypes.c_void_p), ("nmaps", ctypes.c_int64),
                ("maps", ctypes.c_void_p), ("encode", ctypes.c_void_p)]


def _tensor_map(m) -> _TensorMap:
    """The C view of a `_tensormap.BoundMap` (whose arrays it points into)."""
    e = m.encoding
    a = ctypes.addressof
    return _TensorMap(a(m.address), a(m.storage), a(m.encoded), a(m.global_dim),
                      a(m.global_strides), a(m.box), a(m.element_strides), e.data_type,
                      e.rank, e.interleave, e.swizzle, e.l2_promotion, e.oob_fill)


def candidates() -> list:
    env = os.environ.get("FLASHMLIR_LAUNCHER", "").strip()
    if env:
        return [] if env.lower() in ("0", "off", "no", "false") else [env]
    out = [os.path.join(_PKG_DIR, LIBRARY_NAME)]
    if os.environ.get("FA_BUILD_DIR"):
        out.append(os.path.join(os.environ["FA_BUILD_DIR"], "lib", LIBRARY_NAME))
    out.append(os.path.join(_REPO_DIR, "build", "lib", LIBRARY_NAME))
    return out


_lib: Any = None
_lib_path: Optional[str] = None
_loaded = False
_lock = threading.Lock()


def library():
    """The loaded launcher's run function, or None (not built, disabled, or
    of another ABI). Looked up once per process."""
    global _lib, _lib_path, _loaded
    if _loaded:
        return _lib
    with _lock:
        if not _loaded:
            for path in candidates():
                if not os.path.isfile(path):
                    continue
                try:
                    lib = ctypes.CDLL(path)
                    if lib.fm_launcher_abi() != _ABI:
                        continue
                except (OSError, AttributeError):
                    continue
                fn = lib.fm_run
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
                _lib, _lib_path = fn, path
                break
            _loaded = True
    return _lib


def library_path() -> Optional[str]:
    """Where the launcher in use was found (None: the Python launch path)."""
    library()
    return _lib_path


def _fn_address(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


class NativeSequence:
    """Plans (`_plan.LaunchPlan`s of one driver and context, all with the
    same tensor names: see `_plan.native_sequence`) issued in order by one
    call of the native launcher."""

    __slots__ = ("plans", "names", "_run", "_ptrs", "_offs", "_fail", "_binds", "_kernels",
                 "_seq", "_seq_addr", "_bind_info", "_lock", "_drv", "_alignment", "_maps",
                 "_map_info")

    def __init__(self, run, plans: Sequence[Any], alignment: int):
        self.plans = tuple(plans)
        self.names = self.plans[0].names
        drv = self.plans[0]._drv
        self._drv = drv
        self._run = run
        self._alignment = alignment
        n = len(self.names)
        self._ptrs = (ctypes.c_uint64 * max(n, 1))()
        self._offs = (ctypes.c_int64 * max(n, 1))()
        self._fail = (ctypes.c_int64 * 2)()
        binds, info = [], []
        for k, p in enumerate(self.plans):
            for i, alloc, aligned, esize, off in p._binds:
                binds.append(_Bind(i, esize, off, ctypes.addressof(aligned),
                                   ctypes.addressof(alloc)))
                info.append((k, i, off))
        self._binds = (_Bind * max(len(binds), 1))(*binds)
        self._bind_info = tuple(info)
        kernels = []
        for p in self.plans:
            kernels.append(_Kernel(p.kernel.function, (ctypes.c_uint32 * 3)(*p._grid),
                                   (ctypes.c_uint32 * 3)(*p._block), p._smem, 0,
                                   ctypes.addressof(p._argv)))
        self._kernels = (_Kernel * max(len(kernels), 1))(*kernels)
        self._map_info = tuple((k, m) for k, p in enumerate(self.plans) for m in p._maps)
        self._maps = (_TensorMap * max(len(self._map_info), 1))(
            *[_tensor_map(m) for _, m in self._map_info])
        encode = next((p._encode_fn for p in self.plans if p._encode_fn is not None), None)
        fns = drv.fns
        self._seq = _Sequence(len(kernels), len(binds), ctypes.addressof(self._kernels),
                              ctypes.addressof(self._binds), self.plans[0]._ctx,
                              _fn_address(fns["cuLaunchKernel"]),
                              _fn_address(fns["cuCtxGetCurrent"]),
                              _fn_address(fns["cuCtxPushCurrent_v2"]),
                              _fn_address(fns["cuCtxPopCurrent_v2"]),
                              len(self._map_info), ctypes.addressof(self._maps),
                              _fn_address(encode) if encode is not None else None)
        self._seq_addr = ctypes.addressof(self._seq)
        self._lock = threading.Lock()

    def launch(self, tensors: Sequence[Any], stream: int) -> None:
        """Binds `tensors` (in `names` order) and issues every launch on
        `stream`; raises as the Python path does."""
        with self._lock:
            self._ptrs[:] = [t.data_ptr() for t in tensors]
            self._offs[:] = [t.storage_offset() for t in tensors]
            rc = self._run(self._seq_addr, self._ptrs, self._offs, self._alignment,
                           stream, self._fail)
            if rc:
                what, index = self._fail[0], self._fail[1]
                ptrs = list(self._ptrs)
                address = self._map_info[index][1].address.value if what == _ENCODE else 0
        if rc:
            self._raise(rc, what, index, ptrs, address, stream)

    def _raise(self, rc, what, index, ptrs, address, stream):
        if what == _MISALIGNED:
            k, i, off = self._bind_info[index]
            ptr = ptrs[i] + off
            raise ValueError(f"{self.names[i]}'s data pointer {ptr:#x} is not "
                             f"{self._alignment}-byte aligned (storage offset?); "
                             f"call .clone() first ({self.plans[k].name})")
        name = _FAILED_CALL.get(what, "the native launcher")
        detail = ""
        if what == _ENCODE:
            k, m = self._map_info[index]
            detail = _tensormap.failure_detail(self.plans[k].name, m.label, m.tensor,
                                               address, m.encoding)
        elif what == _LAUNCH:
            p = self.plans[index]
            detail = (f"({p.name} grid={p._grid} block={p._block} dynamic_shared_memory="
                      f"{p._smem} stream={int(stream or 0):#x})")
        self._drv.check(name, rc, detail)
        raise RuntimeError(f"native launcher: {name} failed ({rc})")  # pragma: no cover
