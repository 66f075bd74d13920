"""The runtime's TMA tensor maps on the real driver (an sm_90 GPU): a probe
kernel (fixtures/tma_box.cu, compiled to PTX with nvcc at test time) takes
a `const __grid_constant__ CUtensorMap` described by a hand-written
manifest, loads one box with cp.async.bulk.tensor and writes the bytes
that landed in shared memory out. The maps come from the package's
encoder: `_launch.launch` (the unplanned path) and a `LaunchPlan` on the
native launcher and on the ctypes path, with the call's tensor at a new
address each time (so each call encodes). The box is compared with torch
slicing: swizzle none and 32B/64B/128B (undone on the host), bf16 and f32,
a contiguous and a transposed-layout ([B, N, H, D] memory) tensor, boxes
across the tensor's edges (out-of-bounds elements zero, or NaN with
oob_fill "nan"). Skips without a CUDA device of compute capability 9.0 or
without nvcc (on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin)."""

import json
import math
import os
import shutil
import subprocess
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from flashmlir import _kernels, _launch, _plan  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402
from flashmlir import _tensormap as T  # noqa: E402
from flashmlir import _cuda  # noqa: E402

from conftest import FIXTURES  # noqa: E402

SOURCE = os.path.join(FIXTURES, "tma_box.cu")
CHIP = "sm_90a"
BOX_ALIGN = 1024          # tma_box.cu's: the box lands 1024-byte aligned
TORCH_DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}

if not M.chip_runs_on(CHIP, torch.cuda.get_device_capability()):
    pytest.skip(f"the probe is built for {CHIP}; the device is "
                f"{torch.cuda.get_device_capability()}", allow_module_level=True)


def _nvcc():
    for c in (shutil.which("nvcc"),
              os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
              "/usr/local/cuda/bin/nvcc"):
        if c and os.path.isfile(c):
            return c
    pytest.skip("no nvcc to build the TMA probe")


@pytest.fixture(scope="module")
def ptx_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tma_box")
    proc = subprocess.run([_nvcc(), "-ptx", f"-arch={CHIP}", "-O3", "-o",
                           str(d / "tma_box.ptx"), SOURCE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return d


def _load(ptx_dir, name, dtype, box, swizzle, oob_fill="zero"):
    box_bytes = math.prod(box) * M.ELEMENT_SIZES[dtype]
    m = {"version": 1, "name": name, "kind": "forward", "chip": CHIP, "entry": "tma_box",
         "ptx": "tma_box.ptx", "dtype": dtype, "head_dim": 64, "causal": False, "scale": 1.0,
         "threads": 128, "dynamic_shared_memory": box_bytes + BOX_ALIGN, "grid": ["1"],
         "params": [{"name": "src_map", "type": "tensormap", "tensor": "src", "dtype": dtype,
                     "box": list(box), "swizzle": swizzle, "oob_fill": oob_fill},
                    {"name": "src", "type": "memref", "rank": 4, "dtype": dtype},
                    {"name": "out", "type": "memref", "rank": 1, "dtype": "u8"}]
         + [{"name": c, "type": "i32", "value": c} for c in ("c0", "c1", "c2", "c3")]
         + [{"name": "box_bytes", "type": "u32", "value": "box_bytes"}]}
    path = ptx_dir / f"{name}.json"
    path.write_text(json.dumps(m))
    spec = M.load_manifest(str(path))
    return _kernels.load_kernel(spec, torch.cuda.current_device()), box_bytes


def _expected(x, start, box, fill):
    """The box of x ([B, H, N, D] order) at `start`: out-of-bounds elements `fill`."""
    ref = torch.full(box, fill, dtype=x.dtype, device=x.device)
    src, dst = [], []
    for s, b, n in zip(start, box, x.shape):
        lo, hi = max(s, 0), min(s + b, n)
        if lo >= hi:
            return ref
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    ref[tuple(dst)] = x[tuple(src)]
    return ref


_SPANS = {"none": 0, "32B": 1, "64B": 3, "128B": 7}   # 16-byte chunks XORed


def _unswizzle(raw, swizzle):
    """The box in row-major order from its shared-memory image: with a
    swizzle, the 16-byte chunk c of 128-byte line r (from the 1024-byte
    aligned start) sits at chunk c ^ (r % 8) (128B; the low 2 bits of r for
    64B, the lowest for 32B)."""
    mask = _SPANS[swizzle]
    if not mask:
        return raw
    o = torch.arange(raw.numel(), device=raw.device)
    return raw[o ^ (((o >> 7) & mask) << 4)]


def _source(layout, shape, dtype, seed):
    """A [B, H, N, D] tensor: contiguous, or a view of [B, N, H, D] memory."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    B, H, N, D = shape
    mem = (B, H, N, D) if layout == "bhsd" else (B, N, H, D)
    x = torch.randn(mem, generator=g, device="cuda").to(TORCH_DTYPES[dtype])
    return x if layout == "bhsd" else x.transpose(1, 2)


def _coords(start):
    """The kernel's coordinates: innermost first."""
    b, h, n, d = start
    return {"c0": d, "c1": n, "c2": h, "c3": b}


def _check(out, dtype, x, start, box, swizzle, oob_fill, what):
    got = _unswizzle(out, swizzle).view(TORCH_DTYPES[dtype]).view(box)
    want = _expected(x, start, box, float("nan") if oob_fill == "nan" else 0.0)
    assert torch.equal(torch.isnan(got), torch.isnan(want)), what
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want)), what


