#!/usr/bin/env python3
"""The decode of bench_sequences.py's paged cell (B 8, Hq/Hkv 32/8, D 128,
bf16, one query, causal) for an Nsight Compute profile: --impl dense (the
contiguous [B, Hkv, N, D] split-KV decode), identity (a contiguous cache
through attention_with_kvcache: the paged kernel, pages in order) or paged
(pages of --page-size keys, shuffled). --launches calls."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--impl", choices=("dense", "identity", "paged"), required=True)
p.add_argument("--nk", type=int, default=4096)
p.add_argument("--page-size", type=int, default=256)
p.add_argument("--launches", type=int, default=4)
a = p.parse_args()
b, hq, hkv, d, n, dt = 8, 32, 8, 128, a.nk, torch.bfloat16
torch.manual_seed(0)
q = torch.randn(b, 1, hq, d, device="cuda", dtype=dt)
kcont = torch.randn(b, n, hkv, d, device="cuda", dtype=dt)
vcont = torch.randn(b, n, hkv, d, device="cuda", dtype=dt)
sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
if a.impl == "dense":
    qd, kd, vd = (t.transpose(1, 2).contiguous() for t in (q, kcont, vcont))
    fn = lambda: flashmlir.attention(qd, kd, vd, causal=True)
elif a.impl == "identity":
    fn = lambda: flashmlir.attention_with_kvcache(q, kcont, vcont, sl, causal=True)
else:
    s = a.page_size
    pages = b * n // s
    perm = torch.randperm(pages, device="cuda")
    kc = torch.empty(pages, s, hkv, d, device="cuda", dtype=dt)
    vc = torch.empty_like(kc)
    kc[perm] = kcont.reshape(pages, s, hkv, d)
    vc[perm] = vcont.reshape(pages, s, hkv, d)
    table = perm.view(b, n // s).to(torch.int32).contiguous()
    fn = lambda: flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=True)
for _ in range(a.launches):
    fn()
torch.cuda.synchronize()
print("ok")
