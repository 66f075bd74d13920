"""H200: the packed (varlen) backward kernels run straight from their
manifests (fa-compile --form=varlen --kind=backward), before the Python
entries use them: accuracy under FlashAttention's rule and speed against
the dense backward on the same tokens.

Accuracy: per sequence, gradients against an fp32 reference of the same
(rounded) inputs; the error must be at most 3x that of PyTorch's naive
attention in the input precision, plus 1e-3 (FlashAttention's rule). The
gradients are poisoned with NaN first; rows of no sequence (cu_seqlens
starting after 0 / ending before T) must come back exactly 0.

Usage: python3 scripts/check-varlen-backward.py [--kernels build/kernels]
       [--bench] [--chip sm_90a|sm_80]
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from flashmlir import _backward, _kernels  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}


def kernel_name(d, dtype, causal, window, softcap, chip):
    n = f"fa_bwd_varlen_d{d}_{dtype}"
    if causal:
        n += "_causal"
    if window:
        n += "_window"
    if softcap:
        n += "_softcap"
    return n + "_" + chip.replace("_", "")


def visible(nq, nk, causal, window, device):
    i = torch.arange(nq, device=device)[:, None]
    j = torch.arange(nk, device=device)[None, :]
    off = nk - nq
    vis = torch.ones(nq, nk, dtype=torch.bool, device=device)
    left, right = window if window else (-1, -1)
    if causal:
        right = 0
    if right >= 0:
        vis &= j <= i + off + right
    if left >= 0:
        vis &= j >= i + off - left
    return vis


def attention(q, k, v, scale, causal, window, softcap):
    """Naive attention of one sequence ([H, N, D]) in q's dtype; rows that
    see no key give 0 (and lse +inf)."""
    g = q.shape[0] // k.shape[0]
    k = k.repeat_interleave(g, 0)
    v = v.repeat_interleave(g, 0)
    s = (q @ k.transpose(1, 2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    vis = visible(q.shape[1], k.shape[1], causal, window, q.device)
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s.float(), -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v, torch.where(torch.isfinite(lse), lse, torch.full_like(lse, math.inf))


def reference(q, k, v, dout, cu_q, cu_k, scale, causal, window, softcap, dtype):
    """(out, lse, dq, dk, dv) per sequence of [T, H, D] tensors in `dtype`
    (float32: the reference; the input type: the naive baseline)."""
    hq, hkv = q.shape[1], k.shape[1]
    out = torch.zeros(q.shape[0], hq, v.shape[2], device=q.device)
    lse = torch.full((hq, q.shape[0]), math.inf, device=q.device)
    dq, dk, dv = (torch.zeros_like(t, dtype=torch.float32) for t in (q, k, v))
    for b in range(len(cu_q) - 1):
        a, e, ka, ke = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        qs, ks, vs = (t.to(dtype).transpose(0, 1).detach().requires_grad_()
                      for t in (q[a:e], k[ka:ke], v[ka:ke]))
        o, l = attention(qs, ks, vs, scale, causal, window, softcap)
        gq, gk, gv = torch.autograd.grad(o, (qs, ks, vs), dout[a:e].to(dtype).transpose(0, 1),
                                         allow_unused=True)
        out[a:e] = o.detach().transpose(0, 1).float()
        lse[:, a:e] = l.detach()
        for dst, g_, lo, hi in ((dq, gq, a, e), (dk, gk, ka, ke), (dv, gv, ka, ke)):
            if g_ is not None:
                dst[lo:hi] = g_.transpose(0, 1).float()
    return out, lse, dq, dk, dv


def run_kernel(spec, kernels, q, k, v, out, lse, dout, cu_q, cu_k, max_q, max_k, scale,
               softcap, window):
    dq, dk, dv = (torch.full_like(t, float("nan")) for t in (q, k, v))
    hq, hkv = q.shape[1], k.shape[1]
    t = lambda x: x.transpose(0, 1)
    tensors = {"q": t(q), "k": t(k), "v": t(v), "out": t(out), "dout": t(dout), "lse": lse,
               "dq": t(dq), "dk": t(dk), "dv": t(dv), "cu_seqlens_q": cu_q,
               "cu_seqlens_k": cu_k}
    env = {"B1": cu_q.numel(), "Hq": hq, "Hkv": hkv, "Tq": q.shape[0], "Tk": k.shape[0],
           "D": q.shape[2], "Dv": v.shape[2], "G": hq // hkv, "max_seqlen_q": max_q,
           "max_seqlen_k": max_k}
    left, right = window if window else (-1, -1)
    scalars = {**M.score_scalars(scale, softcap), "window_left": left,
               "window_right": right, "max_seqlen_q": max_q, "max_seqlen_k": max_k}
    alloc = lambda name, shape, dt: torch.empty(shape, dtype=torch.float32, device="cuda")
    ws, preps = _backward.prepare(spec, kernels, tensors, env, alloc, scalars)
    launch = lambda: _backward.launch(preps, torch.cuda.current_stream().cuda_stream)
    launch()
    return (dq, dk, dv), launch, ws


def check(args, lens_q, lens_k, hq, hkv, d, dtype, causal=False, window=None, softcap=None,
          pad=0, seed=0):
    name = kernel_name(d, dtype, causal, window is not None, softcap is not None, args.chip)
    path = os.path.join(args.kernels, name + ".json")
    spec = M.load_manifest(path)
    kernels = _kernels.load_kernels(spec, 0)
    torch.manual_seed(seed)
    dt = DT[dtype]
    cu_q = [pad]
    cu_k = [pad]
    for a, b in zip(lens_q, lens_k):
        cu_q.append(cu_q[-1] + a)
        cu_k.append(cu_k[-1] + b)
    tq, tk = cu_q[-1] + pad, cu_k[-1] + pad
    q = torch.randn(tq, hq, d, device="cuda").to(dt)
    k = torch.randn(tk, hkv, d, device="cuda").to(dt)
    v = torch.randn(tk, hkv, d, device="cuda").to(dt)
    dout = torch.randn(tq, hq, d, device="cuda").to(dt)
    scale = 1 / math.sqrt(d)
    # (--cpu-ref: the references on the CPU, for racecheck, which cannot
    # follow cuBLAS's GEMMs.)
    on = (lambda t: t.cpu()) if args.cpu_ref else (lambda t: t)
    ref, low = ([x.cuda() for x in reference(on(q), on(k), on(v), on(dout), cu_q, cu_k, scale,
                                             causal, window, softcap, t)]
                for t in (torch.float32, dt))
    out = ref[0].to(dt)
    lse = ref[1].contiguous()
    # Rows of no sequence: NaN in out, dout and lse (a kernel reading them shows).
    for tt in (out, dout):
        tt[:cu_q[0]] = float("nan")
        tt[cu_q[-1]:] = float("nan")
    lse[:, :cu_q[0]] = float("nan")
    lse[:, cu_q[-1]:] = float("nan")
    cq = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    ck = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    grads, _, _ = run_kernel(spec, kernels, q, k, v, out, lse, dout, cq, ck,
                             max(lens_q + [0]), max(lens_k + [0]), scale, softcap, window)
    torch.cuda.synchronize()
    ok = True
    msgs = []
    for gname, g, r, l, cu in zip(("dq", "dk", "dv"), grads, ref[2:], low[2:],
                                  (cu_q, cu_k, cu_k)):
        g = g.float()
        inside = slice(cu[0], cu[-1])
        orphan = torch.cat([g[:cu[0]], g[cu[-1]:]])
        if torch.isnan(g).any():
            ok = False
            msgs.append(f"{gname}: {int(torch.isnan(g).sum())} NaN")
            continue
        if orphan.numel() and orphan.abs().max() != 0:
            ok = False
            msgs.append(f"{gname}: rows of no sequence not 0")
        err = (g[inside] - r[inside]).abs().max().item() if g[inside].numel() else 0.0
        base = (l[inside] - r[inside]).abs().max().item() if g[inside].numel() else 0.0
        if err > 3 * base + 1e-3:
            ok = False
        msgs.append(f"{gname} {err:.2e} (naive {base:.2e})")
    what = (f"{name} q{lens_q} k{lens_k} H{hq}/{hkv}" + (f" pad{pad}" if pad else "")
            + (f" window{window}" if window else "") + (f" softcap{softcap}" if softcap else ""))
    print(("PASS " if ok else "FAIL ") + what + ": " + ", ".join(msgs), flush=True)
    return ok


def bench(args):
    from bench_decode import timed
    import flashmlir

    g = torch.Generator().manual_seed(0)
    lens = torch.randint(128, 4097, (64,), generator=g).tolist()
    total, h, d, dt = sum(lens), 16, 128, torch.bfloat16
    mean = max(128, round(total / len(lens) / 128) * 128)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    cq = torch.tensor(cu, dtype=torch.int32, device="cuda")
    print(f"\n## packed backward: 64 sequences of 128..4096 (total {total}, mean "
          f"{total / 64:.0f}), H 16, D 128, bf16; dense backward on [64, {mean}]")
    print("| mask | varlen bwd TFLOP/s (ms) | dense bwd same tokens | ratio (bar 0.9) |")
    print("|---|---|---|---|")
    for causal in (False, True):
        name = kernel_name(d, "bf16", causal, False, False, args.chip)
        spec = M.load_manifest(os.path.join(args.kernels, name + ".json"))
        kernels = _kernels.load_kernels(spec, 0)
        q, k, v, dout = (torch.randn(total, h, d, device="cuda", dtype=dt) for _ in range(4))
        out, lse = flashmlir.attention_varlen(q, k, v, cq, cq, max(lens), causal=causal,
                                              return_lse=True)
        if lse.shape[0] != h:
            lse = lse.transpose(0, 1)
        _, launch, _ = run_kernel(spec, kernels, q, k, v, out, lse.contiguous(), dout, cq, cq,
                                  max(lens), max(lens), 1 / math.sqrt(d), None, None)

        def pairs(n):
            return n * (n + 1) // 2 if causal else n * n
        useful = 2.5 * 4 * d * h * sum(pairs(n) for n in lens)
        dense_flops = 2.5 * 4 * d * h * 64 * pairs(mean)
        same = [torch.randn(64, mean, h, d, device="cuda", dtype=dt, requires_grad=True)
                for _ in range(3)]
        o = flashmlir.attention(*same, causal=causal, layout="bshd")
        do = torch.randn_like(o)
        dense = lambda: torch.autograd.grad(o, same, do, retain_graph=True)
        res = {}
        for rnd in range(2):
            for nm, fn in ((("varlen", launch), ("dense", dense)) if rnd == 0
                           else (("dense", dense), ("varlen", launch))):
                ms = timed(fn, args.reps)
                res[nm] = min(res.get(nm, ms), ms)
        tv = useful / res["varlen"] / 1e9
        td = dense_flops / res["dense"] / 1e9
        print(f"| {'causal' if causal else 'full'} | {tv:.0f} ({res['varlen']:.2f}) | "
              f"{td:.0f} ({res['dense']:.2f}) | {tv / td:.2f} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", default="build/kernels")
    p.add_argument("--chip", default="sm_90a")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--cpu-ref", action="store_true")
    p.add_argument("--cases", type=int, default=None, help="the first N cases only")
    args = p.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    cases = [
        dict(lens_q=[17, 1, 0, 300, 64], lens_k=[33, 5, 7, 300, 64], hq=4, hkv=4, d=64,
             dtype="bf16"),
        dict(lens_q=[17, 1, 0, 300, 64], lens_k=[33, 5, 7, 300, 64], hq=8, hkv=2, d=64,
             dtype="f16", causal=True),
        dict(lens_q=[129, 1000, 2048, 3], lens_k=[129, 1000, 2048, 3], hq=8, hkv=1, d=128,
             dtype="bf16", causal=True, pad=37),
        dict(lens_q=[500, 77, 1200], lens_k=[700, 77, 900], hq=4, hkv=2, d=128, dtype="f16"),
        dict(lens_q=[500, 77, 1200], lens_k=[700, 77, 900], hq=4, hkv=2, d=128, dtype="bf16",
             window=(97, 31)),
        dict(lens_q=[500, 77, 1200], lens_k=[500, 77, 1300], hq=4, hkv=4, d=128,
             dtype="bf16", causal=True, window=(255, 0)),
        dict(lens_q=[333, 1, 640], lens_k=[333, 9, 640], hq=6, hkv=3, d=128, dtype="bf16",
             softcap=2.0, pad=5),
        dict(lens_q=[8192 // 4] * 4, lens_k=[8192 // 4] * 4, hq=16, hkv=16, d=64,
             dtype="bf16", causal=True),
    ]
    results = [check(args, **c) for c in cases[:args.cases]]
    print(f"{sum(results)} of {len(results)} passed", flush=True)
    if args.bench:
        bench(args)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