CASES = [
    # dtype, layout, shape [B, H, N, D], box, swizzle, oob_fill, box start [b, h, n, d]
    ("bf16", "bhsd", (2, 3, 200, 64), (1, 2, 64, 64), "none", "zero", (1, 0, 64, 0)),
    ("bf16", "bhsd", (2, 3, 200, 64), (1, 2, 64, 64), "128B", "zero", (1, 1, 64, 0)),
    ("bf16", "bshd", (2, 3, 200, 64), (1, 2, 64, 64), "128B", "zero", (0, 1, 8, 0)),
    ("bf16", "bshd", (2, 3, 200, 64), (1, 2, 64, 64), "none", "zero", (1, 2, 180, 0)),
    ("bf16", "bhsd", (2, 3, 200, 64), (2, 2, 64, 64), "128B", "zero", (1, 2, 180, 0)),
    ("bf16", "bhsd", (1, 2, 100, 40), (1, 1, 32, 64), "128B", "zero", (0, 1, 90, 0)),
    ("bf16", "bshd", (1, 2, 100, 40), (1, 1, 32, 64), "128B", "nan", (0, 1, 90, 0)),
    ("bf16", "bhsd", (1, 2, 100, 64), (1, 1, 32, 32), "64B", "zero", (0, 0, 16, 32)),
    ("bf16", "bhsd", (1, 2, 100, 64), (1, 1, 32, 16), "32B", "zero", (0, 1, 0, 48)),
    ("f32", "bhsd", (2, 3, 100, 32), (1, 1, 64, 32), "128B", "zero", (1, 2, 64, 0)),
    ("f32", "bshd", (2, 3, 100, 32), (1, 2, 32, 32), "none", "zero", (0, 2, 90, 0)),
    ("f32", "bshd", (2, 3, 100, 48), (1, 1, 16, 32), "128B", "nan", (1, 0, -4, 32)),
]


@pytest.mark.parametrize("path", ["unplanned", "python", "native"])
@pytest.mark.parametrize("dtype,layout,shape,box,swizzle,oob_fill,start", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[4]}-{c[5]}-{'x'.join(map(str, c[6]))}"
                              for c in CASES])
