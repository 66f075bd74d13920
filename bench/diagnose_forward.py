"""Structured inputs that localize a wrong forward kernel.

    PYTHONPATH=python python3 bench/diagnose_forward.py

Each probe isolates one part of the kernel:
  q = 0          -> P uniform: out = mean of the visible v rows, lse = log(n)
                    (checks P V, the row sum and the normalization)
  v = 1          -> out = 1 exactly (normalization only)
  v = one-hot(j) -> out[:, c] = P[:, j] for one key column: reads P directly
  random         -> the FlashAttention error rule
"""
import math
import sys

import torch

import flashmlir


def ref(q, k, v, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        nq, nk = s.shape[-2:]
        i = torch.arange(nq, device=s.device)[:, None]
        j = torch.arange(nk, device=s.device)[None, :]
        s = s.masked_fill(j > i + nk - nq, float("-inf"))
    return torch.softmax(s, -1) @ v.float(), torch.logsumexp(s, -1)


def main():
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        for d in (64, 128):
            for causal in (False, True):
                for n in (128, 256):
                    shape = (1, 1, n, d)
                    rnd = lambda: torch.randn(shape, device="cuda", dtype=dtype)
                    probes = {
                        "q=0": (torch.zeros(shape, device="cuda", dtype=dtype), rnd(), rnd()),
                        "v=1": (rnd(), rnd(), torch.ones(shape, device="cuda", dtype=dtype)),
                        "k=0": (rnd(), torch.zeros(shape, device="cuda", dtype=dtype), rnd()),
                        "random": (rnd(), rnd(), rnd()),
                    }
                    for name, (q, k, v) in probes.items():
                        o, l = flashmlir.attention(q, k, v, causal=causal, return_lse=True)
                        ro, rl = ref(q, k, v, causal)
                        eo = (o.float() - ro).abs().max().item()
                        el = (l - rl).abs().max().item()
                        bad = (o.float() - ro).abs().amax(-1)[0, 0] > 2e-2
                        rows = bad.nonzero().flatten().tolist()
                        print(f"{str(dtype)[6:]:8} d={d:3} causal={int(causal)} n={n} {name:7}"
                              f" out_err={eo:9.3g} lse_err={el:9.3g}"
                              f" bad_rows={len(rows):4} first={rows[:6]}")
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
