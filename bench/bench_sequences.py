#!/usr/bin/env python3
"""Packed-sequence and paged-cache benchmark (issue 13).

(a) varlen: 64 sequences of random lengths in [128, 4096] (fixed seed),
    H 16, D 128, bf16, causal and not. TFLOP/s (useful FLOPs: each
    sequence's visible query-key pairs, 4 * D per pair) of
    flashmlir.attention_varlen against
      - flashmlir.attention on a dense batch with the same total tokens
        (64 sequences of the mean length, rounded to 128: the bar, varlen
        >= 0.9x its TFLOP/s),
      - flashmlir.attention on the batch padded to the longest sequence
        (what varlen saves; TFLOP/s on the useful FLOPs),
      - torch.nn.attention.varlen.varlen_attn (FlashAttention inside
        PyTorch) when this torch has it, and flash_attn's
        flash_attn_varlen_func when installed.
(c) varlen backward (--only varlen_backward): (a)'s problem, the time of
    torch.autograd.grad through flashmlir.attention_varlen (the packed
    backward kernels) against the dense backward on the same tokens (the
    bar, >= 0.9x) and torch's varlen_attn backward; 2.5x the forward's
    useful FLOPs.
(b) paged decode: B 8, Hq 32, Hkv 8, D 128, bf16, one query per sequence
    (causal), caches of 4k/16k/64k/128k keys in pages of 16/64/256 keys
    (shuffled page table): flashmlir.attention_with_kvcache against the
    contiguous decode (flashmlir.attention on [B, Hkv, N, D], the dense
    split-KV path: the bar, paged >= 0.95x its speed), the contiguous
    cache through attention_with_kvcache (an identity page table) and the
    dense decode on a contiguous cache of the pages' [B, N, Hkv, D] layout.
    Eager calls are timed one at a time (the host's launch work included:
    at 4k keys it is about half of a call); --graph times CUDA graphs of
    the calls instead. Bandwidth = bytes of K and V read
    / time, with a device copy of the same bytes for the achievable one.

Timing: CUDA events around each call; the implementations of a cell
interleaved in six rounds of --reps / 2 calls, in alternating order, the
median over all calls (the card's state drifts between rounds: each
implementation sees the same drift).

    python3 bench/bench_sequences.py --out bench-out/   # sequences.json, sequences.md
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402
from flashmlir import _interface, _sequences  # noqa: E402


from bench_decode import interleaved as rounds, timed  # noqa: E402 (CUDA events)


GRAPH_CALLS = 20


def graphed(fn, calls=GRAPH_CALLS):
    """A callable replaying a CUDA graph of `calls` calls of fn: the device
    time of a call without the host's launch work (decoding runs captured in
    serving engines); its time is divided by `calls`."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g.replay


def offsets(lens):
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device="cuda")


def pairs(nq, nk, causal):
    """Visible query-key pairs of one sequence (causal: bottom-right, query
    i sees keys j <= i + nk - nq)."""
    if not causal:
        return nq * nk
    return sum(min(nk, max(0, i + nk - nq + 1)) for i in range(nq))


def torch_varlen():
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def flash_attn_varlen():
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def varlen_problem(args):
    """(a)'s sequence lengths (fixed seed), their offsets, the longest, and
    the dense batch's length (the mean, rounded to 128)."""
    g = torch.Generator().manual_seed(args.seed)
    lens = torch.randint(args.min_len, args.max_len + 1, (args.seqs,), generator=g).tolist()
    mean = max(128, round(sum(lens) / len(lens) / 128) * 128)
    return lens, offsets(lens), max(lens), mean


def with_tflops(res, useful, dense_flops):
    """TFLOP/s of each timed entry (the dense one on its own FLOPs) and the
    varlen / dense ratio (None when either did not run)."""
    for name, r in res.items():
        if "ms" in r:
            r["tflops"] = (dense_flops if name == "dense_same_tokens" else useful) / r["ms"] / 1e9
    if "tflops" in res.get("varlen", {}) and "tflops" in res.get("dense_same_tokens", {}):
        return res["varlen"]["tflops"] / res["dense_same_tokens"]["tflops"]
    return None


def tflops_cell(res, name):
    if "tflops" in res.get(name, {}):
        return f"{res[name]['tflops']:.0f} ({res[name]['ms']:.2f} ms)"
    return "ERR" if name in res else "n/a"


