#!/usr/bin/env python3
"""FlashAttention-style attention benchmark: flashmlir vs PyTorch SDPA
(FlashAttention-2 backend), cuDNN attention and FlexAttention, in one run.

Sweep (as in the FlashAttention papers): B*N = 16384 tokens, H*D = 2048,
N in 512 .. 16k, D in {64, 128}, causal and not; [B, H, N, D] contiguous
inputs. Time: triton.testing.do_bench median; every configuration is timed
in --rounds rounds (default 2), the order of the implementations reversed
every other round, and each implementation keeps its best round (one can run
slower right after another's heavy kernels). TFLOP/s counts
4*B*H*N^2*D per forward (halved when causal); the backward counts 2.5x that
(FlashAttention's convention). The backward is timed alone: the forward runs
once outside the timed region, then torch.autograd.grad(out, (q, k, v), dout,
retain_graph=True) is timed. Ceilings: a bf16 8192^3 matmul and a
device-to-device copy.

    PYTHONPATH=python python3 bench/bench_attention.py --out out
    ... --dtypes bf16 fp16 --direction bwd --no-flex --seqlens 1024 4096

Writes bench.json (every number, date, GPU, versions, command line; each
flashmlir record carries ratio_vs_fa2 / ratio_vs_cudnn) and bench.png
(TFLOP/s vs N per direction, head dim and mask, and the ratios), and prints
a table last.
"""

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))

IMPLS = ("flashmlir", "fa2", "cudnn", "flex")
LABELS = {"flashmlir": "flashmlir", "fa2": "FA2 (SDPA flash)", "cudnn": "cuDNN (SDPA)",
          "flex": "FlexAttention"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "out"), help="output folder")
    p.add_argument("--dtypes", nargs="+", default=["bf16"], choices=["bf16", "fp16"])
    p.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    p.add_argument("--seqlens", nargs="+", type=int,
                   default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--causal", choices=["both", "true", "false"], default="both")
    p.add_argument("--tokens", type=int, default=16384, help="B * N")
    p.add_argument("--hidden", type=int, default=2048, help="H * D")
    p.add_argument("--direction", choices=["fwd", "bwd", "both"], default="both",
                   help="time the forward, the backward (alone), or both")
    p.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)  # old: both
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--no-flex", action="store_true", help="skip FlexAttention")
    p.add_argument("--flex-budget-s", type=float, default=150.0,
                   help="stop compiling FlexAttention variants after this many seconds")
    p.add_argument("--warmup", type=float, default=25.0, help="do_bench warmup (ms)")
    p.add_argument("--rep", type=float, default=100.0, help="do_bench repetitions (ms)")
    p.add_argument("--rounds", type=int, default=2,
                   help="time every configuration this many times, the order of the "
                        "implementations reversed every other round; each keeps its "
                        "best round (the order measurably matters: one implementation "
                        "can run slower right after another's heavy kernels)")
    p.add_argument("--no-ceilings", action="store_true")
    p.add_argument("--name", default="bench", help="basename of the .json/.png outputs")
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="skip the remaining configurations after this many seconds")
    a = p.parse_args(argv)
    if a.no_flex and "flex" in a.impls:
        a.impls.remove("flex")
    if a.backward:
        a.direction = "both"
    a.directions = {"fwd": ["fwd"], "bwd": ["bwd"], "both": ["fwd", "bwd"]}[a.direction]
    return a


def flops(b, h, n, d, causal, direction):
    f = 4.0 * b * h * n * n * d
    if causal:
        f /= 2
    if direction == "bwd":
        f *= 2.5
    return f


def short_error(exc):
    msg = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return msg[0][:300] if msg else type(exc).__name__


