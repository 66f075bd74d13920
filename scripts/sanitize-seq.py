#!/usr/bin/env python3
"""One packed-sequence and four paged launches (bf16, D = 128, GQA 8:2,
odd lengths) for a focused compute-sanitizer run, checked against the
package's CPU reference of the same entries (a CUDA reference would run
under the sanitizer too): sanitize-seq.py."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402

torch.manual_seed(0)
dev, dt = "cuda", torch.bfloat16


def err(a, b):
    return (a.float().cpu() - b.float()).abs().max().item()


# Packed: the warp-specialized grid kernel (TMA from each sequence's rows).
lq, lk = [77, 1, 0, 300], [131, 9, 5, 300]
cq = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32)
ck = torch.tensor([0] + torch.tensor(lk).cumsum(0).tolist(), dtype=torch.int32)
q = torch.randn(sum(lq), 8, 128, dtype=dt)
k = torch.randn(sum(lk), 2, 128, dtype=dt)
v = torch.randn(sum(lk), 2, 128, dtype=dt)
for opts in ({"causal": True}, {"window": (97, 31)}):
    out = flashmlir.attention_varlen(q.to(dev), k.to(dev), v.to(dev), cq.to(dev), ck.to(dev),
                                     max(lq), **opts)
    torch.cuda.synchronize()
    ref = flashmlir.attention_varlen(q, k, v, cq, ck, max(lq), **opts)
    print("varlen", opts, "max err", err(out, ref))

# Paged: 64- and 16-key pages (blocks within a page, blocks spanning pages),
# shuffled; a prefill-like call and a split decode. The table is as narrow as
# the longest cache allows and its unused entries point far outside the pool:
# a read of either is an error.
lens = torch.tensor([1000, 1, 600], dtype=torch.int32)
b = len(lens)
for s in (64, 16):
    width = -(-int(lens.max()) // s)
    used = [-(-int(n) // s) for n in lens]
    pages = sum(used) + 2
    kc = torch.randn(pages, s, 2, 128, dtype=dt)
    vc = torch.randn(pages, s, 2, 128, dtype=dt)
    perm = torch.randperm(pages).tolist()
    table = torch.full((b, width), 1 << 30, dtype=torch.int32)
    for i, n in enumerate(used):
        table[i, :n] = torch.tensor([perm.pop() for _ in range(n)], dtype=torch.int32)
    for nq, opts in ((40, {"causal": True}), (1, {"causal": True})):
        qp = torch.randn(b, nq, 8, 128, dtype=dt)
        out = flashmlir.attention_with_kvcache(qp.to(dev), kc.to(dev), vc.to(dev), lens.to(dev),
                                               table.to(dev), **opts)
        torch.cuda.synchronize()
        ref = flashmlir.attention_with_kvcache(qp, kc, vc, lens, table, **opts)
        print("paged", s, "nq", nq, opts, "max err", err(out, ref))
