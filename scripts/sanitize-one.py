#!/usr/bin/env python3
"""One forward launch (bf16, Nq = 77, Nk = 131, GQA 4:2) for a focused
compute-sanitizer run: sanitize-one.py D [causal]. With FLASHMLIR_SMS=2 a
persistent kernel's two blocks loop over the four tiles."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashmlir  # noqa: E402

d = int(sys.argv[1])
causal = len(sys.argv) > 2 and sys.argv[2] == "causal"
torch.manual_seed(0)
q = torch.randn(1, 4, 77, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 2, 131, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, 2, 131, d, device="cuda", dtype=torch.bfloat16)
out = flashmlir.attention(q, k, v, causal=causal)
torch.cuda.synchronize()
# flashmlir's causal mask is bottom-right aligned (SDPA's is_causal is
# top-left): query i sees keys j <= i + Nk - Nq.
mask = None
if causal:
    i = torch.arange(77, device="cuda")[:, None]
    j = torch.arange(131, device="cuda")[None, :]
    mask = j <= i + (131 - 77)
# The reference on the CPU (float64): a CUDA reference kernel would run
# under the sanitizer too (racecheck reports PyTorch's memory-efficient
# attention kernel at D = 128).
ref = torch.nn.functional.scaled_dot_product_attention(
    q.double().cpu(), k.double().cpu().repeat_interleave(2, 1),
    v.double().cpu().repeat_interleave(2, 1),
    attn_mask=None if mask is None else mask.cpu())
print("max err", (out.double().cpu() - ref).abs().max().item())
