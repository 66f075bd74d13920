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


if __name__ == "__main__":
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
    sys.exit(1 if fails else 0)
