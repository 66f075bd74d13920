#!/usr/bin/env python3
"""Per-call host overhead of flashmlir against PyTorch SDPA's FlashAttention
and cuDNN back ends, in one run.

A tiny problem (default B = H = 1, N = 64, D = 64, bf16, causal off) whose
kernels take a few microseconds, so a loop of calls is bound by the host:
wall time per call = (time of `--calls` back-to-back calls, then one
synchronize) / calls, the median of `--repeats` such loops, each
implementation's loops interleaved with the others'. Measured:

- fwd:     out = f(q, k, v) without grad;
- fwd+bwd: out = f(q, k, v) with q, k, v requiring grad, then
           torch.autograd.grad(out, (q, k, v), dout).

Implementations: flashmlir.attention, flashmlir.scaled_dot_product_attention,
flashmlir.flash_attn_func (bshd views), flashmlir.attention_varlen (the
same tokens packed as B sequences of N), SDPA with the FLASH_ATTENTION
back end, SDPA with CUDNN_ATTENTION, torch's varlen_attn when present. Prints a table with the ratios to
SDPA flash and cuDNN and the bar (flashmlir <= 1.5x SDPA's, forward and
forward+backward); --json writes every number. Needs a GPU and kernels for
the shape (the default set has them); HF_HUB_OFFLINE, no network.

    PYTHONPATH=python python3 bench/bench_overhead.py [--n 64 --d 64 --causal]
"""

import argparse
import json
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))

