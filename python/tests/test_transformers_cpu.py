"""The Hugging Face transformers adapter (flashmlir.integrations.transformers)
on tiny random models on the CPU (the PyTorch reference path; needs torch and
transformers, no download): logits and gradients against SDPA under
FlashAttention's rule, greedy generation with the KV cache, GQA, the
sliding-window mapping, and the SDPA fallback for masks the kernels do not
take (or an error with FLASHMLIR_HF_STRICT=1)."""

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_llama as H  # noqa: E402
import flashmlir  # noqa: E402
from flashmlir.integrations import transformers as fht  # noqa: E402


@pytest.fixture(scope="module")
def llama():
    return H.models(H.llama_config(), "cpu")


def test_registered():
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.utils.generic import is_flash_attention_requested
    assert AttentionInterface()["flashmlir"] is fht.attention_forward
    assert ALL_MASK_ATTENTION_FUNCTIONS["flashmlir"] is fht.mask_function
    # "flashmlir" is not taken for a FlashAttention variant ...
    assert not is_flash_attention_requested(requested_attention_implementation="flashmlir")
    # ... and the real ones still are
    assert is_flash_attention_requested(requested_attention_implementation="flash_attention_2")
    assert not is_flash_attention_requested(requested_attention_implementation="sdpa")


def test_logits_and_gradients_match_sdpa(llama):
    ref, pt, ours = llama
    ids = torch.randint(0, 256, (2, 48), generator=torch.Generator().manual_seed(0))
    fht.calls.clear()
    H.compare(ref, pt, ours, ids)
    assert fht.calls == {"flashmlir": 2}   # forward of each layer, no fallback


def test_greedy_generation_with_kv_cache(llama):
    _, pt, ours = llama
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    fht.calls.clear()
    assert H.check_same_tokens(pt, ours, ids, 10) == 10
    assert fht.calls["flashmlir"] == 2 * 10 and len(fht.calls) == 1  # decode: Nq=1 vs cache


def test_padding_falls_back_to_sdpa(llama, monkeypatch):
    _, pt, ours = llama
    ids = torch.randint(0, 256, (2, 20), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[1, :6] = 0
    fht.calls.clear()
    with torch.no_grad(), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = pt(ids, attention_mask=mask).logits
        b = ours(ids, attention_mask=mask).logits
    assert torch.equal(a, b)
    assert list(fht.calls) == ["sdpa: an explicit attention mask (padding, packing or a "
                               "custom mask)"]
    monkeypatch.setenv(fht.STRICT_ENV, "1")
    with pytest.raises(flashmlir.UnsupportedError, match="explicit attention mask"):
        ours(ids, attention_mask=mask)


def test_sliding_window_model():
    from transformers import MistralConfig, MistralForCausalLM
    cfg = MistralConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=32, sliding_window=9, max_position_embeddings=1024)
    ref, pt, ours = H.models(cfg, "cpu", cls=MistralForCausalLM)
    ids = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(3))
    fht.calls.clear()
    H.compare(ref, pt, ours, ids)
    assert fht.calls == {"flashmlir": 2}
    with torch.no_grad():   # the window matters here: a full-causal model differs
        full = H.build(cfg.__class__(**{**cfg.to_dict(), "sliding_window": None}), "flashmlir",
                       torch.bfloat16, "cpu", ours.state_dict(), cls=MistralForCausalLM)
        assert not torch.equal(full(ids).logits, ours(ids).logits)


def test_attention_function_direct():
    """The attention function alone: [B, H, N, D] views in, [B, N, H, D] out."""
    mod = torch.nn.Module()
    mod.is_causal = True
    q = torch.randn(2, 4, 10, 32).to(torch.bfloat16)
    k = torch.randn(2, 2, 16, 32).to(torch.bfloat16)
    out, w = fht.attention_forward(mod, q, k, k, None, scaling=0.25)
    assert w is None and out.shape == (2, 10, 4, 32) and out.is_contiguous()
    want = flashmlir.attention(q, k, k, causal=True, scale=0.25).transpose(1, 2)
    assert torch.equal(out, want)
    out, _ = fht.attention_forward(mod, q, k, k, None, sliding_window=4, softcap=5.0)
    want = flashmlir.attention(q, k, k, causal=True, window=(3, 0), softcap=5.0)
    assert torch.equal(out, want.transpose(1, 2))
