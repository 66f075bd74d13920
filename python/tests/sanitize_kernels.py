#!/usr/bin/env python3
"""One launch of each kind of kernel at odd shapes, for compute-sanitizer
(scripts/sanitize-gpu.sh runs it under memcheck, racecheck, initcheck and
synccheck): the forward (wgmma on sm_90a with full and partly used panels,
mma.sync with FLASHMLIR_CHIP=sm_80), the fast backward (dQ by atomics), the
deterministic backward (its dQ kernel), and the backward of large head dims:
on sm_90a two warpgroups share each 64 keys (D = 192/128 with dQ staged in
shared memory, D = 256 with dQ reduced from the fragments), on sm_80 the key
blocks are split over the head dim (dkv_split). Shapes have tails in every dimension
(Nq = 77, Nk = 131, GQA 4:2); every output is checked to be finite, so a
kernel that leaves memory unwritten fails here too.

    compute-sanitizer --tool memcheck python3 python/tests/sanitize_kernels.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import flashmlir  # noqa: E402

CASES = [
    # (name, D, Dv, options, backward, deterministic)
    ("forward d128", 128, 128, {}, False, False),
    ("forward d96 causal", 96, 96, {"causal": True}, False, False),
    ("forward d192/128 causal", 192, 128, {"causal": True}, False, False),
    ("backward d128 causal", 128, 128, {"causal": True}, True, False),
    ("backward d64 deterministic", 64, 64, {"causal": True}, True, True),
    ("backward d256 (sm_90a: pair, unstaged dQ; sm_80: dkv split)", 256, 256, {}, True,
     False),
    ("backward d192/128 (warpgroup pair)", 192, 128, {"causal": True}, True, False),
]


def main():
    torch.manual_seed(0)
    dev = "cuda"
    failed = 0
    for name, d, dv, opts, backward, det in CASES:
        q = torch.randn(1, 4, 77, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, 2, 131, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(1, 2, 131, dv, device=dev, dtype=torch.bfloat16)
        try:
            if backward:
                qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
                out = flashmlir.attention(qq, kk, vv, deterministic=det, **opts)
                grads = torch.autograd.grad(out, (qq, kk, vv), torch.randn_like(out))
                results = (out, *grads)
            else:
                out, lse = flashmlir.attention(q, k, v, return_lse=True, **opts)
                results = (out, lse)
            torch.cuda.synchronize()
        except flashmlir.KernelNotFoundError as exc:
            print(f"{name}: no kernel ({str(exc).splitlines()[0]})")
            failed += 1
            continue
        bad = [i for i, t in enumerate(results)
               if not torch.isfinite(t).all() and not (not backward and i == 1)]
        # lse may be +inf on rows that see no key; out and gradients never.
        if not backward and torch.isnan(results[1]).any():
            bad.append(1)
        print(f"{name}: {'ok' if not bad else 'NOT FINITE in results ' + str(bad)}")
        failed += bool(bad)
    print(f"sanitize_kernels: {len(CASES) - failed} of {len(CASES)} ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