class Bench:
    def __init__(self, args):
        import torch
        import triton
        self.torch = torch
        self.triton = triton
        self.args = args
        self.results = []
        self.flex_spent = 0.0
        self.flex_fn = None
        self.flex_error = None

    # -- timing --------------------------------------------------------------
    def time_ms(self, fn):
        from triton.testing import do_bench
        return float(do_bench(fn, warmup=self.args.warmup, rep=self.args.rep,
                              return_mode="median"))

    def ceilings(self):
        torch = self.torch
        out = {}
        try:
            a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
            ms = self.time_ms(lambda: torch.matmul(a, b))
            out["matmul_bf16_8192_ms"] = ms
            out["matmul_bf16_8192_tflops"] = 2 * 8192 ** 3 / (ms * 1e-3) / 1e12
        except Exception as exc:
            out["matmul_error"] = short_error(exc)
        try:
            n = 1 << 30  # bytes per buffer
            x = torch.empty(n // 4, device="cuda", dtype=torch.float32).uniform_()
            y = torch.empty_like(x)
            ms = self.time_ms(lambda: y.copy_(x))
            out["copy_bytes"] = 2 * n
            out["copy_ms"] = ms
            out["copy_tb_per_s"] = 2 * n / (ms * 1e-3) / 1e12
        except Exception as exc:
            out["copy_error"] = short_error(exc)
        torch.cuda.empty_cache()
        return out

    # -- implementations -------------------------------------------------------
    def make_fn(self, impl, q, k, v, causal):
        torch = self.torch
        F = torch.nn.functional
        from torch.nn.attention import SDPBackend, sdpa_kernel
        if impl == "flashmlir":
            import flashmlir
            return lambda: flashmlir.attention(q, k, v, causal=causal)
        if impl in ("fa2", "cudnn"):
            backend = SDPBackend.FLASH_ATTENTION if impl == "fa2" else SDPBackend.CUDNN_ATTENTION

            def fn():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return fn
        if impl == "flex":
            if self.flex_error:
                raise RuntimeError(self.flex_error)
            if self.flex_spent > self.args.flex_budget_s:
                raise RuntimeError(f"skipped: FlexAttention compile budget "
                                   f"({self.args.flex_budget_s:g} s) spent")
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            if self.flex_fn is None:
                import torch._dynamo
                for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                             "accumulated_recompile_limit"):
                    if hasattr(torch._dynamo.config, knob):
                        setattr(torch._dynamo.config, knob, 4096)
                self.flex_fn = torch.compile(flex_attention, dynamic=False)
            block_mask = None
            if causal:
                n = q.shape[2]
                block_mask = create_block_mask(lambda b, h, qi, kv: qi >= kv, B=None, H=None,
                                               Q_LEN=n, KV_LEN=n, device=q.device)
            f = self.flex_fn
            return lambda: f(q, k, v, block_mask=block_mask)
        raise ValueError(impl)

    def available_backward(self, impl, dtype, d, causal):
        if impl == "flashmlir":
            import flashmlir
            return flashmlir.backward_available(dtype, d, causal=causal)
        return True

    def time_backward(self, impl, q, k, v, causal, gen):
        """Backward alone: one forward outside the timing, then
        autograd.grad(out, (q, k, v), dout, retain_graph=True) timed. Returns
        (ms, (dq, dk, dv) of the first call)."""
        torch = self.torch
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        fn = self.make_fn(impl, qg, kg, vg, causal)
        out = fn()
        dout = torch.randn(out.shape, device=out.device, dtype=out.dtype, generator=gen)
        grads = torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True)
        torch.cuda.synchronize()
        ms = self.time_ms(lambda: torch.autograd.grad(out, (qg, kg, vg), dout,
                                                      retain_graph=True))
        return ms, grads

    # -- one configuration -----------------------------------------------------------
    def run_config(self, dtype_name, d, causal, n):
        torch = self.torch
        args = self.args
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        b = max(1, args.tokens // n)
        h = max(1, args.hidden // d)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1234 + n + d + int(causal))
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=gen)
                   for _ in range(3))
        base = dict(dtype=dtype_name, head_dim=d, causal=causal, seqlen=n, batch=b, heads=h)
        ref = {}  # FA2's out / grads: the others are compared against them
        directions = args.directions
        # FA2 first: the others are compared against its output.
        order = [i for i in ("fa2", "cudnn", "flashmlir", "flex") if i in args.impls]
        recs = []
        by_key = {}
        for rnd in range(max(1, args.rounds)):
            for impl in (order if rnd % 2 == 0 else order[::-1]):
                for direction in directions:
                    if rnd > 0:
                        # Later rounds only re-time what worked in the first one.
                        rec = by_key[impl, direction]
                        if "ms" not in rec:
                            continue
                        t0 = time.time()
                        try:
                            if direction == "fwd":
                                ms = self.time_ms(self.make_fn(impl, q, k, v, causal))
                            else:
                                gen.manual_seed(4321 + n + d + int(causal))
                                ms, _ = self.time_backward(impl, q, k, v, causal, gen)
                        except Exception as exc:
                            rec.setdefault("round_errors", []).append(short_error(exc))
                            continue
                        finally:
                            if impl == "flex":
                                self.flex_spent += time.time() - t0
                        rec["ms_rounds"].append(ms)
                        rec["ms"] = min(rec["ms_rounds"])
                        rec["tflops"] = rec["flops"] / (rec["ms"] * 1e-3) / 1e12
                        print(f"  {dtype_name} D={d:<3} causal={int(causal)} N={n:<5} B={b:<3} "
                              f"H={h:<3} {direction} {impl:<9} round {rnd}: {ms:.3f} ms, best "
                              f"{rec['tflops']:7.1f} TFLOP/s", flush=True)
                        continue
                    rec = dict(base, impl=impl, direction=direction,
                               flops=flops(b, h, n, d, causal, direction))
                    by_key[impl, direction] = rec
                    t0 = time.time()
                    try:
                        if direction == "fwd":
                            fn = self.make_fn(impl, q, k, v, causal)
                            out = fn()  # first call: compile/load outside the timing
                            torch.cuda.synchronize()
                            got = (out,)
                            if not bool(torch.isfinite(out).all()):
                                rec["warning"] = "non-finite output"
                            ms = self.time_ms(fn)
                        else:
                            if not self.available_backward(impl, dtype, d, causal):
                                raise NotImplementedError("no flashmlir backward kernel for this "
                                                          "configuration")
                            gen.manual_seed(4321 + n + d + int(causal))  # same dout for every impl
                            ms, got = self.time_backward(impl, q, k, v, causal, gen)
                            if not all(bool(torch.isfinite(g).all()) for g in got):
                                rec["warning"] = "non-finite gradient"
                        if impl == "fa2":
                            ref[direction] = got
                        elif direction in ref:
                            rec["max_abs_diff_vs_fa2"] = max(
                                (a.float() - r.float()).abs().max().item()
                                for a, r in zip(got, ref[direction]))
                        del got
                        rec["ms"] = ms
                        rec["ms_rounds"] = [ms]
                        rec["tflops"] = rec["flops"] / (ms * 1e-3) / 1e12
                    except Exception as exc:
                        rec["error"] = short_error(exc)
                        if os.environ.get("BENCH_TRACEBACK"):
                            traceback.print_exc()
                    finally:
                        if impl == "flex":
                            self.flex_spent += time.time() - t0
                    self.results.append(rec)
                    recs.append(rec)
                    status = (f"{rec['tflops']:7.1f} TFLOP/s  {rec['ms']:.3f} ms" if "ms" in rec
                              else rec["error"])
                    print(f"  {dtype_name} D={d:<3} causal={int(causal)} N={n:<5} B={b:<3} H={h:<3} "
                          f"{direction} {impl:<9} {status}", flush=True)
        add_ratios(recs)
        del q, k, v, ref
        torch.cuda.empty_cache()