def test_box(ptx_dir, dtype, layout, shape, box, swizzle, oob_fill, start, path):
    name = f"tma_{dtype}_{swizzle}_{oob_fill}_{'x'.join(map(str, box))}"
    kernel, nbytes = _load(ptx_dir, name, dtype, box, swizzle, oob_fill)
    stream = torch.cuda.current_stream().cuda_stream
    what = f"{dtype} {layout} {shape} box {box} at {start} swizzle {swizzle} oob {oob_fill}"
    x = _source(layout, shape, dtype, seed=len(name))
    out = torch.full((nbytes,), 0xAB, dtype=torch.uint8, device="cuda")
    args = {"src": x, "out": out, "box_bytes": nbytes, **_coords(start)}
    if path == "unplanned":
        _launch.launch(kernel, args, {}, stream)
        torch.cuda.synchronize()
        _check(out, dtype, x, start, box, swizzle, oob_fill, what)
        return
    plan = _plan.LaunchPlan(_launch.prepare(kernel, args, {}), ("src", "out"))
    if path == "native":
        if plan._native is None:
            pytest.skip("the native launcher is not built (or of another ABI)")
        launch = plan._native.launch
    else:
        launch = plan.launch_python
    for seed in (1, 2):          # each call's tensor at a new address: encoded anew
        y = _source(layout, shape, dtype, seed=seed)
        o = torch.full((nbytes,), 0xCD, dtype=torch.uint8, device="cuda")
        launch((y, o), stream)
        torch.cuda.synchronize()
        _check(o, dtype, y, start, box, swizzle, oob_fill, f"{what} ({path} plan)")
        assert plan._maps[0].encoded.value == y.data_ptr()


def test_encode_cost(ptx_dir, capsys):
    """The real driver's cuTensorMapEncodeTiled per call, through ctypes
    (an upper bound of what the native launcher pays per map when a
    tensor moved); printed, with a generous bound."""
    kernel, nbytes = _load(ptx_dir, "tma_cost", "bf16", (1, 1, 128, 64), "128B")
    x = _source("bhsd", (4, 16, 4096, 64), "bf16", seed=0)
    args = {"src": x, "out": torch.empty(nbytes, dtype=torch.uint8, device="cuda"),
            "box_bytes": nbytes, **_coords((0, 0, 0, 0))}
    plan = _plan.LaunchPlan(_launch.prepare(kernel, args, {}), ("src", "out"))
    (m,) = plan._maps
    drv = _cuda.driver()
    fn = T.encode_function(drv, "tma_cost")
    a, b = x.data_ptr(), x.data_ptr() + 4096
    n, best = 20000, float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(n):
            m.address.value = a if i & 1 else b
            m.encode(drv, fn, "tma_cost")
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    with capsys.disabled():
        print(f"\ncuTensorMapEncodeTiled through ctypes: {best:.2f} us per map "
              f"(best of 5 x {n})")
    assert best < 20


def _mlir_probe(test="tma-grid-constant"):
    """The PTX that lit test test/GPU/<test>.mlir builds with our pipeline
    (faptx.tensormap_param + nvgpu TMA/mbarrier ops)."""
    build = os.environ.get("FA_BUILD_DIR", os.path.join(os.path.dirname(__file__),
                                                        "..", "..", "build"))
    path = os.path.join(build, "test", "GPU", "Output", f"{test}.mlir.tmp-0.ptx")
    if not os.path.isfile(path):
        pytest.skip(f"{path} is missing: run lit's test/GPU/{test}.mlir")
    return path


@pytest.mark.parametrize("layout,start", [("bhsd", (1, 2, 64, 0)), ("bshd", (0, 1, 160, 0)),
                                          ("bhsd", (1, 0, 180, 0))])
