"""A few backward passes, for a profiler to attach to the key-block kernel:

    ncu --clock-control none --kernel-name fa_bwd_kernel --launch-skip 2 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        python3 bench/profile_backward.py --head-dim 128 --seqlen 4096
"""
import argparse

import torch

import flashmlir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--passes", type=int, default=4)
    args = ap.parse_args()
    b, h = 16384 // args.seqlen, 2048 // args.head_dim
    shape = (b, h, args.seqlen, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    out = flashmlir.attention(q, k, v, causal=args.causal)
    for _ in range(args.passes):
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