BAR = 1.5


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--b", type=int, default=1)
    p.add_argument("--h", type=int, default=1)
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    p.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    p.add_argument("--repeats", type=int, default=7, help="timed loops per implementation")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--check", action="store_true", help="exit 1 when the bar is missed")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_overhead: SKIP: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("bench_overhead: SKIP: no CUDA device")
        return 0
    import flashmlir
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    shape = (a.b, a.h, a.n, a.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dt) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=dt)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))          # bshd views
    qsg, ksg, vsg = (t.transpose(1, 2) for t in (qg, kg, vg))
    c = a.causal
    cu = torch.arange(0, (a.b + 1) * a.n, a.n, device="cuda", dtype=torch.int32)
    packed = lambda t: t.transpose(1, 2).reshape(a.b * a.n, a.h, a.d)
    qp, kp, vp = (packed(t) for t in (q, k, v))
    qpg, kpg, vpg = (t.clone().requires_grad_() for t in (qp, kp, vp))
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        varlen_attn = None

    def sdpa(backend):
        def fwd(q, k, v):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=c)
        return fwd

    impls = {
        "flashmlir.attention": (lambda q, k, v: flashmlir.attention(q, k, v, causal=c), "bhsd"),
        "flashmlir.sdpa": (lambda q, k, v: flashmlir.scaled_dot_product_attention(
            q, k, v, is_causal=c), "bhsd"),
        "flashmlir.flash_attn_func": (lambda q, k, v: flashmlir.flash_attn_func(
            q, k, v, causal=c), "bshd"),
        # The same tokens packed ([B * N, H, D], B sequences of N).
        "flashmlir.attention_varlen": (lambda q, k, v: flashmlir.attention_varlen(
            q, k, v, cu, cu, a.n, a.n, causal=c), "packed"),
        "sdpa-flash": (sdpa(SDPBackend.FLASH_ATTENTION), "bhsd"),
        "sdpa-cudnn": (sdpa(SDPBackend.CUDNN_ATTENTION), "bhsd"),
    }
    if varlen_attn is not None:
        impls["torch varlen_attn"] = (lambda q, k, v: varlen_attn(
            q, k, v, cu, cu, a.n, a.n, window_size=(-1, 0) if c else (-1, -1)), "packed")
    # The sdpa_kernel context costs host time too: enter it once around the
    # loop instead, so SDPA's numbers are its call alone.
    ctx = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION}
    plain = {"sdpa-flash": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=c),
             "sdpa-cudnn": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=c)}

    def inputs(layout, grad):
        if layout == "packed":
            return (qpg, kpg, vpg) if grad else (qp, kp, vp)
        if layout == "bhsd":
            return (qg, kg, vg) if grad else (q, k, v)
        return (qsg, ksg, vsg) if grad else (qs, ks, vs)

    def loop(name, direction):
        fn = plain.get(name, impls[name][0])
        ins = inputs(impls[name][1], direction == "fwd+bwd")
        do = {"bhsd": dout, "bshd": dout.transpose(1, 2),
              "packed": packed(dout)}[impls[name][1]]
        n = a.calls if direction == "fwd" else max(1, a.calls // 4)
        cm = sdpa_kernel([ctx[name]]) if name in ctx else _null()
        with cm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if direction == "fwd":
                with torch.no_grad():
                    for _ in range(n):
                        fn(*ins)
            else:
                for _ in range(n):
                    torch.autograd.grad(fn(*ins), ins, do)
            torch.cuda.synchronize()
            return (time.perf_counter() - t0) / n * 1e6

    results = {}
    skipped = {}
    for name in impls:   # warm up: plans, kernels loaded, SDPA's dispatch; skip what fails
        try:
            for direction in ("fwd", "fwd+bwd"):
                for _ in range(3):
                    loop(name, direction)
        except Exception as exc:  # e.g. no kernel, or a back end unavailable here
            skipped[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    names = [n for n in impls if n not in skipped]
    for direction in ("fwd", "fwd+bwd"):
        samples = {n: [] for n in names}
        for _ in range(a.repeats):
            for n in names:
                samples[n].append(loop(n, direction))
        for n in names:
            results.setdefault(n, {})[direction] = statistics.median(samples[n])

    print(f"per-call wall time (us), B={a.b} H={a.h} N={a.n} D={a.d} {a.dtype} "
          f"causal={c}; median of {a.repeats} loops of {a.calls} (fwd) / "
          f"{max(1, a.calls // 4)} (fwd+bwd) calls")
    from flashmlir import _native
    print(f"  {torch.cuda.get_device_name()} | torch {torch.__version__} | "
          f"flashmlir {flashmlir.__version__} | launcher: "
          f"{_native.library_path() or 'ctypes (no native launcher)'}")
    for n, why in skipped.items():
        print(f"  SKIP {n}: {why}")
    hdr = f"  {'implementation':<28}{'fwd':>10}{'fwd+bwd':>10}"
    refs = [r for r in ("sdpa-flash", "sdpa-cudnn") if r in results]
    for r in refs:
        hdr += f"{'fwd/' + r[5:]:>13}{'f+b/' + r[5:]:>13}"
    print(hdr)
    ok = True
    for n in names:
        row = f"  {n:<28}{results[n]['fwd']:>10.1f}{results[n]['fwd+bwd']:>10.1f}"
        for r in refs:
            for direction in ("fwd", "fwd+bwd"):
                ratio = results[n][direction] / results[r][direction]
                results[n][f"ratio_{direction}_vs_{r}"] = ratio
                row += f"{ratio:>12.2f}x"
        print(row)
    if "sdpa-flash" in results:
        for n in names:
            if not n.startswith("flashmlir"):
                continue
            for direction in ("fwd", "fwd+bwd"):
                ratio = results[n][f"ratio_{direction}_vs_sdpa-flash"]
                good = ratio <= BAR
                ok &= good
                print(f"  bar {n} {direction}: {ratio:.2f}x SDPA flash "
                      f"({'PASS' if good else 'FAIL'}, bar <= {BAR}x)")
    else:
        ok = False
        print("  bar: not measured (SDPA's flash back end did not run)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "device": torch.cuda.get_device_name(),
                   "launcher": _native.library_path(),
                       "torch": torch.__version__, "results": results, "skipped": skipped,
                       "bar": BAR, "bar_met": ok}, f, indent=1)
    return 1 if (a.check and not ok) else 0


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
