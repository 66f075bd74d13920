#!/usr/bin/env python3
"""A/B timing of two kernel folders on the same problems, in one process.

Each problem (direction, head dim, mask, N) is timed with the kernels of
folder A and of folder B in the order A B B A (the registry is swapped with
flashmlir.set_default_registry, which drops the cached launch plans); each
side keeps its best round, and the ratio time(B) / time(A) is reported
(> 1: A is faster). Used for "is the run-time-window kernel as fast as the
constant one", "did this tile change pay", and similar questions. Sizes as
in bench_attention.py: B*N = --tokens, H*D = --hidden, [B, H, N, D] bf16.

    PYTHONPATH=python python3 bench/bench_kernel_ab.py --a build/kernels \\
      --b const-window --headdims 64 128 --seqlens 2048 8192 \\
      --masks causal-window=256,0 window=256,256 --json out/ab.json

A mask is 'full', 'causal', 'window=L,R' or 'causal-window=L,0'. The
kernel names each side used are recorded, so a missing kernel shows up as
the other folder's fallback rather than as a silent comparison of the same
kernel.
"""

import argparse
import datetime
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))


def parse_mask(text):
    if text in ("full", "causal"):
        return text == "causal", None
    kind, _, sizes = text.partition("=")
    left, right = (int(x) for x in sizes.split(","))
    if kind not in ("window", "causal-window"):
        raise SystemExit(f"bad mask {text!r}")
    return kind == "causal-window", (left, right)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="kernel folder A (searched alone)")
    p.add_argument("--b", required=True, help="kernel folder B (searched first, then A)")
    p.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    p.add_argument("--value-headdims", nargs="+", type=int, default=None,
                   help="Dv per --headdims entry (default: Dv = D)")
    p.add_argument("--seqlens", nargs="+", type=int, default=[2048, 8192])
    p.add_argument("--masks", nargs="+", default=["full", "causal"])
    p.add_argument("--groups", nargs="+", type=int, default=[1],
                   help="query heads per key/value head (GQA), one run per value")
    p.add_argument("--direction", choices=["fwd", "bwd", "both"], default="both")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--softcap", type=float, default=None,
                   help="a tanh softcap on every problem (default: none)")
    p.add_argument("--deterministic", action="store_true",
                   help="the backward's deterministic mode")
    p.add_argument("--rep", type=float, default=200.0, help="do_bench repetitions (ms)")
    p.add_argument("--env-b", nargs="*", default=[], metavar="NAME=VALUE",
                   help="environment variables set while side B's plans are built "
                        "(e.g. FLASHMLIR_SMS=100000: a grid-size rule taken on any grid)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import torch
    from triton.testing import do_bench
    import flashmlir
    from flashmlir import KernelRegistry, KernelRequest, set_default_registry

    # B falls back on A's kernels for what it lacks (e.g. the forward of a
    # backward comparison); the names recorded show which one ran.
    regs = {"A": KernelRegistry([args.a], compiler=None),
            "B": KernelRegistry([args.b, args.a], compiler=None)}
    # B falls back to A's kernels where it has none: an invalid manifest in
    # B would silently compare A with itself.
    for side, reg in regs.items():
        bad = reg.invalid()
        if bad:
            raise SystemExit(f"{side}: invalid kernel manifests: "
                             + "; ".join(str(x) for x in bad))
    cc = torch.cuda.get_device_capability()
    env_b = dict(item.split("=", 1) for item in args.env_b)
    saved = {name: os.environ.get(name) for name in env_b}

    def side_env(side):
        # Plans read the environment when they are built, and every
        # registry swap drops them: B's plans see env_b, A's the original.
        for name, value in (env_b if side == "B" else saved).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    dirs = ["fwd", "bwd"] if args.direction == "both" else [args.direction]
    records = []
    dvs = args.value_headdims or args.headdims
    if len(dvs) != len(args.headdims):
        raise SystemExit("--value-headdims needs one Dv per --headdims entry")
    problems = [(d, dv, mask, n, grp) for d, dv in zip(args.headdims, dvs)
                for mask in args.masks for n in args.seqlens for grp in args.groups]
    for d, dv, mask, n, grp in problems:
                causal, window = parse_mask(mask)
                b, h = max(1, args.tokens // n), max(1, args.hidden // d)
                hkv = max(1, h // grp)
                gen = torch.Generator(device="cuda").manual_seed(n + d)
                q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                k = torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16,
                                generator=gen)
                v = torch.randn(b, hkv, n, dv, device="cuda", dtype=torch.bfloat16,
                                generator=gen)
                dout = torch.randn(b, h, n, dv, device="cuda", dtype=torch.bfloat16,
                                   generator=gen)
                for direction in dirs:
                    best, names = {}, {}
                    for side in ("A", "B", "B", "A"):
                        side_env(side)
                        set_default_registry(regs[side])
                        try:
                            if direction == "fwd":
                                fn = lambda: flashmlir.attention(q, k, v, causal=causal,
                                                                 window=window,
                                                                 softcap=args.softcap)
                                fn()
                            else:
                                qg, kg, vg = (t.detach().clone().requires_grad_()
                                              for t in (q, k, v))
                                out = flashmlir.attention(
                                    qg, kg, vg, causal=causal, window=window,
                                    softcap=args.softcap,
                                    deterministic=args.deterministic)
                                fn = lambda: torch.autograd.grad(out, (qg, kg, vg), dout,
                                                                 retain_graph=True)
                                fn()
                            torch.cuda.synchronize()
                            ms = float(do_bench(fn, warmup=25, rep=args.rep,
                                                return_mode="median"))
                        except Exception as exc:  # a missing kernel: say so, go on
                            names[side] = f"error: {str(exc).splitlines()[0]}"
                            continue
                        kind = "backward" if direction == "bwd" else "forward"
                        names[side] = regs[side].find(
                            KernelRequest.make(kind, "bf16", d, dv, causal=causal,
                                               window=window, softcap=args.softcap,
                                               deterministic=(args.deterministic
                                                              and kind == "backward")),
                            cc, compile=False).name
                        best[side] = min(best.get(side, ms), ms)
                    rec = dict(direction=direction, head_dim=d, value_head_dim=dv,
                               mask=mask, seqlen=n, softcap=args.softcap,
                               deterministic=args.deterministic,
                               batch=b, heads=h, kv_heads=hkv, ms_a=best.get("A"), ms_b=best.get("B"),
                               kernels=names, env_b=args.env_b)
                    if "A" in best and "B" in best:
                        rec["b_over_a"] = best["B"] / best["A"]
                    records.append(rec)
                    ratio = rec.get("b_over_a")
                    print(f"{direction} D={d:<3} Dv={dv:<3} {mask:<22} N={n:<5} H={h}/{hkv} "
                          f"A {best.get('A', float('nan')):8.3f} ms  "
                          f"B {best.get('B', float('nan')):8.3f} ms  "
                          f"B/A {ratio if ratio else float('nan'):.3f}  {names}", flush=True)
    side_env("A")
    set_default_registry(None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(date=datetime.datetime.now().isoformat(), argv=sys.argv,
                           gpu=torch.cuda.get_device_name(), a=args.a, b=args.b,
                           records=records), f, indent=1)


if __name__ == "__main__":
    main()