def add_ratios(recs):
    """ratio_vs_fa2 / ratio_vs_cudnn (TFLOP/s of ours over theirs) on each
    flashmlir record of one configuration."""
    by = {(r["impl"], r["direction"]): r for r in recs}
    for (impl, direction), r in by.items():
        if impl != "flashmlir" or "tflops" not in r:
            continue
        for other, key in (("fa2", "ratio_vs_fa2"), ("cudnn", "ratio_vs_cudnn")):
            o = by.get((other, direction))
            if o and o.get("tflops"):
                r[key] = r["tflops"] / o["tflops"]


def env_info(torch, triton):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([sys.executable] + sys.argv), "host": platform.node(),
            "python": platform.python_version(), "torch": torch.__version__,
            "triton": getattr(triton, "__version__", "?"), "cuda": torch.version.cuda}
    try:
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}",
                    sm_count=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2 ** 30, 1))
    except Exception as exc:
        info["gpu_error"] = short_error(exc)
    try:
        import flashmlir
        reg = flashmlir.default_registry()
        info["flashmlir_kernels"] = [s.name for s in reg.specs() if s.kind == "forward"]
        info["flashmlir_backward_kernels"] = [s.name for s in reg.specs() if s.kind == "backward"]
        info["flashmlir_search_path"] = reg.search_dirs
        info["flashmlir_chip_override"] = os.environ.get("FLASHMLIR_CHIP")
    except Exception as exc:
        info["flashmlir_error"] = short_error(exc)
    return info


