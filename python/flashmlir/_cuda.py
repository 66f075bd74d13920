"""A tiny ctypes binding of the CUDA driver API (libcuda.so.1).

Only what FlashMLIR needs: load PTX modules into the primary context of a
device (the context PyTorch's runtime uses), look up functions, set their
dynamic shared memory limit and launch them on a stream. Every call's return
code is checked and turned into a `CudaError` naming the call, the code, its
name and its description.

Signatures follow cuda.h of CUDA 13.0 (unversioned symbols are exported by the
driver with these signatures; `cuCtxPushCurrent`/`cuCtxPopCurrent` are the
`_v2` symbols, as cuda.h's #defines map them). Handles (CUcontext, CUmodule,
CUfunction, CUstream) are opaque pointers; CUdevice is an int; enums are ints.

Nothing here imports torch; the library is loaded lazily on first use.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Dict, List, Optional, Sequence, Tuple

from ._errors import CudaError, CudaUnavailableError

c_int, c_uint, c_void_p, c_size_t, c_char_p = (
    ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
POINTER = ctypes.POINTER

CUresult = c_int
CUdevice = c_int
CUcontext = c_void_p
CUmodule = c_void_p
CUfunction = c_void_p
CUstream = c_void_p

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_FOUND = 500

# CUdevice_attribute
CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5
CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6
CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

# CUfunction_attribute
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_PTX_VERSION = 5
CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

# CUjit_option
CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_LOG_VERBOSE = 12

_JIT_LOG_SIZE = 1 << 16

# (name, restype, argtypes, required)
_SIGNATURES = [
    ("cuInit", CUresult, [c_uint], True),
    ("cuDriverGetVersion", CUresult, [POINTER(c_int)], True),
    ("cuGetErrorString", CUresult, [CUresult, POINTER(c_char_p)], True),
    ("cuGetErrorName", CUresult, [CUresult, POINTER(c_char_p)], True),
    ("cuDeviceGetCount", CUresult, [POINTER(c_int)], True),
    ("cuDeviceGet", CUresult, [POINTER(CUdevice), c_int], True),
    ("cuDeviceGetName", CUresult, [POINTER(ctypes.c_char), c_int, CUdevice], True),
    ("cuDeviceGetAttribute", CUresult, [POINTER(c_int), c_int, CUdevice], True),
    ("cuDevicePrimaryCtxRetain", CUresult, [POINTER(CUcontext), CUdevice], True),
    ("cuCtxGetCurrent", CUresult, [POINTER(CUcontext)], True),
    ("cuCtxPushCurrent_v2", CUresult, [CUcontext], True),
    ("cuCtxPopCurrent_v2", CUresult, [POINTER(CUcontext)], True),
    ("cuCtxSynchronize", CUresult, [], True),
    ("cuModuleLoadDataEx", CUresult,
     [POINTER(CUmodule), c_void_p, c_uint, POINTER(c_int), POINTER(c_void_p)], True),
    ("cuModuleUnload", CUresult, [CUmodule], True),
    ("cuModuleGetFunction", CUresult, [POINTER(CUfunction), CUmodule, c_char_p], True),
    ("cuFuncGetAttribute", CUresult, [POINTER(c_int), c_int, CUfunction], True),
    ("cuFuncSetAttribute", CUresult, [CUfunction, c_int, c_int], True),
    ("cuLaunchKernel", CUresult,
     [CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream,
      POINTER(c_void_p), POINTER(c_void_p)], True),
    ("cuStreamSynchronize", CUresult, [CUstream], True),
    # CUDA >= 12.4 drivers; used only to cross-check the manifest when present.
    ("cuFuncGetParamInfo", CUresult,
     [CUfunction, c_size_t, POINTER(c_size_t), POINTER(c_size_t)], False),
    # CUDA >= 12.0 drivers; needed only by kernels that take TMA tensor maps
    # (_tensormap): map (64-byte aligned), data type, rank, address,
    # globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle,
    # l2Promotion, oobFill.
    ("cuTensorMapEncodeTiled", CUresult,
     [c_void_p, c_int, ctypes.c_uint32, c_void_p, POINTER(ctypes.c_uint64),
      POINTER(ctypes.c_uint64), POINTER(ctypes.c_uint32), POINTER(ctypes.c_uint32),
      c_int, c_int, c_int, c_int], False),
]


def library_names() -> List[str]:
    env = os.environ.get("FLASHMLIR_LIBCUDA")
    return [env] if env else ["libcuda.so.1", "libcuda.so"]


class Driver:
    """The loaded driver library with declared signatures. Use `driver()`."""

    def __init__(self, lib):
        self.lib = lib
        self.fns = {}
        missing = []
        for name, restype, argtypes, required in _SIGNATURES:
            try:
                fn = getattr(lib, name)
            except AttributeError:
                if required:
                    missing.append(name)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
            self.fns[name] = fn
        if missing:
            raise CudaUnavailableError(
                f"the CUDA driver library lacks {', '.join(missing)}; "
                "it is too old or not libcuda")

    def has(self, name: str) -> bool:
        return name in self.fns

    # -- error handling ----------------------------------------------------
    def error_strings(self, code: int) -> Tuple[str, str]:
        name = c_char_p()
        text = c_char_p()
        n = t = ""
        try:
            if self.fns["cuGetErrorName"](code, ctypes.byref(name)) == CUDA_SUCCESS and name.value:
                n = name.value.decode(errors="replace")
            if self.fns["cuGetErrorString"](code, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
                t = text.value.decode(errors="replace")
        except Exception:  # pragma: no cover - best effort only
            pass
        return n, t

    def check(self, func: str, code: int, detail: str = "") -> None:
        if code != CUDA_SUCCESS:
            name, text = self.error_strings(code)
            raise CudaError(func, code, name, text, detail)

    def call(self, func: str, *args, detail: str = "") -> None:
        self.check(func, self.fns[func](*args), detail)

    # -- devices and contexts ---------------------------------------------
    def version(self) -> int:
        v = c_int()
        self.call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self) -> int:
        n = c_int()
        self.call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def device(self, ordinal: int) -> int:
        dev = CUdevice()
        self.call("cuDeviceGet", ctypes.byref(dev), int(ordinal),
                  detail=f"(device ordinal {ordinal})")
        return dev.value

    def device_attribute(self, dev: int, attrib: int) -> int:
        v = c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(v), attrib, dev)
        return v.value

    def device_name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.call("cuDeviceGetName", buf, 256, dev)
        return buf.value.decode(errors="replace")

    def primary_context(self, dev: int) -> int:
        ctx = CUcontext()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        if not ctx.value:
            raise CudaError("cuDevicePrimaryCtxRetain", -1, "", "returned a null context")
        return ctx.value

    def current_context(self) -> Optional[int]:
        ctx = CUcontext()
        self.call("cuCtxGetCurrent", ctypes.byref(ctx))
        return ctx.value

    @contextlib.contextmanager
    def context(self, ctx: int):
        """Makes `ctx` current on this thread for the block (pushes it only
        when another, or none, is current, and pops it afterwards)."""
        if self.current_context() == ctx:
            yield
            return
        self.call("cuCtxPushCurrent_v2", CUcontext(ctx))
        try:
            yield
        finally:
            popped = CUcontext()
            self.call("cuCtxPopCurrent_v2", ctypes.byref(popped))

    # -- modules and functions --------------------------------------------
    def load_module(self, image: bytes, what: str = "PTX") -> Tuple[int, str]:
        """Loads PTX (or cubin) bytes into the current context. Returns the
        module and the JIT's info log; on failure the error log is in the
        CudaError."""
        if not image.endswith(b"\0"):
            image = image + b"\0"
        data = ctypes.create_string_buffer(image, len(image))
        err_log = ctypes.create_string_buffer(_JIT_LOG_SIZE)
        info_log = ctypes.create_string_buffer(_JIT_LOG_SIZE)
        opts = (c_int * 5)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_LOG_VERBOSE)
        # Integer option values travel in the void* slots themselves.
        vals = (c_void_p * 5)(ctypes.addressof(err_log), _JIT_LOG_SIZE,
                              ctypes.addressof(info_log), _JIT_LOG_SIZE, 1)
        module = CUmodule()
        rc = self.fns["cuModuleLoadDataEx"](ctypes.byref(module),
                                            ctypes.cast(data, c_void_p), 5, opts, vals)
        if rc != CUDA_SUCCESS:
            log = err_log.value.decode(errors="replace").strip()
            self.check("cuModuleLoadDataEx", rc,
                       f"while loading {what}" + (f"; JIT error log:\n{log}" if log else ""))
        return module.value, info_log.value.decode(errors="replace").strip()

    def get_function(self, module: int, name: str) -> int:
        fn = CUfunction()
        self.call("cuModuleGetFunction", ctypes.byref(fn), CUmodule(module),
                  name.encode(), detail=f"(entry {name!r})")
        return fn.value

    def function_attribute(self, fn: int, attrib: int) -> int:
        v = c_int()
        self.call("cuFuncGetAttribute", ctypes.byref(v), attrib, CUfunction(fn))
        return v.value

    def set_function_attribute(self, fn: int, attrib: int, value: int) -> None:
        self.call("cuFuncSetAttribute", CUfunction(fn), attrib, int(value))

    def param_info(self, fn: int, count: int) -> Optional[List[Tuple[int, int]]]:
        """(offset, size) of the first `count` kernel parameters (fewer when
        the kernel has fewer), or None when the driver cannot tell (no
        cuFuncGetParamInfo). Never asks past `count`: the driver has no
        parameter count, and probing past the last parameter is an API error
        (compute-sanitizer reports each one); the count itself is checked
        against the PTX before loading (_manifest.check_against_ptx)."""
        f = self.fns.get("cuFuncGetParamInfo")
        if f is None:
            return None
        out = []
        off, size = c_size_t(), c_size_t()
        for i in range(count):
            rc = f(CUfunction(fn), i, ctypes.byref(off), ctypes.byref(size))
            if rc == CUDA_ERROR_INVALID_VALUE:
                return out
            if rc != CUDA_SUCCESS:
                return None  # unsupported for this function/driver: no check
            out.append((off.value, size.value))
        return out

    # -- launches -----------------------------------------------------------
    def launch(self, fn: int, grid: Sequence[int], block: Sequence[int],
               shared_bytes: int, stream: int, params: Sequence[ctypes._SimpleCData],
               what: str = "") -> None:
        """cuLaunchKernel with `params` (ctypes scalars, in PTX order) passed
        as the void** array of pointers to each argument's storage."""
        gx, gy, gz = (list(grid) + [1, 1, 1])[:3]
        bx, by, bz = (list(block) + [1, 1, 1])[:3]
        n = len(params)
        arr = (c_void_p * max(n, 1))(*[ctypes.addressof(p) for p in params])
        rc = self.fns["cuLaunchKernel"](
            CUfunction(fn), gx, gy, gz, bx, by, bz, int(shared_bytes),
            CUstream(stream or None), arr if n else None, None)
        if rc != CUDA_SUCCESS:
            self.check("cuLaunchKernel", rc,
                       f"({what} grid={tuple(grid)} block={tuple(block)} "
                       f"dynamic_shared_memory={shared_bytes} stream={int(stream or 0):#x})")

    def stream_synchronize(self, stream: int, what: str = "") -> None:
        self.call("cuStreamSynchronize", CUstream(stream or None),
                  detail=f"(after launching {what})" if what else "")


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    """Loads libcuda and calls cuInit(0) once per process."""
    global _driver
    if _driver is not None:
        return _driver
    with _driver_lock:
        if _driver is not None:
            return _driver
        errors = []
        lib = None
        for name in library_names():
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as exc:
                errors.append(f"{name}: {exc}")
        if lib is None:
            raise CudaUnavailableError(
                "cannot load the CUDA driver library (" + "; ".join(errors) +
                "); flashmlir needs an NVIDIA GPU and driver (set FLASHMLIR_LIBCUDA "
                "to the library's path if it is elsewhere)")
        drv = Driver(lib)
        drv.call("cuInit", 0)
        _driver = drv
        return drv


class DeviceInfo:
    """What flashmlir needs to know about one device, read once."""

    def __init__(self, drv: Driver, ordinal: int):
        self.ordinal = ordinal
        self.handle = drv.device(ordinal)
        self.name = drv.device_name(self.handle)
        a = lambda attr: drv.device_attribute(self.handle, attr)
        self.cc = (a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                   a(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.sm_count = a(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.max_threads_per_block = a(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.max_grid = (a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                         a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                         a(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))
        self.max_shared_optin = a(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.context = drv.primary_context(self.handle)


_devices: Dict[int, DeviceInfo] = {}
_devices_lock = threading.Lock()


def device_info(ordinal: int) -> DeviceInfo:
    info = _devices.get(ordinal)
    if info is not None:
        return info
    drv = driver()
    with _devices_lock:
        info = _devices.get(ordinal)
        if info is None:
            count = drv.device_count()
            if not 0 <= ordinal < count:
                raise CudaUnavailableError(
                    f"CUDA device {ordinal} does not exist ({count} visible)")
            info = DeviceInfo(drv, ordinal)
            _devices[ordinal] = info
    return info
