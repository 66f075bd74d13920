"""The ctypes driver binding, exercised against a fake libcuda whose entry
points are real C function pointers (ctypes.CFUNCTYPE), so arguments go
through the same libffi marshalling as with libcuda.so.1 (CPU only)."""

import ctypes
import struct

import pytest

from flashmlir import _cuda, _kernels, _launch
from flashmlir import _manifest as M
from flashmlir._errors import CudaError, LaunchError, ManifestError

from helpers import FakeTensor, contiguous_strides, example, fake_ptx, write_kernel

_NAMES = {0: b"CUDA_SUCCESS", 1: b"CUDA_ERROR_INVALID_VALUE",
          218: b"CUDA_ERROR_INVALID_PTX", 701: b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"}
_BUFS = {}


def _static(s: bytes) -> int:
    if s not in _BUFS:
        _BUFS[s] = ctypes.create_string_buffer(s)
    return ctypes.addressof(_BUFS[s])


# The fake's CUtensorMap: its arguments, serialized (so that a launch's
# parameter bytes say which map it got): magic, data type, rank, address,
# dims[5], strides[4], box[5] (u32), element strides[5], interleave,
# swizzle, l2 promotion, oob fill (u8), zero padding to 128 bytes.
_MAP = struct.Struct("<8sIIQ5Q4Q5I5B4B3x")
_MAP_MAGIC = b"FAKETMAP"
# CUtensorMapDataType -> element size (the fake knows the types flashmlir uses)
_MAP_ELEMENT_SIZES = {6: 2, 7: 4, 9: 2}
_SWIZZLE_SPANS = {0: None, 1: 32, 2: 64, 3: 128}


def fake_map_bytes(rec) -> bytes:
    r = rec["rank"]
    pad = lambda xs, n: list(xs) + [0] * (n - len(xs))
    return _MAP.pack(_MAP_MAGIC, rec["data_type"], r, rec["address"], *pad(rec["dims"], 5),
                     *pad(rec["strides"], 4), *pad(rec["box"], 5),
                     *pad(rec["element_strides"], 5), rec["interleave"], rec["swizzle"],
                     rec["l2_promotion"], rec["oob_fill"])


def decode_fake_map(raw: bytes) -> dict:
    """The arguments the fake cuTensorMapEncodeTiled wrote into `raw`."""
    assert len(raw) == 128 and raw[:8] == _MAP_MAGIC, raw[:16]
    v = _MAP.unpack(raw)
    r = v[2]
    return dict(data_type=v[1], rank=r, address=v[3], dims=v[4:4 + r],
                strides=v[9:9 + r - 1], box=v[13:13 + r], element_strides=v[18:18 + r],
                interleave=v[23], swizzle=v[24], l2_promotion=v[25], oob_fill=v[26])


def map_rule_error(rec):
    """Which of cuTensorMapEncodeTiled's rules (cuda.h) `rec` breaks, or None."""
    r, es = rec["rank"], _MAP_ELEMENT_SIZES.get(rec["data_type"])
    checks = [
        (rec["map"] % 64 == 0, "map not 64-byte aligned"),
        (1 <= r <= 5, "rank"), (es is not None, "data type"),
        (rec["address"] % 16 == 0, "address not 16-byte aligned"),
        (all(1 <= d <= 2 ** 32 for d in rec["dims"]), "dims"),
        (all(s % 16 == 0 and 0 <= s < 2 ** 40 for s in rec["strides"]), "strides"),
        (all(1 <= b <= 256 for b in rec["box"]), "box"),
        (es is not None and rec["box"][0] * es % 16 == 0, "inner box not 16-byte multiple"),
        (all(1 <= e <= 8 for e in rec["element_strides"]), "element strides"),
        (rec["interleave"] == 0, "interleave"),
        (rec["swizzle"] in _SWIZZLE_SPANS, "swizzle"),
        (rec["l2_promotion"] in (0, 1, 2, 3) and rec["oob_fill"] in (0, 1), "l2/oob"),
    ]
    for ok, why in checks:
        if not ok:
            return why
    span = _SWIZZLE_SPANS[rec["swizzle"]]
    if span is not None and rec["box"][0] * es > span:
        return "inner box exceeds the swizzle span"
    return None


class FakeCuda:
    """Implements the driver entry points _cuda declares."""

    DEV_ATTRS = {1: 1024, 5: 2 ** 31 - 1, 6: 65535, 7: 65535, 16: 132, 75: 9, 76: 0,
                 97: 232448}

    def __init__(self):
        self.current = None
        self.stack = []
        self.events = []
        self.launches = []
        self.slot_sizes = []
        self.fail = {}
        self.func_attrs = {0: 1024, 1: 0, 3: 0, 4: 168, 6: 90}
        self.param_sizes = None         # a list, or {function handle: list}
        self.param_queries = []         # the parameter indices asked for
        self.functions = {}             # entry name (bytes) -> handle, 0x3000 first
        self.loaded_images = []
        self.encodes = []               # the arguments of each cuTensorMapEncodeTiled
        self._keep = []
        for name, restype, argtypes, _ in _cuda._SIGNATURES:
            impl = getattr(self, "_" + name)
            proto = ctypes.CFUNCTYPE(restype, *argtypes)

            def wrapped(*a, _impl=impl, _name=name):
                if _name in self.fail:
                    return self.fail[_name]
                try:
                    return _impl(*a) or 0
                except Exception as exc:  # never let an exception cross libffi
                    self.events.append(("exception", _name, repr(exc)))
                    return 999
            cfn = proto(wrapped)
            self._keep.append(cfn)
            setattr(self, name, cfn)

    # -- errors --
    def _cuGetErrorName(self, code, p):
        ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))[0] = _static(_NAMES.get(code, b"CUDA_ERROR_UNKNOWN"))

    def _cuGetErrorString(self, code, p):
        ctypes.cast(p, ctypes.POINTER(ctypes.c_void_p))[0] = _static(b"fake description %d" % code)

    def _cuInit(self, flags):
        self.events.append(("cuInit", flags))

    def _cuDriverGetVersion(self, p):
        p[0] = 13000

    def _cuDeviceGetCount(self, p):
        p[0] = 1

    def _cuDeviceGet(self, p, ordinal):
        p[0] = ordinal

    def _cuDeviceGetName(self, buf, n, dev):
        ctypes.memmove(buf, b"Fake H200\0", 10)

    def _cuDeviceGetAttribute(self, p, attr, dev):
        p[0] = self.DEV_ATTRS.get(attr, 0)

    def _cuDevicePrimaryCtxRetain(self, p, dev):
        p[0] = 0xC0 + dev

    def _cuCtxGetCurrent(self, p):
        p[0] = self.current

    def _cuCtxPushCurrent_v2(self, ctx):
        self.stack.append(self.current)
        self.current = ctx
        self.events.append(("push", ctx))

    def _cuCtxPopCurrent_v2(self, p):
        p[0] = self.current
        self.current = self.stack.pop()
        self.events.append(("pop",))

    def _cuCtxSynchronize(self):
        pass

    def _cuModuleLoadDataEx(self, pmod, image, nopts, opts, vals):
        text = ctypes.string_at(image)
        self.loaded_images.append(text)
        options = {opts[i]: vals[i] for i in range(nopts)}
        self.events.append(("load", nopts, sorted(options)))
        if b"BROKEN" in text:
            msg = b"ptxas application ptx input, line 3; error: BROKEN\0"
            ctypes.memmove(options[_cuda.CU_JIT_ERROR_LOG_BUFFER], msg, len(msg))
            return 218
        pmod[0] = 0x2000

    def _cuModuleUnload(self, mod):
        pass

    def _cuModuleGetFunction(self, pf, mod, name):
        self.events.append(("getfn", mod, name))
        pf[0] = self.functions.setdefault(name, 0x3000 + len(self.functions))

    def _cuFuncGetAttribute(self, p, attr, fn):
        p[0] = self.func_attrs.get(attr, 0)

    def _cuFuncSetAttribute(self, fn, attr, value):
        self.events.append(("setattr", fn, attr, value))

    def _cuFuncGetParamInfo(self, fn, i, poff, psize):
        self.param_queries.append(i)
        sizes = self.param_sizes
        if isinstance(sizes, dict):
            sizes = sizes.get(fn)
        if sizes is None or i >= len(sizes):
            return 1
        poff[0] = sum(sizes[:i])
        psize[0] = sizes[i]

    def _cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        vals = []
        sizes = self.slot_sizes.get(fn, []) if isinstance(self.slot_sizes, dict) else self.slot_sizes
        for i, size in enumerate(sizes):
            addr = params[i]
            raw = ctypes.string_at(addr, size)
            vals.append(raw)
        self.launches.append(dict(fn=fn, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                  stream=stream, raw=vals, extra=extra,
                                  ctx=self.current))

    def _cuStreamSynchronize(self, stream):
        pass

    def _cuTensorMapEncodeTiled(self, tmap, dtype, rank, address, dims, strides, box, estr,
                                interleave, swizzle, l2, oob):
        rec = dict(map=tmap or 0, data_type=dtype, rank=rank, address=address or 0,
                   dims=tuple(dims[i] for i in range(rank)),
                   strides=tuple(strides[i] for i in range(rank - 1)),
                   box=tuple(box[i] for i in range(rank)),
                   element_strides=tuple(estr[i] for i in range(rank)),
                   interleave=interleave, swizzle=swizzle, l2_promotion=l2, oob_fill=oob)
        why = map_rule_error(rec) if 1 <= rank <= 5 else "rank"
        if why:
            self.events.append(("encode rejected", why))
            return 1
        self.encodes.append(rec)
        ctypes.memmove(tmap, fake_map_bytes(rec), 128)


