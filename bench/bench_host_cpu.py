#!/usr/bin/env python3
"""The Python-side cost of a tiny flashmlir call, on a machine without a GPU:
the CPU proxy of bench_overhead.py.

Calls go through the real launch path (plan cache, autograd, parameter
binding, cuLaunchKernel through ctypes) on the fake GPU of the tests
(python/tests/fake_gpu.py, CPU tensors stand for device memory). The fake's
driver entry points are Python callbacks that decode and run every launch;
after the warm-up they are replaced by no-op C functions (compiled here with
cc), so what is timed is our host code, as on a real driver whose launch
costs a few microseconds. torch.empty, autograd and the autograd engine are
the CPU ones (on CUDA the backward runs on the device's engine thread).

    python3 bench/bench_host_cpu.py [--n 64 --d 64 --calls 20000] [--profile]
        [--tensormaps [--alternate]]

Prints per-call microseconds for the forward (no grad) and the
forward+backward (torch.autograd.grad), the median and the minimum of
--repeats loops of this thread's CPU time (--clock wall: wall time; the
minimum is the steadier figure on a shared machine), and
for reference PyTorch's SDPA on the same CPU tensors (its math back end:
not comparable in absolute terms, it computes).

--tensormaps: the forward kernels also take TMA tensor maps of q, k and v
(fake_gpu's), encoded by a C function that writes its 128 bytes (the real
driver's encoding costs more: time it on the device); --alternate: the
calls alternate between two sets of tensors, so that every call encodes
its maps (with the same tensors, a plan's maps are encoded once).
"""

import argparse
import cProfile
import ctypes
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, os.path.join(_ROOT, "python"))
sys.path.insert(0, os.path.join(_ROOT, "python", "tests"))

_NOOP_C = r"""
static void *current_ctx;
void fm_set_ctx(void *c) { current_ctx = c; }
int fm_ctx_get(void **p) { *p = current_ctx; return 0; }
int fm_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
              unsigned bz, unsigned smem, void *stream, void **params, void **extra)
{ return 0; }
int fm_encode(unsigned long long *map, int type, unsigned rank, void *address,
              const unsigned long long *dim, const unsigned long long *strides,
              const unsigned *box, const unsigned *estr, int il, int sw, int l2, int oob) {
  map[0] = (unsigned long long)address;
  for (unsigned i = 0; i < rank; ++i) map[1 + i] = dim[i] ^ box[i] ^ estr[i];
  for (unsigned i = 0; i + 1 < rank; ++i) map[6 + i] = strides[i];
  for (unsigned i = 10; i < 16; ++i) map[i] = type ^ il ^ sw ^ l2 ^ oob;
  return 0;
}
"""


def _noop_library(folder):
    src = os.path.join(folder, "noop.c")
    lib = os.path.join(folder, "libnoop.so")
    with open(src, "w") as f:
        f.write(_NOOP_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    return ctypes.CDLL(lib)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="cProfile one fwd+bwd loop")
    p.add_argument("--tensormaps", action="store_true",
                   help="forward kernels that take tensor maps of q, k, v")
    p.add_argument("--alternate", action="store_true",
                   help="alternate two sets of tensors (every call encodes its maps)")
    p.add_argument("--only", choices=["fwd", "fwd+bwd"],
                   help="run --calls calls of this step after the warm-up and print nothing: "
                        "for `perf stat -e instructions:u` at two --calls, whose difference "
                        "per call does not depend on what else runs on the machine")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="this thread's CPU time (default: steadier when other processes "
                        "share the cores) or wall time")
    a = p.parse_args(argv)
    import torch
    from _pytest.monkeypatch import MonkeyPatch
    import fake_gpu
    import flashmlir
    from flashmlir import _cuda

    torch.set_num_threads(1)
    mp = MonkeyPatch()
    tmp = tempfile.mkdtemp(prefix="fm-host-")
    fake = fake_gpu.install(mp, __import__("pathlib").Path(tmp), tensormaps=a.tensormaps)
    try:
        shape = (1, 1, a.n, a.d)
        q, k, v, dout = (torch.randn(shape, dtype=torch.bfloat16) for _ in range(4))
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        # a second set of the same shapes (--alternate)
        sets = [(q, k, v), tuple(t.clone() for t in (q, k, v))]
        gsets = [(qg, kg, vg), tuple(t.detach().clone().requires_grad_() for t in (q, k, v))]
        turn = [0]

        def pick(choices):
            if a.alternate:
                turn[0] ^= 1
            return choices[turn[0]]

        def fwd():
            with torch.no_grad():
                flashmlir.attention(*pick(sets))

        def fwd_bwd():
            ts = pick(gsets)
            torch.autograd.grad(flashmlir.attention(*ts), ts, dout)

        def sdpa_fwd():
            with torch.no_grad():
                torch.nn.functional.scaled_dot_product_attention(q, k, v)

        def sdpa_fwd_bwd():
            torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(qg, kg, vg),
                                (qg, kg, vg), dout)

        fwd()
        fwd_bwd()          # plans made, kernels "loaded", on the computing fake
        assert fake.ran, "the fake GPU ran nothing"
        noop = _noop_library(tmp)
        noop.fm_set_ctx(ctypes.c_void_p(_cuda.device_info(0).context))
        drv = _cuda.driver()
        for name, sym in (("cuLaunchKernel", "fm_launch"), ("cuCtxGetCurrent", "fm_ctx_get"),
                          ("cuTensorMapEncodeTiled", "fm_encode")):
            fn = getattr(noop, sym)
            fn.restype, fn.argtypes = drv.fns[name].restype, drv.fns[name].argtypes
            drv.fns[name] = fn
        flashmlir.clear_caches()   # plans read the driver's functions when made
        fwd()
        fwd_bwd()
        n_before, encodes_before = len(fake.ran), len(fake.encodes)

        clock = time.thread_time if a.clock == "cpu" else time.perf_counter

        def timed(step, calls):
            t0 = clock()
            for _ in range(calls):
                step()
            return (clock() - t0) / calls * 1e6

        if a.only:   # one untimed loop, for a counter outside (perf stat)
            for _ in range(a.calls):
                (fwd if a.only == "fwd" else fwd_bwd)()
            return 0
        rows = []
        for label, step, calls in (("flashmlir fwd", fwd, a.calls),
                                   ("flashmlir fwd+bwd", fwd_bwd, a.calls // 4),
                                   ("sdpa(cpu math) fwd", sdpa_fwd, a.calls // 4),
                                   ("sdpa(cpu math) fwd+bwd", sdpa_fwd_bwd, a.calls // 16)):
            timed(step, max(1, calls // 10))
            ts = [timed(step, calls) for _ in range(a.repeats)]
            rows.append((label, statistics.median(ts), min(ts)))
        assert len(fake.ran) == n_before, "a launch reached the computing fake"
        assert len(fake.encodes) == encodes_before, "an encode reached the Python fake"
        maps = (" with tensor maps of q, k, v" + (", encoded on every call" if a.alternate else "")
                if a.tensormaps else "")
        print(f"CPU proxy, per call ({a.clock} us), B=H=1 N={a.n} D={a.d} bf16, "
              f"torch {torch.__version__}{maps}")
        print(f"  {'':<26}{'median':>8}{'min':>8}")
        for label, med, low in rows:
            print(f"  {label:<26}{med:8.1f}{low:8.1f}")
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(a.calls // 4):
                fwd_bwd()
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    finally:
        fake_gpu.uninstall(fake)
        mp.undo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
