#!/usr/bin/env python3
"""Decoding benchmark (issue 13): one query per sequence (or a few) against
a key/value cache, bf16, B=8, Hq=32, Hkv=8, D=128 by default. Times
flashmlir.attention (the split-KV kernels), SDPA's flash and cuDNN back ends
(enable_gqa) interleaved in six rounds of --reps / 2 calls in alternating
order (CUDA events around each call, the median of all), and a device copy of the same
number of bytes to give the achievable bandwidth. Bandwidth = bytes of K and
V read (q and out are negligible) / time.

    python3 bench/bench_decode.py --json out/decode.json
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402
from flashmlir import _interface  # noqa: E402


def timed(fn, reps, warmup=5):
    times = timings(fn, reps, warmup)
    return times[len(times) // 2]


def timings(fn, reps, warmup=5):
    """The sorted CUDA-event times (ms) of `reps` calls of fn."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times


def interleaved(impls, reps, nrounds=6):
    """{name: {"ms": median}} of each callable (None: not available): the
    implementations interleaved, `nrounds` rounds of reps / 2 calls each in
    alternating order, the median over all calls, so that a change of the
    card's state between rounds (successive rounds of one implementation
    differed by up to 30% on the H200 here) reaches every implementation
    alike; an implementation that raises is reported."""
    res, times = {}, {}
    order = [n for n in impls if impls[n] is not None]
    per_round = max(reps // 2, 5)
    for rnd in range(nrounds):
        for name in (order if rnd % 2 == 0 else order[::-1]):
            if "error" in res.get(name, {}):
                continue
            try:
                times.setdefault(name, []).extend(timings(impls[name], per_round, warmup=2))
            except Exception as exc:  # a back end that refuses the shape
                res[name] = {"error": str(exc).splitlines()[0][:200]}
    for name, t in times.items():
        if name not in res:
            t.sort()
            res[name] = {"ms": t[len(t) // 2]}
    return res


def sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, causal):
        # (causal only with one query, where it masks nothing)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return run


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nk", nargs="+", type=int, default=[4096, 16384, 65536, 131072])
    p.add_argument("--nq", nargs="+", type=int, default=[1])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, nargs=2, default=[32, 8])
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--json")
    args = p.parse_args()
    from torch.nn.attention import SDPBackend

    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    hq, hkv = args.heads
    impls = {
        "flashmlir": lambda q, k, v, causal: flashmlir.attention(q, k, v, causal=causal),
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    }
    rows = []
    for nq in args.nq:
        for nk in args.nk:
            torch.manual_seed(0)
            b = args.batch
            q = torch.randn(b, hq, nq, args.d, device="cuda", dtype=dt)
            k = torch.randn(b, hkv, nk, args.d, device="cuda", dtype=dt)
            v = torch.randn(b, hkv, nk, args.d, device="cuda", dtype=dt)
            # One query: causal (bottom-right, it sees the whole cache). More
            # queries: no mask, since SDPA's is_causal is top-left aligned
            # (query i sees keys <= i) and would skip almost all the cache.
            causal = nq == 1
            nbytes = 2 * k.numel() * k.element_size()
            src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8)
            dst = torch.empty_like(src)
            # A copy reads and writes: its bandwidth counts both.
            copy_ms = timed(lambda: dst.copy_(src), args.reps)
            copy_bw = nbytes / copy_ms / 1e9
            plan = _interface._forward_plan(q, k, v, causal, None, None, None, "bhsd", False)
            kernel = plan.split.spec.name if plan.split is not None else "plain"
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                 enable_gqa=True)
            calls = {name: (lambda fn=fn: fn(q, k, v, causal)) for name, fn in impls.items()}
            errs = {}
            for name, call in calls.items():
                try:
                    errs[name] = (call().float() - ref).abs().max().item()
                except Exception:  # a back end that refuses the shape: reported below
                    pass
            res = interleaved(calls, args.reps)
            for name, r in res.items():
                if "ms" in r:
                    r.update(tbps=nbytes / r["ms"] / 1e9, max_err=errs.get(name))
            row = {"nq": nq, "nk": nk, "batch": b, "heads": [hq, hkv], "d": args.d,
                   "dtype": args.dtype, "bytes": nbytes, "copy_tbps": copy_bw,
                   "kernel": kernel, **res}
            rows.append(row)
            line = f"Nq={nq} Nk={nk:6d} copy {copy_bw:5.2f} TB/s  [{kernel}]"
            for name in impls:
                r = res.get(name, {})
                line += (f"  {name} {r['ms'] * 1e3:8.1f} us {r['tbps']:5.2f} TB/s"
                         if "ms" in r else f"  {name} ERR")
            me = res.get("flashmlir", {})
            if "ms" in me:
                line += f"  ours/copy {me['tbps'] / copy_bw:.2f}"
                for name in ("sdpa_flash", "sdpa_cudnn"):
                    if "ms" in res.get(name, {}):
                        line += f"  x{name[5:]} {res[name]['ms'] / me['ms']:.2f}"
            print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
