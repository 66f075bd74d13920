"""GPU tests of decoding through the split-KV kernels (fa-split-kv): few
queries per sequence against long caches, where flashmlir.attention takes
the split kernels (the key range of each query block in chunks run in
parallel, merged by their LSEs) and, for one query with grouped heads,
packs the group's heads into the rows of one query block.

Accuracy: FlashAttention's rule (gpu_ref.check), outputs NaN-poisoned
before the launch. Each test also checks that the split kernels served
the call (so a missing split kernel cannot pass as the plain one).
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _interface  # noqa: E402

import gpu_ref as R  # noqa: E402
from gpu_ref import DTYPES, real_registry  # noqa: E402,F401 (fixture)


def _split_spec(q, k, v, causal):
    plan = _interface._forward_plan(q, k, v, causal, None, None, None, "bhsd", False)
    return plan.split.spec if plan is not None and plan.split is not None else None


def _check(b, hq, hkv, nq, nk, d, dtype, causal, seed):
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, d, DTYPES[dtype], "bhsd", seed=seed)
    spec = _split_spec(q, k, v, causal)
    if spec is None:
        if R.REQUIRE:
            pytest.fail(f"no split-KV kernel served {dtype} D={d} causal={causal}")
        pytest.skip("no split-KV kernel for this call")
    out, lse = R.forward_poisoned(q, k, v, causal=causal)
    R.check(out, lse, q, k, v, R.canonical(causal, None),
            what=f"{spec.name} B={b} H={hq}/{hkv} Nq={nq} Nk={nk}")
    return spec


@pytest.mark.parametrize("nk", [1, 127, 1000, 4096, 16411])
@pytest.mark.parametrize("nq", [1, 3, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hkv", [(32, 8), (8, 1), (4, 4)], ids=["gqa", "mqa", "mha"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_decode(dtype, d, hq, hkv, causal, nq, nk):
    b = 2
    spec = _check(b, hq, hkv, nq, nk, d, dtype, causal,
                  R.seed_for("decode", dtype, d, hq, hkv, causal, nq, nk))
    # One query with grouped heads runs packed on the unmasked kernel.
    if nq == 1 and hq > hkv:
        assert not spec.causal, spec.name


@pytest.mark.parametrize("nk", [65536, 131072])
@pytest.mark.parametrize("dtype", ["bf16"])
def test_decode_long(dtype, nk):
    _check(1, 32, 8, 1, nk, 128, dtype, True, R.seed_for("decode-long", dtype, nk))


def test_decode_graph_capture():
    """The split kernels' launches (and their workspace) in a CUDA graph."""
    q, k, v = R.make_qkv(4, 32, 8, 1, 3000, 128, 128, torch.bfloat16, "bhsd", seed=7)
    if _split_spec(q, k, v, False) is None:
        pytest.skip("no split-KV kernel")
    want = flashmlir.attention(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flashmlir.attention(q, k, v)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = flashmlir.attention(q, k, v)
    q.copy_(torch.randn_like(q))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, flashmlir.attention(q, k, v))
    assert not torch.equal(out, want)