def test_mlir_kernel(tmp_path, layout, start):
    """Our compiler's TMA path end to end: the kernel FlashMLIR's pipeline
    made from hand-written nvgpu IR reads a runtime-encoded by-value map
    (`.param .align 64 .b8 [128]`) and copies one 64 x 64 bf16 box (rows
    past N zero) to `out`."""
    shutil.copy(_mlir_probe(), tmp_path / "tma_copy.ptx")
    box = (1, 1, 64, 64)
    m = {"version": 1, "name": "tma_copy_mlir", "kind": "forward", "chip": CHIP,
         "entry": "tma_copy", "ptx": "tma_copy.ptx", "dtype": "bf16", "head_dim": 64,
         "causal": False, "scale": 1.0, "threads": 128, "dynamic_shared_memory": 0,
         "grid": ["1"],
         "params": [{"name": "x_map", "type": "tensormap", "tensor": "x", "dtype": "bf16",
                     "box": list(box), "swizzle": "none"},
                    {"name": "out", "type": "memref", "rank": 2, "dtype": "bf16"}]
         + [{"name": c, "type": "i64", "value": c} for c in ("b", "h", "n0", "d0")]
         + [{"name": "x", "type": "memref", "rank": 4, "dtype": "bf16"}]}
    path = tmp_path / "tma_copy_mlir.json"
    path.write_text(json.dumps(m))
    spec = M.load_manifest(str(path))
    kernel = _kernels.load_kernel(spec, torch.cuda.current_device())
    x = _source(layout, (2, 3, 200, 64), "bf16", seed=7)
    out = torch.full((64, 64), float("nan"), dtype=torch.bfloat16, device="cuda")
    b, h, n0, d0 = start
    _launch.launch(kernel, {"x": x, "out": out, "b": b, "h": h, "n0": n0, "d0": d0}, {},
                   torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    want = _expected(x, start, box, 0.0).view(64, 64)
    assert torch.equal(out, want)


def _colsum(tmp_path, source, entry, d, swizzle, n, layout):
    """Runs the column-sum kernel `entry` of test/GPU/<source>.mlir (a
    [B, H, N, d] bf16 tensor through a TMA pipeline into out[b, h, :]) and
    checks it exactly: small integers keep every partial sum exact in f32,
    whatever the order."""
    shutil.copy(_mlir_probe(source), tmp_path / f"{entry}.ptx")
    m = {"version": 1, "name": entry, "kind": "forward", "chip": CHIP,
         "entry": entry, "ptx": f"{entry}.ptx", "dtype": "bf16", "head_dim": d,
         "causal": False, "scale": 1.0, "threads": 384, "dynamic_shared_memory": 0,
         "grid": ["Hq", "B"],
         "params": [{"name": "x_map", "type": "tensormap", "tensor": "x", "dtype": "bf16",
                     "box": [1, 1, 64, 64], "swizzle": swizzle},
                    {"name": "out", "type": "memref", "rank": 3, "dtype": "f32"},
                    {"name": "n", "type": "i64", "value": "n"},
                    {"name": "x", "type": "memref", "rank": 4, "dtype": "bf16"}]}
    path = tmp_path / f"{entry}.json"
    path.write_text(json.dumps(m))
    kernel = _kernels.load_kernel(M.load_manifest(str(path)), torch.cuda.current_device())
    B, H = 2, 3
    g = torch.Generator(device="cuda").manual_seed(n + d)
    mem = (B, H, n, d) if layout == "bhsd" else (B, n, H, d)
    x = torch.randint(-8, 9, mem, generator=g, device="cuda").to(torch.bfloat16)
    x = x if layout == "bhsd" else x.transpose(1, 2)
    out = torch.full((B, H, d), float("nan"), device="cuda")
    _launch.launch(kernel, {"x": x, "out": out, "n": n}, {"Hq": H, "B": B},
                   torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.equal(out, x.float().sum(dim=2))


@pytest.mark.parametrize("n", [64, 200, 1000, 4096])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("source", ["warp-specialized-pipeline", "channel-pipeline"])
def test_mlir_warp_specialized(tmp_path, n, layout, source):
    """The warp-specialized TMA pipeline (a producer warpgroup, a 3-stage
    ring with full/empty mbarriers, two consumer warpgroups, setmaxnreg, a
    named barrier) of test/GPU/warp-specialized-pipeline.mlir (written by
    hand) and of test/GPU/channel-pipeline.mlir (the same kernel from
    fagpu.warp_specialize and a !fagpu.channel through fa-lower-channels and
    fa-lower-warp-specialize): the column sums are exact only if every tile
    arrives once, in order, and no stage is overwritten while in use; N = 64
    (one tile), 200 (a partial last tile, zero-filled) and 1000/4096 (the
    ring wraps many times, both parities)."""
    _colsum(tmp_path, source, "ws_colsum", 64, "none", n, layout)


@pytest.mark.parametrize("n", [64, 200, 1000])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_mlir_channel_panels(tmp_path, n, layout):
    """test/GPU/channel-pipeline-panels.mlir: D = 128 tiles as two
    64-column panels of 128-byte swizzle per channel item (two TMA boxes,
    one transaction count), read through the swizzle by the consumers:
    exact column sums only if the TMA's swizzle is the layout the wgmma
    kernels assume and both boxes land before the item completes."""
    _colsum(tmp_path, "channel-pipeline-panels", "ws_colsum_panels", 128, "128B", n,
            layout)
