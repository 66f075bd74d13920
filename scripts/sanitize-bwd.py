#!/usr/bin/env python3
"""One backward (bf16, Nq = 77, Nk = 131 or Nq = 200, Nk = 333, GQA 4:2)
for a focused compute-sanitizer run: sanitize-bwd.py D [causal] [det]
[big] [softcap] (softcap 30). Prints the max gradient errors against a
float64 CPU reference (a CUDA reference would run under the sanitizer
too)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402

d = int(sys.argv[1])
causal = "causal" in sys.argv[2:]
det = "det" in sys.argv[2:]
softcap = 30.0 if "softcap" in sys.argv[2:] else None
nq, nk = (200, 333) if "big" in sys.argv[2:] else (77, 131)
torch.manual_seed(0)
mk = lambda h, n: torch.randn(1, h, n, d, device="cuda", dtype=torch.bfloat16,
                              requires_grad=True)
q, k, v = mk(4, nq), mk(2, nk), mk(2, nk)
do = torch.randn(1, 4, nq, d, device="cuda", dtype=torch.bfloat16)
out = flashmlir.attention(q, k, v, causal=causal, deterministic=det, softcap=softcap)
grads = torch.autograd.grad(out, (q, k, v), do)
torch.cuda.synchronize()
mask = None
if causal:  # bottom-right aligned
    i = torch.arange(nq)[:, None]
    j = torch.arange(nk)[None, :]
    mask = j <= i + (nk - nq)
qd, kd, vd = (t.detach().double().cpu().requires_grad_() for t in (q, k, v))
kr, vr = kd.repeat_interleave(2, 1), vd.repeat_interleave(2, 1)
if softcap is None:
    ref = torch.nn.functional.scaled_dot_product_attention(qd, kr, vr, attn_mask=mask)
else:
    sc = qd @ kr.transpose(-1, -2) / d ** 0.5
    sc = softcap * torch.tanh(sc / softcap)
    if mask is not None:
        sc = sc.masked_fill(~mask, float("-inf"))
    ref = torch.softmax(sc, -1) @ vr
rgrads = torch.autograd.grad(ref, (qd, kd, vd), do.double().cpu())
print("max err", " ".join(f"{n} {(g.double().cpu() - r).abs().max().item():.3e}"
                          for n, g, r in zip(("dq", "dk", "dv"), grads, rgrads)))
