"""Small random Hugging Face Llama models for the transformers adapter's
tests (CPU and GPU): no download (configs built in code, random init,
HF_HUB_OFFLINE=1), and FlashAttention's rule applied to a whole model.

Rule, as test_gpu_attention.py's for one op: with `ref` the model in float32
with SDPA, `pt` the same weights in bfloat16 with SDPA and `ours` in
bfloat16 with attn_implementation="flashmlir",

    max|ours - ref| <= 2 * max|pt - ref| + atol * max|ref|

for the logits and for the gradient of every parameter of the attention
blocks (a loss of the logits back-propagated through the whole model).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

ATOL = 1e-3


def llama_config(hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, vocab=256,
                 **extra):
    """A random Llama; initializer_range 0.1 (not 0.02) gives logits with
    clear maxima, so greedy decoding is not decided by rounding noise."""
    from transformers import LlamaConfig
    extra.setdefault("initializer_range", 0.1)
    return LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=heads,
                       num_key_value_heads=kv_heads, head_dim=head_dim,
                       max_position_embeddings=4096, rms_norm_eps=1e-5, **extra)


def build(config, attn, dtype, device, state=None, cls=None):
    if cls is None:
        from transformers import LlamaForCausalLM as cls
    import copy
    torch.manual_seed(0)
    model = cls._from_config(copy.deepcopy(config), attn_implementation=attn, dtype=torch.float32)
    if state is not None:
        model.load_state_dict(state)
    return model.to(device=device, dtype=dtype)


def models(config, device, dtype=torch.bfloat16, cls=None):
    """ref (f32, sdpa), pt (dtype, sdpa), ours (dtype, flashmlir): same weights."""
    import flashmlir.integrations.transformers  # noqa: F401  (registers "flashmlir")
    ref = build(config, "sdpa", torch.float32, device, cls=cls)
    state = {k: v.detach().cpu() for k, v in ref.state_dict().items()}
    pt = build(config, "sdpa", dtype, device, state, cls=cls)
    ours = build(config, "flashmlir", dtype, device, state, cls=cls)
    return ref, pt, ours


def logits_and_grads(model, ids, labels_seed=1):
    model.zero_grad(set_to_none=True)
    out = model(ids).logits
    g = torch.Generator(device="cpu").manual_seed(labels_seed)
    w = torch.randn(out.shape, generator=g).to(out.device)
    (out.float() * w).sum().backward()
    grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters()
             if "self_attn" in n and p.grad is not None}
    return out.detach().float(), grads


def check_rule(ref, pt, ours, what, atol=ATOL):
    err = (ours - ref).abs().max().item()
    err_pt = (pt - ref).abs().max().item()
    mag = ref.abs().max().item()
    assert torch.isfinite(ours).all(), f"{what}: non-finite values"
    assert err <= 2 * err_pt + atol * mag, (
        f"{what}: max error {err:.3g} > 2 * {err_pt:.3g} (SDPA same precision) + "
        f"{atol} * {mag:.3g}")
    return err, err_pt


def compare(ref_m, pt_m, ours_m, ids):
    """Asserts the rule for logits and attention gradients; returns stats."""
    r, rg = logits_and_grads(ref_m, ids)
    p, pg = logits_and_grads(pt_m, ids)
    o, og = logits_and_grads(ours_m, ids)
    stats = {"logits": check_rule(r, p, o, "logits")}
    assert rg.keys() == og.keys() and rg
    for n in rg:
        stats[n] = check_rule(rg[n], pg[n], og[n], f"grad {n}")
    return stats


def greedy(model, ids, new_tokens):
    """Greedy generation with the KV cache: (sequences, per-step scores)."""
    with torch.no_grad():
        r = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                           do_sample=False, pad_token_id=0, output_scores=True,
                           return_dict_in_generate=True)
    return r.sequences, r.scores


def bf16_ulp(x):
    """The spacing of bfloat16 numbers at |x| (8 significant bits)."""
    return torch.exp2(torch.floor(torch.log2(x.abs().clamp_min(2.0 ** -126))) - 7)


def check_same_tokens(pt_model, ours_model, ids, new_tokens, ref_model=None, tie_ulps=4):
    """Ours generates SDPA's tokens. Where the two first differ, the step
    must be a near-tie that rounding can decide, and the comparison stops
    there. With the float32 `ref_model` as arbiter (given the common prefix)
    the two tokens' float32 scores may differ by at most 4x the largest error
    of SDPA's own bfloat16 scores at that step (FlashAttention's rule allows
    ours twice SDPA's error, on each of the two scores), plus `tie_ulps`
    bfloat16 spacings of the best score. Without an arbiter, SDPA's scores
    must put the two within `tie_ulps` spacings. Returns the number of steps
    compared."""
    a, sa = greedy(pt_model, ids, new_tokens)
    b, _ = greedy(ours_model, ids, new_tokens)
    n0 = ids.shape[1]
    for step in range(new_tokens):
        ta, tb = a[:, n0 + step], b[:, n0 + step]
        if torch.equal(ta, tb):
            continue
        pt_scores = sa[step].float()
        noise = torch.zeros(pt_scores.shape[0], device=pt_scores.device)
        scores = pt_scores
        if ref_model is not None:
            with torch.no_grad():
                scores = ref_model(a[:, :n0 + step]).logits[:, -1].float()
            noise = (pt_scores - scores).abs().max(-1).values
        diff = ta != tb
        gap = (scores.gather(1, ta[:, None]) - scores.gather(1, tb[:, None]))[:, 0].abs()[diff]
        tie = (4 * noise + tie_ulps * bf16_ulp(scores.max(-1).values))[diff]
        assert (gap <= tie).all(), (
            f"greedy token {step} differs from SDPA's ({tb.tolist()} vs {ta.tolist()}) where "
            f"the {'float32 reference' if ref_model is not None else 'SDPA'} scores them "
            f"{gap.tolist()} apart (> {tie.tolist()}: 4x SDPA's largest bf16 score error "
            f"{noise[diff].tolist()} + {tie_ulps} bf16 ulps of the best score)")
        return step
    return new_tokens
