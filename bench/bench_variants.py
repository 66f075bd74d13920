#!/usr/bin/env python3
"""Issue 12's second bar: the forward with a softcap, a sliding window or
GQA against the plain kernel of the same shape, in one process.

For each head dim, N and causal-or-not, `flashmlir.attention` is timed
plain and with each variant, in two rounds with the order reversed (each
keeps its best round; triton's do_bench median within a round):

- softcap: `softcap=30` against the plain call (time ratio);
- window: `window=(W - 1, 0)` with causal (W keys per query) against plain
  causal, as TFLOP/s at the mask's density (work counted as in
  bench_modifiers.py: 4 * B * H * visible pairs * D), since a window does
  less work than the mask it is compared with;
- gqa G: Hkv = Hq / G against MHA (Hkv = Hq), time ratio.

Sizes as in bench_attention.py (B * N = --tokens, Hq * D = --hidden, bf16,
[B, H, N, D]). Ratios > 1 mean the variant is slower (time) or faster
(TFLOP/s column). The bar: every variant within 10% of the plain kernel.

    PYTHONPATH=python python3 bench/bench_variants.py --headdims 64 128 \\
        --seqlens 4096 16384 --json out/variants.json
"""

import argparse
import datetime
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))


def visible_pairs(n, window, causal):
    """Query-key pairs a bottom-right-aligned mask shows (Nq = Nk = n)."""
    if not causal:
        return n * n
    if window is None:
        return n * (n + 1) // 2
    w = window[0] + 1
    # Row i sees min(i + 1, w) keys.
    full = max(n - w, 0) * w
    head = min(n, w)
    return full + head * (head + 1) // 2


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--softcap", type=float, default=30.0)
    p.add_argument("--window", type=int, default=1024, help="keys per query (W)")
    p.add_argument("--groups", type=int, nargs="+", default=[4, 8])
    p.add_argument("--rep", type=float, default=50.0)
    p.add_argument("--json")
    args = p.parse_args(argv)

    import torch
    from triton.testing import do_bench

    import flashmlir

    def timed(fn):
        return float(do_bench(fn, warmup=10, rep=args.rep, return_mode="median"))

    records = []
    for d in args.headdims:
        hq = args.hidden // d
        for n in args.seqlens:
            b = max(1, args.tokens // n)
            gen = torch.Generator(device="cuda").manual_seed(0)

            def rand(h):
                return torch.randn((b, h, n, d), device="cuda", dtype=torch.bfloat16,
                                   generator=gen)

            q, k, v = rand(hq), rand(hq), rand(hq)
            kv = {g: (k[:, ::g].contiguous(), v[:, ::g].contiguous())
                  for g in args.groups if hq % g == 0}
            for causal in (False, True):
                cases = {"plain": lambda: flashmlir.attention(q, k, v, causal=causal),
                         "softcap": lambda: flashmlir.attention(q, k, v, causal=causal,
                                                                softcap=args.softcap)}
                if causal:
                    cases["window"] = lambda: flashmlir.attention(
                        q, k, v, causal=True, window=(args.window - 1, 0))
                for g, (kg, vg) in kv.items():
                    cases[f"gqa{g}"] = (lambda kg=kg, vg=vg:
                                        flashmlir.attention(q, kg, vg, causal=causal))
                best = {}
                names = []
                for name, fn in cases.items():
                    try:
                        fn()
                        names.append(name)
                    except flashmlir.KernelNotFoundError as exc:
                        first = str(exc).splitlines()[0]
                        print(f"D={d} N={n} causal={causal} {name}: skipped ({first})",
                              flush=True)
                if "plain" not in names:
                    continue
                for order in (names, names[::-1]):
                    for name in order:
                        cases[name]()
                        torch.cuda.synchronize()
                        t = timed(cases[name])
                        best[name] = min(best.get(name, t), t)
                pairs = {name: visible_pairs(n, (args.window - 1, 0) if name == "window"
                                             else None, causal) for name in names}
                tflops = {name: 4.0 * b * hq * pairs[name] * d / (best[name] * 1e-3) / 1e12
                          for name in names}
                rec = {"D": d, "N": n, "B": b, "Hq": hq, "causal": causal,
                       "ms": best, "tflops": tflops,
                       "time_x_plain": {nm: best[nm] / best["plain"] for nm in names},
                       "tflops_x_plain": {nm: tflops[nm] / tflops["plain"] for nm in names}}
                records.append(rec)
                cells = "  ".join(f"{nm} {best[nm]:.3f} ms ({rec['time_x_plain'][nm]:.3f}x"
                                  f", {tflops[nm]:.0f} TF/s)" for nm in names)
                print(f"D={d} N={n} B={b} H={hq} causal={causal}: {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.datetime.now().isoformat(),
                       "device": torch.cuda.get_device_name(),
                       "args": vars(args), "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
