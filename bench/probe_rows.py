"""Which probabilities land in which output row: V = identity, so
out[i, j] = P[i, j] / l_i. Prints kernel vs reference rows.

    PYTHONPATH=python python3 bench/probe_rows.py
"""
import math
import torch
import flashmlir

torch.set_printoptions(precision=3, linewidth=200, sci_mode=False)
for causal in (True, False):
    n, d = 16, 64
    q = torch.randn(1, 1, n, d, device="cuda", dtype=torch.float16) * (0 if causal else 1)
    k = torch.randn(1, 1, n, d, device="cuda", dtype=torch.float16)
    v = torch.zeros(1, 1, n, d, device="cuda", dtype=torch.float16)
    for j in range(n):
        v[0, 0, j, j] = 1
    o = flashmlir.attention(q, k, v, causal=causal)
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, device="cuda").triu(1).bool(), float("-inf"))
    r = torch.softmax(s, -1) @ v.float()
    print("causal", causal)
    for i in (0, 1, 7, 8, 9, 15):
        print(i, "got", o[0, 0, i, :16].float().cpu())
        print(i, "ref", r[0, 0, i, :16].cpu())