@pytest.fixture
def fake(monkeypatch):
    f = FakeCuda()
    drv = _cuda.Driver(f)
    drv.call("cuInit", 0)
    monkeypatch.setattr(_cuda, "_driver", drv)
    monkeypatch.setattr(_cuda, "_devices", {})
    monkeypatch.setattr(_kernels, "_loaded", {})
    monkeypatch.setattr(_kernels, "_modules", {})
    return f


def test_error_mapping(fake):
    drv = _cuda.driver()
    fake.fail["cuDeviceGet"] = 1
    with pytest.raises(CudaError) as ei:
        drv.device(3)
    msg = str(ei.value)
    assert "cuDeviceGet failed with CUDA error 1 (CUDA_ERROR_INVALID_VALUE): fake description 1" in msg
    assert "device ordinal 3" in msg
    assert ei.value.code == 1 and ei.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_device_info(fake):
    info = _cuda.device_info(0)
    assert info.cc == (9, 0) and info.name == "Fake H200" and info.sm_count == 132
    assert info.max_grid == (2 ** 31 - 1, 65535, 65535)
    assert info.max_shared_optin == 232448 and info.context == 0xC0
    with pytest.raises(Exception, match="does not exist"):
        _cuda.device_info(1)


def test_context_push_pop(fake):
    drv = _cuda.driver()
    with drv.context(0xC0):
        assert fake.current == 0xC0
    assert fake.current is None
    assert [e[0] for e in fake.events if e[0] in ("push", "pop")] == ["push", "pop"]
    fake.current = 0xC0
    fake.events.clear()
    with drv.context(0xC0):
        pass
    assert not [e for e in fake.events if e[0] in ("push", "pop")]


