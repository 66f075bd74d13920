"""A few forward or backward passes, for a profiler to attach to one kernel:

    ncu --clock-control none --kernel-name fa_fwd_kernel --launch-skip 2 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        python3 bench/profile_attention.py --head-dim 128 --seqlen 4096
    ncu ... --kernel-name fa_bwd_kernel ... \
        python3 bench/profile_attention.py --backward --head-dim 128 --seqlen 4096

--impl cudnn / flash runs SDPA's cuDNN or FlashAttention-2 back end instead,
for the same profile of the kernel we compare with (see
scripts/device-ncu.sh).
"""
import argparse

import torch

import flashmlir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--backward", action="store_true",
                    help="run backward passes (one forward before them)")
    ap.add_argument("--kv-heads", type=int, default=0,
                    help="grouped-query attention: K and V with this many "
                    "heads (default: as many as Q)")
    ap.add_argument("--launches", type=int, default=4)
    ap.add_argument("--impl", choices=["flashmlir", "cudnn", "flash"],
                    default="flashmlir")
    args = ap.parse_args()
    if args.impl == "flashmlir":
        attention = flashmlir.attention
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION,
                   "flash": SDPBackend.FLASH_ATTENTION}[args.impl]

        def attention(q, k, v, causal):
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal,
                    enable_gqa=k.shape[1] != q.shape[1])
    b, h = 16384 // args.seqlen, 2048 // args.head_dim
    shape = (b, h, args.seqlen, args.head_dim)
    kv_shape = (b, args.kv_heads or h, args.seqlen, args.head_dim)
    q, k, v = (torch.randn(s, device="cuda", dtype=torch.bfloat16,
                           requires_grad=args.backward)
               for s in (shape, kv_shape, kv_shape))
    if args.backward:
        dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        out = attention(q, k, v, causal=args.causal)
        for _ in range(args.launches):
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    else:
        for _ in range(args.launches):
            attention(q, k, v, causal=args.causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
