"""Quick gradient check of flashmlir's backward against fp32 autograd on a
few shapes (a smoke test; python/tests/test_gpu_backward.py is the suite).

    PYTHONPATH=python python3 bench/check_backward.py
"""
import math
import sys

import torch

import flashmlir


def ref(q, k, v, causal, scale):
    qf, kf, vf = (t.float() for t in (q, k, v))
    g = qf.shape[1] // kf.shape[1]
    kf = kf.repeat_interleave(g, 1)
    vf = vf.repeat_interleave(g, 1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        nq, nk = s.shape[-2:]
        i = torch.arange(nq, device=s.device)[:, None]
        j = torch.arange(nk, device=s.device)[None, :]
        s = s.masked_fill(j > i + nk - nq, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ vf


def check(B, Hq, Hkv, Nq, Nk, D, dtype, causal, deterministic=False):
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(B, Hq, Nq, D, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(B, Hkv, Nk, D, device=dev, dtype=dtype, requires_grad=True)
    v = torch.randn(B, Hkv, Nk, D, device=dev, dtype=dtype, requires_grad=True)
    do = torch.randn(B, Hq, Nq, D, device=dev, dtype=dtype)
    scale = 1 / math.sqrt(D)
    out = flashmlir.attention(q, k, v, causal=causal, deterministic=deterministic)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)
    qr, kr, vr = (t.detach().float().requires_grad_() for t in (q, k, v))
    o32 = ref(qr, kr, vr, causal, scale)
    rq, rk, rv = torch.autograd.grad(o32, (qr, kr, vr), do.float())
    qh, kh, vh = (t.detach().clone().requires_grad_() for t in (q, k, v))
    oh = ref(qh, kh, vh, causal, scale).to(dtype)
    hq, hk, hv = torch.autograd.grad(oh, (qh, kh, vh), do)
    ok = True
    msg = []
    for name, ours, r, h in (("dq", dq, rq, hq), ("dk", dk, rk, hk), ("dv", dv, rv, hv)):
        e = (ours.float() - r).abs().max().item()
        eh = (h.float() - r).abs().max().item()
        good = math.isfinite(e) and e <= 2 * eh + 1e-3 * max(1.0, r.abs().max().item())
        ok &= good
        msg.append(f"{name} {e:.2e} (torch {eh:.2e}){'' if good else ' FAIL'}")
    print(f"B{B} H{Hq}/{Hkv} Nq{Nq} Nk{Nk} D{D} {dtype} causal={causal} det={deterministic}: "
          + ", ".join(msg), flush=True)
    return ok


def main():
    if "--bench" in sys.argv:
        bench()
        return 0
    cases = [
        (1, 2, 2, 128, 128, 64, torch.bfloat16, False),
        (1, 2, 2, 128, 128, 128, torch.bfloat16, False),
        (2, 4, 2, 113, 1000, 64, torch.float16, False),
        (2, 4, 2, 1000, 113, 128, torch.float16, True),
        (1, 4, 1, 4097, 17, 128, torch.bfloat16, True),
        (1, 2, 2, 500, 700, 128, torch.bfloat16, True, True),
        (1, 2, 2, 300, 300, 64, torch.float16, False, True),
    ]
    fails = sum(not check(*c) for c in cases)
    print(f"{len(cases) - fails}/{len(cases)} ok")
    return 1 if fails else 0


def bench():
    """Backward-only TFLOP/s (FA convention: 2.5 x 4 B H N^2 D, halved for
    causal) of ours (fast and deterministic) and torch SDPA's flash and cuDNN
    back ends, B N = 16k tokens, H D = 2048: two rounds, the second in the
    reverse order, each the median of triton's do_bench; the mean of the
    two. `--headdims 64 128 --seqlens 1024 ...` pick the shapes."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    import torch.nn.functional as F

    def arg(name, default):
        if name not in sys.argv:
            return default
        at = sys.argv.index(name) + 1
        vals = []
        while at < len(sys.argv) and not sys.argv[at].startswith("--"):
            vals.append(int(sys.argv[at]))
            at += 1
        return vals
    names = ("ours", "ours_det", "fa2", "cudnn")
    for D in arg("--headdims", [64, 128]):
        for causal in (False, True):
            for N in arg("--seqlens", [1024, 4096, 16384]):
                B, H = 16384 // N, 2048 // D
                mk = lambda: torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16,
                                         requires_grad=True)
                q, k, v = mk(), mk(), mk()
                do = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
                flops = 2.5 * 4 * B * H * N * N * D / (2 if causal else 1)
                fns = {}
                for name in names:
                    try:
                        if name.startswith("ours"):
                            out = flashmlir.attention(q, k, v, causal=causal,
                                                      deterministic=name == "ours_det")
                        else:
                            be = (SDPBackend.FLASH_ATTENTION if name == "fa2"
                                  else SDPBackend.CUDNN_ATTENTION)
                            with sdpa_kernel(be):
                                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    except flashmlir.KernelNotFoundError:
                        continue
                    fns[name] = (lambda o: lambda: torch.autograd.grad(
                        o, (q, k, v), do, retain_graph=True))(out)
                times = {name: [] for name in fns}
                for order in (list(fns), list(fns)[::-1]):
                    for name in order:
                        times[name].append(do_bench(fns[name], warmup=5, rep=40))
                res = {name: flops / (sum(t) / len(t)) / 1e9 for name, t in times.items()}
                nan = float("nan")
                ratio = lambda a, b: res.get(a, nan) / res.get(b, nan)
                print(f"D{D} causal={int(causal)} N{N:6d}: " + "  ".join(
                    f"{k} {v:6.1f}" for k, v in res.items())
                    + f"  det/fast {ratio('ours_det', 'ours'):.3f}"
                    + f"  ours/fa2 {ratio('ours', 'fa2'):.2f}  ours/cudnn {ratio('ours', 'cudnn'):.2f}"
                    + f"  det/cudnn {ratio('ours_det', 'cudnn'):.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
