#!/usr/bin/env python3
"""Training-step time of a small random Hugging Face Llama with
attn_implementation "flashmlir" against "sdpa", in one run.

Model (random init, no download, HF_HUB_OFFLINE=1): GQA 16:4 heads,
head_dim 128 (hidden 2048), --layers decoder layers (default 4),
intermediate 5632, vocab 32000, bf16 weights; batch of --tokens tokens
(default 8192: --batch sequences of tokens/batch). One step: forward,
cross-entropy loss on random labels, backward, AdamW step, zero_grad.
Each implementation: --warmup steps, then the median of --steps timed
steps (CUDA-synchronized wall time); the two are timed alternately, in
--rounds rounds. Prints step time, tokens/s and flashmlir/sdpa, and also
the forward+backward of the attention alone of one layer's shape.

    PYTHONPATH=python python3 bench/bench_llama_step.py [--layers 4 --tokens 8192]
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="write the results here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"bench_llama_step: SKIP: {exc}")
        return 0
    if not torch.cuda.is_available():
        print("bench_llama_step: SKIP: no CUDA device")
        return 0
    import flashmlir
    import flashmlir.integrations.transformers as fht
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden = a.heads * a.head_dim
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=hidden, intermediate_size=5632,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                      max_position_embeddings=max(4096, a.tokens))
    n = a.tokens // a.batch
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, a.vocab, (a.batch, n), device="cuda", generator=g)
    labels = torch.randint(0, a.vocab, (a.batch, n), device="cuda", generator=g)
    os.environ[fht.STRICT_ENV] = "1"   # no silent SDPA fallback in the flashmlir model

    models, opts = {}, {}
    for impl in ("flashmlir", "sdpa"):
        import copy
        torch.manual_seed(0)
        m = LlamaForCausalLM._from_config(copy.deepcopy(cfg), attn_implementation=impl,
                                          dtype=torch.bfloat16).cuda()
        m.train()
        models[impl] = m
        opts[impl] = torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True)

    def step(impl):
        m, o = models[impl], opts[impl]
        loss = m(input_ids=ids, labels=labels).loss
        loss.backward()
        o.step()
        o.zero_grad(set_to_none=True)
        return loss

    def timed(impl, steps):
        out = []
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(impl)
            torch.cuda.synchronize()
            out.append(time.perf_counter() - t0)
        return out

    try:
        for impl in models:
            timed(impl, a.warmup)
    except flashmlir.KernelNotFoundError as exc:
        print(f"bench_llama_step: SKIP: no kernel: {str(exc).splitlines()[0]}")
        return 0
    samples = {impl: [] for impl in models}
    for r in range(a.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(list(models)))
        for impl in order:
            samples[impl] += timed(impl, a.steps)
    res = {impl: statistics.median(s) for impl, s in samples.items()}

    # the attention of one layer alone, forward + backward
    q = torch.randn(a.batch, n, a.heads, a.head_dim, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    k = torch.randn(a.batch, n, a.kv_heads, a.head_dim, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    F = torch.nn.functional

    def attn(impl):
        if impl == "flashmlir":
            o = flashmlir.attention(q, k, v, causal=True, layout="bshd")
        else:
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True,
                                               enable_gqa=True).transpose(1, 2)
        torch.autograd.grad(o, (q, k, v), torch.ones_like(o))

    att = {}
    for impl in ("flashmlir", "sdpa"):
        for _ in range(3):
            attn(impl)
        ts = []
        for _ in range(10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            attn(impl)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        att[impl] = statistics.median(ts)

    params = sum(p.numel() for p in models["sdpa"].parameters())
    print(f"Llama training step: {a.layers} layers, hidden {hidden}, GQA {a.heads}:{a.kv_heads}, "
          f"head_dim {a.head_dim}, {params / 1e6:.0f}M params, {a.batch} x {n} tokens, bf16, "
          f"AdamW | {torch.cuda.get_device_name()} | torch {torch.__version__} | "
          f"transformers {transformers.__version__}")
    for impl in ("flashmlir", "sdpa"):
        print(f"  {impl:<10} step {res[impl] * 1e3:8.2f} ms  {a.tokens / res[impl]:10.0f} tokens/s"
              f"   attention fwd+bwd (one layer) {att[impl] * 1e3:7.3f} ms")
    ratio = res["flashmlir"] / res["sdpa"]
    print(f"  step time flashmlir / sdpa = {ratio:.3f} (below 1: flashmlir faster); "
          f"attention alone {att['flashmlir'] / att['sdpa']:.3f}")
    print(f"  adapter calls: {dict(fht.calls)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "step_s": res, "samples_s": samples,
                       "attention_s": att, "ratio": ratio,
                       "device": torch.cuda.get_device_name()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