def test_module_load_error_log(fake):
    drv = _cuda.driver()
    with pytest.raises(CudaError) as ei:
        drv.load_module(b".version 8.0\nBROKEN", what="x.ptx")
    assert "CUDA_ERROR_INVALID_PTX" in str(ei.value)
    assert "while loading x.ptx; JIT error log:\nptxas application ptx input, line 3; error: BROKEN" in str(ei.value)
    mod, log = drv.load_module(b".version 8.0\n")
    assert mod == 0x2000
    assert fake.loaded_images[-1] == b".version 8.0\n"  # NUL-terminated, nothing more
    load = [e for e in fake.events if e[0] == "load"][-1]
    assert load[1] == 5 and load[2] == [3, 4, 5, 6, 12]


def test_launch_param_marshalling(fake):
    drv = _cuda.driver()
    storage = [ctypes.c_uint64(0x7f0000001000), ctypes.c_int64(-5), ctypes.c_float(0.125),
               ctypes.c_int32(-7), ctypes.c_double(2.5)]
    fake.slot_sizes = [8, 8, 4, 4, 8]
    drv.launch(0x3000, (8, 16, 2), (128, 1, 1), 98304, 0x77, storage, what="k")
    (l,) = fake.launches
    assert l["grid"] == (8, 16, 2) and l["block"] == (128, 1, 1) and l["smem"] == 98304
    assert l["stream"] == 0x77 and l["fn"] == 0x3000 and not l["extra"]  # NULL
    assert l["raw"][0] == (0x7f0000001000).to_bytes(8, "little")
    assert l["raw"][1] == (-5).to_bytes(8, "little", signed=True)
    assert l["raw"][2] == bytes(ctypes.c_float(0.125))
    assert l["raw"][3] == (-7).to_bytes(4, "little", signed=True)
    assert l["raw"][4] == bytes(ctypes.c_double(2.5))
    # the null stream travels as NULL
    drv.launch(0x3000, (1,), (32,), 0, 0, storage)
    assert fake.launches[-1]["stream"] is None and fake.launches[-1]["grid"] == (1, 1, 1)


def test_launch_error(fake):
    drv = _cuda.driver()
    fake.fail["cuLaunchKernel"] = 701
    with pytest.raises(CudaError, match=r"(?s)cuLaunchKernel failed .*LAUNCH_OUT_OF_RESOURCES.*grid=\(1, 1, 1\)"):
        drv.launch(0x3000, (1, 1, 1), (1024, 1, 1), 0, 0, [ctypes.c_uint64(1)], what="k")