def bench_varlen(args, rows, md):
    lens, cu, maxlen, mean = varlen_problem(args)
    total, h, d, dt = sum(lens), args.heads, args.d, torch.bfloat16
    torch.manual_seed(args.seed)
    q = torch.randn(total, h, d, device="cuda", dtype=dt)
    k = torch.randn(total, h, d, device="cuda", dtype=dt)
    v = torch.randn(total, h, d, device="cuda", dtype=dt)
    same = [torch.randn(len(lens), mean, h, d, device="cuda", dtype=dt) for _ in range(3)]
    padded = [torch.zeros(len(lens), maxlen, h, d, device="cuda", dtype=dt) for _ in range(3)]
    for src, dst in zip((q, k, v), padded):
        for i, (a, n) in enumerate(zip(cu.tolist(), lens)):
            dst[i, :n] = src[a:a + n]
    tv, fa = torch_varlen(), flash_attn_varlen()
    md.append(f"\n## varlen: {len(lens)} sequences of {args.min_len}..{args.max_len} tokens "
              f"(total {total}, max {maxlen}, mean {total / len(lens):.0f}), H {h}, D {d}, "
              "bf16\n")
    md.append("| mask | varlen TFLOP/s | dense same tokens | ratio (bar 0.9) | padded | "
              "torch varlen_attn | flash_attn |\n|---|---|---|---|---|---|---|")
    for causal in (False, True):
        useful = 4 * d * h * sum(pairs(n, n, causal) for n in lens)
        dense_flops = 4 * d * h * len(lens) * pairs(mean, mean, causal)
        impls = {
            "varlen": lambda: flashmlir.attention_varlen(q, k, v, cu, cu, maxlen, causal=causal),
            "dense_same_tokens": lambda: flashmlir.attention(*same, causal=causal,
                                                             layout="bshd"),
            "dense_padded": lambda: flashmlir.attention(*padded, causal=causal, layout="bshd"),
            "torch_varlen_attn": (None if tv is None else lambda: tv(
                q, k, v, cu, cu, maxlen, maxlen, window_size=(-1, 0) if causal else (-1, -1))),
            "flash_attn": (None if fa is None else lambda: fa(q, k, v, cu, cu, maxlen, maxlen,
                                                              causal=causal)),
        }
        plan = _sequences._varlen_plan(q, k, v, cu, cu, maxlen, None, causal, None, None, None)
        res = rounds(impls, args.reps)
        ratio = with_tflops(res, useful, dense_flops)
        rows.append({"bench": "varlen", "causal": causal, "lens": lens, "heads": h, "d": d,
                     "kernel": plan.spec.name if plan.spec is not None else None,
                     "useful_flops": useful, "dense_flops": dense_flops,
                     "ratio_vs_dense": ratio, **res})
        cell = lambda n: tflops_cell(res, n)
        line = (f"| {'causal' if causal else 'full'} | {cell('varlen')} | "
                f"{cell('dense_same_tokens')} | "
                f"{'%.2f' % ratio if ratio is not None else '-'} | {cell('dense_padded')} | "
                f"{cell('torch_varlen_attn')} | {cell('flash_attn')} |")
        md.append(line)
        print(line, flush=True)


