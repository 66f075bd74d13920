"""A few launches of one forward kernel, for a profiler to attach to:

    ncu --clock-control none --kernel-name fa_fwd_kernel --launch-skip 2 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        python3 bench/profile_forward.py --head-dim 128 --seqlen 4096
"""
import argparse

import torch

import flashmlir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--launches", type=int, default=4)
    args = ap.parse_args()
    b, h = 16384 // args.seqlen, 2048 // args.head_dim
    shape = (b, h, args.seqlen, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(args.launches):
        flashmlir.attention(q, k, v, causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
