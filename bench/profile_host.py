#!/usr/bin/env python3
"""Where the time of a tiny flashmlir call goes: the host (cProfile of a
loop of calls) and the device (torch.profiler's CUDA kernel times), for the
forward and the forward+backward of bench_overhead.py's shape.

    PYTHONPATH=python python3 bench/profile_host.py [--n 64 --d 64 --calls 500]

Prints, per direction: the wall time per call, the sum of the kernels' GPU
time per call (a call is host-bound when the first is much larger), the
kernels launched, and the 25 functions with the most own time.
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--impl", choices=["flashmlir", "sdpa-flash"], default="flashmlir")
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("profile_host: SKIP: no CUDA device")
        return 0
    import flashmlir
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional

    shape = (1, 1, a.n, a.d)
    q, k, v, dout = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    if a.impl == "flashmlir":
        fn = lambda q, k, v: flashmlir.attention(q, k, v, causal=a.causal)
        cm = None
    else:
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        cm = sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    if cm is not None:
        cm.__enter__()
    from flashmlir import _native
    print(f"launcher: {_native.library_path() or 'ctypes (no native launcher)'}")

    def fwd():
        with torch.no_grad():
            fn(q, k, v)

    def fwd_bwd():
        torch.autograd.grad(fn(qg, kg, vg), (qg, kg, vg), dout)

    for name, step in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / a.calls * 1e6

        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(50):
                step()
            torch.cuda.synchronize()
        kernels = {}
        for e in prof.key_averages():
            t = getattr(e, "device_time_total", None)
            if t is None:
                t = getattr(e, "cuda_time_total", 0)
            if t and e.count:
                kernels[e.key] = (e.count / 50, t / 50)
        gpu = sum(t for _, t in kernels.values())

        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.calls):
            step()
        torch.cuda.synchronize()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)

        print(f"== {a.impl} {name}: wall {wall:.1f} us/call, GPU {gpu:.1f} us/call "
              f"(N={a.n} D={a.d} causal={a.causal})")
        for key, (count, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
            print(f"  {t:8.1f} us  x{count:.0f}  {key[:110]}")
        print("\n".join(s.getvalue().splitlines()[:45]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