def bench_varlen_backward(args, rows, md):
    """The backward of (a)'s problem through the public API: the time of
    torch.autograd.grad(out, (q, k, v), dout) after one forward, against
    the dense backward on the same tokens (the bar: >= 0.9x) and torch's
    varlen_attn backward (when this torch has it). FLOPs: 2.5x the
    forward's useful ones."""
    lens, cu, maxlen, mean = varlen_problem(args)
    total, h, d, dt = sum(lens), args.heads, args.d, torch.bfloat16
    torch.manual_seed(args.seed)
    mk = lambda *shape: torch.randn(*shape, device="cuda", dtype=dt, requires_grad=True)
    q, k, v = mk(total, h, d), mk(total, h, d), mk(total, h, d)
    same = [mk(len(lens), mean, h, d) for _ in range(3)]
    tv = torch_varlen()
    md.append(f"\n## varlen backward: {len(lens)} sequences of {args.min_len}..{args.max_len} "
              f"tokens (total {total}, max {maxlen}), H {h}, D {d}, bf16\n")
    md.append("| mask | varlen bwd TFLOP/s | dense bwd same tokens | ratio (bar 0.9) | "
              "torch varlen_attn bwd |\n|---|---|---|---|---|")
    for causal in (False, True):
        useful = 2.5 * 4 * d * h * sum(pairs(n, n, causal) for n in lens)
        dense_flops = 2.5 * 4 * d * h * len(lens) * pairs(mean, mean, causal)
        out = flashmlir.attention_varlen(q, k, v, cu, cu, maxlen, maxlen, causal=causal)
        dout = torch.randn_like(out)
        dense_out = flashmlir.attention(*same, causal=causal, layout="bshd")
        ddense = torch.randn_like(dense_out)
        impls = {
            "varlen": lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
            "dense_same_tokens": lambda: torch.autograd.grad(dense_out, same, ddense,
                                                             retain_graph=True),
        }
        if tv is not None:
            try:
                tout = tv(q, k, v, cu, cu, maxlen, maxlen,
                          window_size=(-1, 0) if causal else (-1, -1))
                impls["torch_varlen_attn"] = lambda: torch.autograd.grad(
                    tout, (q, k, v), dout, retain_graph=True)
            except Exception as exc:   # no backward / refuses the shape
                print(f"torch varlen_attn: {exc}".splitlines()[0][:200])
        res = rounds(impls, args.reps)
        ratio = with_tflops(res, useful, dense_flops)
        plan = _sequences._varlen_plan(q, k, v, cu, cu, maxlen, maxlen, causal, None, None, None)
        kernels = [b.seq is not None for b in plan.bwd.values()]
        rows.append({"bench": "varlen_backward", "causal": causal, "lens": lens, "heads": h,
                     "d": d, "packed_backward": all(kernels) and bool(kernels),
                     "useful_flops": useful, "dense_flops": dense_flops,
                     "ratio_vs_dense": ratio, **res})
        cell = lambda n: tflops_cell(res, n)
        line = (f"| {'causal' if causal else 'full'} | {cell('varlen')} | "
                f"{cell('dense_same_tokens')} | "
                f"{'%.2f' % ratio if ratio is not None else '-'} | "
                f"{cell('torch_varlen_attn')} |")
        md.append(line)
        print(line, flush=True)


