"""GPU test of the Hugging Face transformers adapter: a small random Llama
(GQA 8:2, head_dim 128, bf16, no download) with attn_implementation
"flashmlir" against the same model with SDPA, under FlashAttention's rule
(hf_llama.py: max|ours - f32 ref| <= 2 * max|SDPA bf16 - f32 ref| + 1e-3 *
max|ref|) for the logits and every attention parameter's gradient, and
greedy generation with the KV cache giving SDPA's tokens. FLASHMLIR_HF_STRICT=1
is set, so a call the kernels cannot take fails instead of falling back.
"""

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
pytest.importorskip("transformers")

import flashmlir  # noqa: E402
import hf_llama as H  # noqa: E402
from flashmlir.integrations import transformers as fht  # noqa: E402
from gpu_ref import real_registry, skip_missing  # noqa: E402,F401 (fixture)


@pytest.fixture(scope="module")
def llama():
    os.environ[fht.STRICT_ENV] = "1"
    cfg = H.llama_config(hidden=1024, layers=2, heads=8, kv_heads=2, head_dim=128, vocab=1024)
    yield H.models(cfg, "cuda")
    os.environ.pop(fht.STRICT_ENV, None)


@pytest.mark.parametrize("batch,n", [(2, 256), (1, 1000)])
def test_logits_and_gradients(llama, batch, n):
    ref, pt, ours = llama
    ids = torch.randint(0, 1024, (batch, n), device="cuda",
                        generator=torch.Generator(device="cuda").manual_seed(n))
    fht.calls.clear()
    try:
        stats = H.compare(ref, pt, ours, ids)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    assert fht.calls == {"flashmlir": 2}
    print({k: f"{e:.3g} (sdpa {p:.3g})" for k, (e, p) in list(stats.items())[:3]})


def test_greedy_generation_with_kv_cache(llama):
    ref, pt, ours = llama
    ids = torch.randint(0, 1024, (2, 64), device="cuda",
                        generator=torch.Generator(device="cuda").manual_seed(7))
    fht.calls.clear()
    try:
        # Same tokens up to a divergence the float32 model calls a tie.
        steps = H.check_same_tokens(pt, ours, ids, 32, ref_model=ref)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    print(f"same greedy tokens for {steps} of 32 steps")
    assert set(fht.calls) == {"flashmlir"}