def _kernel_dir(tmp_path, **overrides):
    m = example(**overrides)
    write_kernel(str(tmp_path), m, ptx=fake_ptx(nparams=53, extra=".maxntid 128, 1, 1\n"))
    return M.load_manifest(str(tmp_path / (m["name"] + ".json")))


def _tensors():
    def t(base, shape, dtype="torch.bfloat16", el=2):
        return FakeTensor(base, shape, contiguous_strides(shape), dtype, 0, el)
    return {"q": t(0x10000, (2, 8, 1000, 128)), "k": t(0x20000, (2, 2, 4097, 128)),
            "v": t(0x30000, (2, 2, 4097, 128)), "out": t(0x40000, (2, 8, 1000, 128)),
            "lse": t(0x50000, (2, 8, 1000), "torch.float32", 4)}


ENV = {"B": 2, "Hq": 8, "Hkv": 2, "Nq": 1000, "Nk": 4097, "D": 128, "Dv": 128, "G": 4}


def test_load_and_launch_end_to_end(fake, tmp_path):
    spec = _kernel_dir(tmp_path)
    fake.param_sizes = [8] * 53
    k = _kernels.load_kernel(spec, 0)
    assert k.function == 0x3000 and k.attrs["registers"] == 168
    assert ("getfn", 0x2000, b"fa_fwd_kernel") in fake.events
    assert ("setattr", 0x3000, _cuda.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 98304) in fake.events
    assert _kernels.load_kernel(spec, 0) is k  # cached
    assert len([e for e in fake.events if e[0] == "load"]) == 1
    fake.slot_sizes = [8] * 53
    _launch.launch(k, _tensors(), ENV, stream=0x77)
    (l,) = fake.launches
    assert l["grid"] == (8, 8, 2) and l["block"] == (128, 1, 1) and l["smem"] == 98304
    assert l["ctx"] == 0xC0 and fake.current is None  # pushed for the launch, popped after
    vals = [int.from_bytes(r, "little", signed=True) for r in l["raw"]]
    assert vals[:11] == [0x10000, 0x10000, 0, 2, 8, 1000, 128, 8 * 1000 * 128, 1000 * 128, 128, 1]
    assert vals[11:22] == [0x20000, 0x20000, 0, 2, 2, 4097, 128, 2 * 4097 * 128, 4097 * 128, 128, 1]
    assert vals[44:] == [0x50000, 0x50000, 0, 2, 8, 1000, 8000, 1000, 1]


def test_load_checks_driver_param_info(fake, tmp_path):
    spec = _kernel_dir(tmp_path)
    fake.param_sizes = [8] * 52
    with pytest.raises(ManifestError, match="driver reports 52 kernel parameters"):
        _kernels.load_kernel(spec, 0)


def test_load_asks_for_no_parameter_past_the_last(fake, tmp_path):
    # The driver has no parameter count; asking past the last parameter is an
    # API error (compute-sanitizer reports it). The count comes from the PTX.
    spec = _kernel_dir(tmp_path)
    n = len(spec.slots())
    fake.param_sizes = [M.slot_size(t) for _, t in spec.slots()]
    _kernels.load_kernel(spec, 0)
    assert fake.param_queries and max(fake.param_queries) == n - 1


def test_load_checks_threads(fake, tmp_path):
    spec = _kernel_dir(tmp_path)
    fake.func_attrs[0] = 64
    with pytest.raises(LaunchError, match="allows at most 64"):
        _kernels.load_kernel(spec, 0)


def test_load_checks_shared_memory(fake, tmp_path):
    spec = _kernel_dir(tmp_path, dynamic_shared_memory=232448)
    fake.func_attrs[1] = 1024
    with pytest.raises(LaunchError, match="more than the 232448"):
        _kernels.load_kernel(spec, 0)


def test_load_checks_ptx_before_loading(fake, tmp_path):
    m = example()
    write_kernel(str(tmp_path), m, ptx=fake_ptx(nparams=50))
    spec = M.load_manifest(str(tmp_path / (m["name"] + ".json")))
    with pytest.raises(ManifestError, match="takes 50 parameters"):
        _kernels.load_kernel(spec, 0)
    assert not [e for e in fake.events if e[0] == "load"]


def test_no_libcuda(monkeypatch):
    monkeypatch.setattr(_cuda, "_driver", None)
    monkeypatch.setenv("FLASHMLIR_LIBCUDA", "/nonexistent/libcuda.so.1")
    with pytest.raises(_cuda.CudaUnavailableError, match="cannot load the CUDA driver library"):
        _cuda.driver()