def bench_paged(args, rows, md):
    b, (hq, hkv), d, dt = args.batch, args.decode_heads, args.d, torch.bfloat16
    how = (f"CUDA graphs of {GRAPH_CALLS} calls, per call" if args.graph
           else "eager calls, each timed alone")
    md.append(f"\n## paged decode: B {b}, H {hq}/{hkv}, D {d}, bf16, one query (causal); "
              f"{how}\n")
    md.append("| cache | page | paged us | TB/s | contiguous decode us | ratio (bar 0.95) | "
              "contiguous via kvcache us | ratio to it | contiguous [B, N, Hkv, D] decode us | "
              "ratio to it | copy TB/s | paged kernel |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.nk:
        torch.manual_seed(0)
        q = torch.randn(b, 1, hq, d, device="cuda", dtype=dt)
        kd = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
        vd = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
        kcont, vcont = (t.transpose(1, 2).contiguous() for t in (kd, vd))   # [B, N, Hkv, D]
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        nbytes = 2 * kd.numel() * kd.element_size()
        src = torch.empty(nbytes // 2, device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        copy_bw = nbytes / timed(lambda: dst.copy_(src), args.reps) / 1e9
        qd = q.transpose(1, 2)            # [B, Hq, 1, D]
        for s in args.page_sizes:
            pages = b * n // s
            perm = torch.randperm(pages, device="cuda")
            kc = torch.empty(pages, s, hkv, d, device="cuda", dtype=dt)
            vc = torch.empty_like(kc)
            kc[perm] = kcont.reshape(pages, s, hkv, d)
            vc[perm] = vcont.reshape(pages, s, hkv, d)
            table = perm.view(b, n // s).to(torch.int32).contiguous()
            impls = {
                "paged": lambda: flashmlir.attention_with_kvcache(q, kc, vc, sl, table,
                                                                  causal=True),
                "contiguous_decode": lambda: flashmlir.attention(qd, kd, vd, causal=True),
                "contiguous_kvcache": lambda: flashmlir.attention_with_kvcache(
                    q, kcont, vcont, sl, causal=True),
                # The dense decode on the pages' layout ([B, N, Hkv, D]).
                "contiguous_bshd": lambda: flashmlir.attention(q, kcont, vcont, causal=True,
                                                               layout="bshd"),
            }
            ref = flashmlir.attention(qd, kd, vd, causal=True).transpose(1, 2).float()
            err = (flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=True).float()
                   - ref).abs().max().item()
            plan = _sequences._paged_plan(q, kc, vc, sl, table, True, None, None, None)
            dplan = _interface._forward_plan(qd, kd, vd, True, None, None, None, "bhsd", False)
            if args.graph:
                impls = {name: graphed(fn) for name, fn in impls.items()}
            res = rounds(impls, args.reps)
            for r in res.values():
                if "ms" in r:
                    if args.graph:
                        r["ms"] /= GRAPH_CALLS
                    r["tbps"] = nbytes / r["ms"] / 1e9
            def ratio_to(name):
                if "ms" in res.get("paged", {}) and "ms" in res.get(name, {}):
                    return res[name]["ms"] / res["paged"]["ms"]
                return None
            # The bar's reference: the contiguous [B, Hkv, N, D] decode; and
            # the same [B, N, Hkv, D] layout as the pages, contiguous.
            ratio, ratio_kv = ratio_to("contiguous_decode"), ratio_to("contiguous_kvcache")
            ratio_bshd = ratio_to("contiguous_bshd")
            rows.append({"bench": "paged_decode", "nk": n, "page_size": s, "batch": b,
                         "heads": [hq, hkv], "d": d, "bytes": nbytes, "copy_tbps": copy_bw,
                         "paged_kernel": plan.spec.name if plan.spec is not None else None,
                         "split": plan.seq is not None,
                         "contiguous_kernel": (dplan.split.spec.name if dplan.split is not None
                                               else "plain"),
                         "max_err_vs_contiguous": err, "speed_ratio_vs_contiguous": ratio,
                         "speed_ratio_vs_contiguous_kvcache": ratio_kv,
                         "speed_ratio_vs_contiguous_bshd": ratio_bshd,
                         **res})
            us = lambda name: (f"{res[name]['ms'] * 1e3:.1f}" if "ms" in res.get(name, {})
                               else "ERR")
            line = (f"| {n} | {s} | {us('paged')} | "
                    f"{res.get('paged', {}).get('tbps', float('nan')):.2f} | "
                    f"{us('contiguous_decode')} | "
                    f"{'%.2f' % ratio if ratio is not None else '-'} | "
                    f"{us('contiguous_kvcache')} | "
                    f"{'%.2f' % ratio_kv if ratio_kv is not None else '-'} | "
                    f"{us('contiguous_bshd')} | "
                    f"{'%.2f' % ratio_bshd if ratio_bshd is not None else '-'} | {copy_bw:.2f} | "
                    f"{plan.spec.name if plan.spec is not None else '-'} |")
            md.append(line)
            print(line, flush=True)
            del kc, vc
        del kd, vd, kcont, vcont
        torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", help="folder for sequences.json and sequences.md")
    p.add_argument("--only", choices=("varlen", "varlen_backward", "paged"))
    p.add_argument("--seqs", type=int, default=64)
    p.add_argument("--min-len", type=int, default=128)
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--decode-heads", type=int, nargs=2, default=[32, 8])
    p.add_argument("--nk", type=int, nargs="+", default=[4096, 16384, 65536, 131072])
    p.add_argument("--page-sizes", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--graph", action="store_true",
                   help="paged: time CUDA graphs of the calls (device time without the "
                        "host's launch work)")
    args = p.parse_args()
    dev = torch.cuda.get_device_name()
    rows, md = [], [f"# bench_sequences on {dev} (torch {torch.__version__})"]
    if args.only in (None, "varlen"):
        bench_varlen(args, rows, md)
    if args.only in (None, "varlen_backward"):
        bench_varlen_backward(args, rows, md)
    if args.only in (None, "paged"):
        bench_paged(args, rows, md)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "sequences.json"), "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows}, f, indent=1)
        with open(os.path.join(args.out, "sequences.md"), "w") as f:
            f.write("\n".join(md) + "\n")
        print(f"wrote {args.out}/sequences.json and sequences.md")


if __name__ == "__main__":
    main()
