#!/usr/bin/env python3
"""score_mod / mask_mod benchmark (issue 14): flashmlir's compiled modifiers
against FlexAttention (torch.compile'd flex_attention with the same
functions; a BlockMask from create_block_mask for mask_mods) and, where the
modifier states a built-in (causal, a sliding window, the softcap),
flashmlir's built-in path, in one run.

Problems: modifier_cases.BENCH_PROBLEMS (d = 128, 16 heads, B*N = 16k
tokens, N in {4k, 16k}, bf16). Time: triton.testing.do_bench median; each
problem is timed in --rounds rounds with the order of the implementations
reversed every other round, each implementation keeping its best round.
TFLOP/s at the mask's density (FlashAttention's convention: 4*B*H*N^2*D
times the fraction of visible (query, key) pairs, the backward 2.5x that),
as FlexAttention reports its own. The backward is timed alone (one forward
outside, then autograd.grad(out, (q, k, v), dout, retain_graph=True)).

The modifier kernels come from FLASHMLIR_KERNEL_DIR (built by
scripts/build-modifier-kernels.py; the GPU machine has no fa-compile).

    PYTHONPATH=python:python/tests python3 bench/bench_modifiers.py --out out
"""

import argparse
import datetime
import json
import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python", "tests"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--cases", nargs="*", default=None, help="case names (default: all)")
    p.add_argument("--seqlens", nargs="*", type=int, default=None)
    p.add_argument("--direction", choices=["fwd", "bwd", "both"], default="both")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=25)
    p.add_argument("--rep", type=int, default=100)
    p.add_argument("--no-flex", action="store_true")
    p.add_argument("--capture-grad", action="store_true",
                   help="the backward also differentiates the float captures (ALiBi "
                        "slopes, the bias table); cases without them are skipped")
    return p.parse_args(argv)


def density(torch, p, case, device):
    """The fraction of (b, h, q, k) pairs the modifiers (and options) leave
    visible, evaluated in row chunks."""
    import gpu_ref as R
    mask = R.canonical(p.kwargs.get("causal", False), p.kwargs.get("window"))
    if case.mask_mod is None and mask == (-1, -1):
        return 1.0
    seen, total, chunk = 0, 0, 1024
    for b in range(p.B):
        for q0 in range(0, p.Nq, chunk):
            rows = min(chunk, p.Nq - q0)
            bi = torch.full((1, 1, 1, 1), b, device=device)
            hi = torch.arange(p.Hq, device=device).view(1, -1, 1, 1)
            qi = torch.arange(q0, q0 + rows, device=device).view(1, 1, -1, 1)
            ki = torch.arange(p.Nk, device=device).view(1, 1, 1, -1)
            vis = R.visible(p.Nq, p.Nk, mask, device)[q0:q0 + rows].view(1, 1, rows, p.Nk)
            if case.mask_mod is not None:
                vis = vis & case.mask_mod(bi, hi, qi, ki)
            vis = vis.expand(1, p.Hq, rows, p.Nk)
            seen += int(vis.sum())
            total += vis.numel()
    return seen / total


