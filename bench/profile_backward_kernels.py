"""GPU time per kernel of one backward, FlashMLIR beside SDPA's cuDNN:
where the time outside the key-block kernel goes (preprocess, the
workspace's zero fill, the dQ conversion).

    python3 bench/profile_backward_kernels.py --headdims 64 128 \
        --seqlens 2048 8192 [--causal]

Each implementation runs `--iters` backwards under torch.profiler after a
warm-up; the table gives microseconds per backward for each kernel name
(the mean over the iterations) and the sum.

`--one-wave BLOCKS` instead keeps the key-block kernel's grid at BLOCKS
blocks of 128 keys (B = 1, H = BLOCKS * 128 / N): with BLOCKS at most the
multiprocessor count, each block's time is a fixed cost plus N / Br
iterations, so the times over N separate the two.

`--window W` profiles a causal sliding window of W keys (the query sees
keys q - W + 1 .. q) beside FlexAttention with the same mask (cuDNN's
SDPA has no window), where the per-key-block fixed costs dominate.
"""
import argparse
import collections

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import flashmlir


def sdpa_cudnn(q, k, v, causal):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=causal)


def flex_window(window):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    compiled = torch.compile(flex_attention, dynamic=False)
    masks = {}

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx >= 0) & (q_idx - kv_idx < window)

    def run(q, k, v, causal):
        key = (q.shape[2], k.shape[2])
        if key not in masks:
            masks[key] = create_block_mask(mask_mod, B=None, H=None, Q_LEN=key[0],
                                           KV_LEN=key[1], device="cuda")
        return compiled(q, k, v, block_mask=masks[key])
    return run


def per_kernel(attention, shape, causal, iters):
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    out = attention(q, k, v, causal)
    for _ in range(3):
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        torch.cuda.synchronize()
    times = collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times[ev.name[:60]] += ev.device_time / iters
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headdims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--one-wave", type=int, metavar="BLOCKS",
                    help="B = 1 and H = BLOCKS * 128 / N instead of 16k "
                    "tokens and H * D = 2048")
    ap.add_argument("--window", type=int, metavar="W",
                    help="a causal window of W keys, beside FlexAttention")
    args = ap.parse_args()
    impls = (("flashmlir", lambda q, k, v, c: flashmlir.attention(q, k, v, causal=c)),
             ("cudnn", sdpa_cudnn))
    if args.window:
        w = args.window
        args.causal = True
        impls = (("flashmlir", lambda q, k, v, c: flashmlir.attention(
            q, k, v, causal=True, window=(w - 1, 0))), ("flex", flex_window(w)))
    for d in args.headdims:
        for n in args.seqlens:
            shape = (16384 // n, 2048 // d, n, d)
            if args.one_wave:
                shape = (1, max(1, args.one_wave * 128 // n), n, d)
            print(f"== D={d} N={n} B={shape[0]} H={shape[1]} "
                  f"causal={args.causal} window={args.window}")
            for name, fn in impls:
                t = per_kernel(fn, shape, args.causal, args.iters)
                total = sum(t.values())
                print(f"  {name}: {total:8.1f} us per backward")
                for k, us in t.most_common(6):
                    print(f"    {us:8.1f} us {100 * us / total:5.1f}%  {k}")


if __name__ == "__main__":
    main()