def _panel_order(key):
    direction, dtype, d, causal = key
    return (direction != "fwd", dtype, d, causal)


def plot(results, info, ceilings, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        print(f"no plot: matplotlib unavailable ({short_error(exc)})")
        return False
    panels = sorted({(r["direction"], r["dtype"], r["head_dim"], r["causal"]) for r in results},
                    key=_panel_order)
    if not panels:
        return False
    # One more panel per (dtype, D, mask): ours / FA2 and ours / cuDNN, both directions.
    ratio_panels = sorted({(r["dtype"], r["head_dim"], r["causal"]) for r in results
                           if r["impl"] == "flashmlir" and ("ratio_vs_fa2" in r
                                                            or "ratio_vs_cudnn" in r)})
    cols = 2
    rows = math.ceil((len(panels) + len(ratio_panels)) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    flat = list(axes.flat)
    for ax, key in zip(flat, panels):
        direction, dtype, d, causal = key
        for impl in IMPLS:
            pts = sorted((r["seqlen"], r["tflops"]) for r in results
                         if (r["direction"], r["dtype"], r["head_dim"], r["causal"]) == key
                         and r["impl"] == impl and "tflops" in r)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=LABELS[impl])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("TFLOP/s" + (" (backward: 2.5x forward FLOPs)" if direction == "bwd" else ""))
        ax.set_title(f"{direction} {dtype} D={d} {'causal' if causal else 'full'}")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    for ax, key in zip(flat[len(panels):], ratio_panels):
        dtype, d, causal = key
        for direction, style in (("fwd", "-"), ("bwd", "--")):
            for field, other in (("ratio_vs_fa2", "FA2"), ("ratio_vs_cudnn", "cuDNN")):
                pts = sorted((r["seqlen"], r[field]) for r in results
                             if (r["dtype"], r["head_dim"], r["causal"]) == key
                             and r["impl"] == "flashmlir" and r["direction"] == direction
                             and field in r)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                            label=f"{direction}: ours / {other}")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("speed ratio (TFLOP/s)")
        ax.set_title(f"flashmlir vs FA2 / cuDNN: {dtype} D={d} {'causal' if causal else 'full'}")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    for ax in flat[len(panels) + len(ratio_panels):]:
        ax.axis("off")
    ceil = ceilings.get("matmul_bf16_8192_tflops")
    fig.suptitle(f"{info.get('gpu', '?')}, torch {info.get('torch')}, {info['date']}"
                 + (f"; bf16 matmul ceiling {ceil:.0f} TFLOP/s" if ceil else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    return True


def table(results):
    lines = []
    keys = sorted({(r["direction"], r["dtype"], r["head_dim"], r["causal"]) for r in results},
                  key=_panel_order)
    for key in keys:
        direction, dtype, d, causal = key
        lines.append(f"\n{direction} {dtype} D={d} {'causal' if causal else 'full'}   (TFLOP/s)")
        lines.append(f"{'N':>6} {'ours':>8} {'FA2':>8} {'cuDNN':>8} {'flex':>8} "
                     f"{'ours/FA2':>9} {'ours/cuDNN':>11}")
        for n in sorted({r["seqlen"] for r in results if (r["direction"], r["dtype"],
                                                            r["head_dim"], r["causal"]) == key}):
            row = {r["impl"]: r for r in results
                   if (r["direction"], r["dtype"], r["head_dim"], r["causal"], r["seqlen"]) == key + (n,)}

            def tf(impl):
                r = row.get(impl)
                return r.get("tflops") if r else None

            def fmt(x):
                return f"{x:8.1f}" if x is not None else f"{'-':>8}"

            ours, fa2, cud, flex = tf("flashmlir"), tf("fa2"), tf("cudnn"), tf("flex")
            r1 = f"{ours / fa2:9.2f}" if ours and fa2 else f"{'-':>9}"
            r2 = f"{ours / cud:11.2f}" if ours and cud else f"{'-':>11}"
            lines.append(f"{n:>6} {fmt(ours)} {fmt(fa2)} {fmt(cud)} {fmt(flex)} {r1} {r2}")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    import torch
    if not torch.cuda.is_available():
        print("bench_attention: no CUDA device; nothing to do")
        return 0
    import triton
    bench = Bench(args)
    info = env_info(torch, triton)
    print(json.dumps({k: v for k, v in info.items()
                      if k not in ("flashmlir_kernels", "flashmlir_backward_kernels")}))
    print(f"flashmlir kernels found: {len(info.get('flashmlir_kernels', []))} forward, "
          f"{len(info.get('flashmlir_backward_kernels', []))} backward")
    ceilings = {} if args.no_ceilings else bench.ceilings()
    if ceilings:
        print("ceilings: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in ceilings.items()))
    causals = {"both": [False, True], "true": [True], "false": [False]}[args.causal]
    t_start = time.time()
    jpath = os.path.join(args.out, args.name + ".json")

    def save(done):
        info["bench_seconds"] = round(time.time() - t_start, 1)
        info["flex_seconds"] = round(bench.flex_spent, 1)
        info["complete"] = done
        doc = {"info": info, "args": vars(args), "ceilings": ceilings, "results": bench.results}
        tmp = jpath + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, jpath)

    skipped = []
    for dtype in args.dtypes:
        for d in args.headdims:
            for causal in causals:
                for n in args.seqlens:
                    if args.time_budget_s and time.time() - t_start > args.time_budget_s:
                        skipped.append((dtype, d, causal, n))
                        continue
                    bench.run_config(dtype, d, causal, n)
                    save(False)  # a timeout still leaves the numbers so far
    info["skipped_for_time"] = skipped
    if skipped:
        print(f"time budget ({args.time_budget_s:g} s) spent: skipped {len(skipped)} "
              "configuration(s)")
    save(True)
    print(f"wrote {jpath}")
    plot(bench.results, info, ceilings, os.path.join(args.out, args.name + ".png"))
    errors = sorted({(r["impl"], r["error"]) for r in bench.results if "error" in r})
    if errors:
        print("\nerrors / skips (first of each):")
        for impl, err in errors[:20]:
            print(f"  {impl}: {err}")
    if ceilings:
        print("\nceilings: bf16 matmul 8192^3 "
              f"{ceilings.get('matmul_bf16_8192_tflops', float('nan')):.0f} TFLOP/s, "
              f"copy {ceilings.get('copy_tb_per_s', float('nan')):.2f} TB/s (read+write)")
    print(table(bench.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