class Bench:
    def __init__(self, args):
        import torch
        self.torch = torch
        self.args = args
        self.flex_fn = None
        self.results = []

    def time_ms(self, fn):
        from triton.testing import do_bench
        return float(do_bench(fn, warmup=self.args.warmup, rep=self.args.rep,
                              return_mode="median"))

    def make_fn(self, impl, p, case, q, k, v):
        import flashmlir
        torch = self.torch
        if impl == "flashmlir":
            kw = p.call_kwargs(case, q.device)   # (key ranges made once)
            return lambda: flashmlir.attention(q, k, v, **kw)
        if impl == "builtin":
            return lambda: flashmlir.attention(q, k, v, **case.builtin)
        if impl == "flex":
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            if self.flex_fn is None:
                import torch._dynamo
                for knob in ("cache_size_limit", "recompile_limit",
                             "accumulated_cache_size_limit", "accumulated_recompile_limit"):
                    if hasattr(torch._dynamo.config, knob):
                        setattr(torch._dynamo.config, knob, 4096)
                self.flex_fn = torch.compile(flex_attention, dynamic=False)
            block_mask = None
            if case.mask_mod is not None:
                block_mask = create_block_mask(case.mask_mod, B=p.B, H=None, Q_LEN=p.Nq,
                                               KV_LEN=p.Nk, device=q.device)
            f = self.flex_fn
            score_mod = case.score_mod
            return lambda: f(q, k, v, score_mod=score_mod, block_mask=block_mask)
        raise ValueError(impl)

    def time_backward(self, impl, p, case, q, k, v, gen):
        torch = self.torch
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        inputs = (qg, kg, vg)
        if self.args.capture_grad:
            inputs += tuple(c.requires_grad_() for c in case.captures.values()
                            if c.is_floating_point())
        fn = self.make_fn(impl, p, case, qg, kg, vg)
        out = fn()
        dout = torch.randn(out.shape, device=out.device, dtype=out.dtype, generator=gen)
        torch.autograd.grad(out, inputs, dout, retain_graph=True)
        torch.cuda.synchronize()
        return self.time_ms(lambda: torch.autograd.grad(out, inputs, dout, retain_graph=True))

    def run_problem(self, p):
        torch = self.torch
        args = self.args
        case = p.build("cuda", seed=1)
        if args.capture_grad and not any(c.is_floating_point() for c in case.captures.values()):
            return
        q, k, v = p.inputs("cuda", "bhsd", seed=2)
        dens = density(torch, p, case, "cuda")
        impls = ["flashmlir"] + (["builtin"] if case.builtin is not None else []) + \
            ([] if args.no_flex else ["flex"])
        dirs = ["fwd", "bwd"] if args.direction == "both" else [args.direction]
        fwd_flops = 4.0 * p.B * p.Hq * p.Nq * p.Nk * p.D * dens
        for direction in dirs:
            best = {}
            errors = {}
            for rnd in range(args.rounds):
                order = impls if rnd % 2 == 0 else impls[::-1]
                for impl in order:
                    if impl in errors:
                        continue
                    gen = torch.Generator(device="cuda")
                    gen.manual_seed(3)
                    t0 = time.time()
                    try:
                        if direction == "fwd":
                            fn = self.make_fn(impl, p, case, q, k, v)
                            fn()
                            torch.cuda.synchronize()
                            ms = self.time_ms(fn)
                        else:
                            ms = self.time_backward(impl, p, case, q, k, v, gen)
                    except Exception as exc:  # noqa: BLE001 - recorded, shown in the table
                        errors[impl] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        traceback.print_exc()
                        continue
                    best[impl] = min(best.get(impl, float("inf")), ms)
                    print(f"  {p.id} {direction} {impl} round {rnd}: {ms:.3f} ms "
                          f"({time.time() - t0:.1f} s)", flush=True)
            work = fwd_flops * (2.5 if direction == "bwd" else 1.0)
            rec = dict(problem=p.id, case=p.case, key_range_rows=p.key_range_rows,
                       N=p.Nq, B=p.B, H=p.Hq, D=p.D,
                       direction=direction, density=dens, errors=errors,
                       ms={i: best[i] for i in best},
                       tflops={i: work / (best[i] * 1e-3) / 1e12 for i in best})
            if "flashmlir" in best:
                for other in ("flex", "builtin"):
                    if other in best:
                        rec[f"x_{other}"] = best[other] / best["flashmlir"]
            self.results.append(rec)
            torch.cuda.empty_cache()


def table(results):
    lines = ["| case | N | dir | density | flashmlir TFLOP/s | flex | x flex | built-in | "
             "x built-in |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        t = r["tflops"]

        def cell(name):
            if name in t:
                return f"{t[name]:.0f}"
            return "err" if name in r["errors"] else "-"
        name = r["case"] + (f" + key ranges ({r['key_range_rows']} rows)"
                            if r.get("key_range_rows") else "")
        lines.append(f"| {name} | {r['N']} | {r['direction']} | {r['density']:.3f} | "
                     f"{cell('flashmlir')} | {cell('flex')} | "
                     f"{r.get('x_flex', float('nan')):.2f} | {cell('builtin')} | "
                     f"{r.get('x_builtin', float('nan')):.2f} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import modifier_cases as MC
    torch.backends.cuda.matmul.allow_tf32 = False
    problems = [p for p in MC.BENCH_PROBLEMS
                if (args.cases is None or p.case in args.cases)
                and (args.seqlens is None or p.Nq in args.seqlens)]
    bench = Bench(args)
    for p in problems:
        print(f"== {p.id}", flush=True)
        bench.run_problem(p)
    os.makedirs(args.out, exist_ok=True)
    info = dict(date=datetime.datetime.now().isoformat(), gpu=torch.cuda.get_device_name(),
                torch=torch.__version__, command=" ".join(sys.argv))
    with open(os.path.join(args.out, "bench_modifiers.json"), "w") as f:
        json.dump(dict(info=info, results=bench.results), f, indent=1)
    print(table(bench.results))


if __name__ == "__main__":
    main()
