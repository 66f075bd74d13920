"""GPU matrix of every head dim the kernels take besides 64 and 128, and of
Dv != D pairs (_variants.HEAD_DIM_PAIRS: 32, 96, 160, 192/128, 192, 256,
128/64, 64/128), forward and backward, f16 and bf16, causal and not, odd
sequence lengths, GQA, both layouts; the deterministic backward of the larger
ones. The accuracy rules are those of test_gpu_attention.py (forward) and
test_gpu_backward.py (gradients): FlashAttention's, against a float64 /
float32 reference, with NaN-poisoned outputs, gradients and workspace.

These kernels pick other tiles, dK/dV column splits (dkv_split) and, on
sm_90a, partly used 128-byte panels (D = 96, 160): each of those paths runs
here. FLASHMLIR_CHIP=sm_80 runs the mma.sync kernels on an sm_90 device.
A variant with no kernel is skipped, or fails with FLASHMLIR_REQUIRE_KERNELS=1.
"""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import flashmlir  # noqa: E402
from flashmlir import _interface, _variants  # noqa: E402

import gpu_ref as R  # noqa: E402
from gpu_ref import DTYPES, exact_fp32_matmul, real_registry, skip_missing  # noqa: E402,F401 (fixtures)

PAIRS = _variants.HEAD_DIM_PAIRS
OPTIONS = _variants.HEAD_DIM_OPTIONS
# Tails in both dims, Nq != Nk both ways (causal rows that see no key when
# Nq > Nk), one query against a long cache.
SEQLENS = [(1, 4097), (113, 1000), (1000, 113), (257, 257)]


def _id(x):
    if isinstance(x, dict):
        return ",".join(f"{k}={v}" for k, v in x.items()) or "full"
    return "x".join(str(v) for v in x) if isinstance(x, tuple) else str(x)


@pytest.mark.parametrize("nq,nk", SEQLENS, ids=_id)
@pytest.mark.parametrize("opts", OPTIONS, ids=_id)
@pytest.mark.parametrize("d,dv", PAIRS, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_forward(dtype, d, dv, opts, nq, nk):
    b, hq, hkv = 2, 4, 2
    q, k, v = R.make_qkv(b, hq, hkv, nq, nk, d, dv, DTYPES[dtype], "bhsd",
                         seed=R.seed_for("hd-fwd", dtype, d, dv, _id(opts), nq, nk))
    out, lse = R.forward_poisoned(q, k, v, "bhsd", **opts)
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    R.check(out, lse, q, k, v, mask, what=f"{dtype} D={d}/{dv} {_id(opts)} Nq={nq} Nk={nk}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d,dv", PAIRS, ids=_id)
def test_forward_bshd_gqa(d, dv, causal):
    # [B, N, H, D] views of one packed tensor per input, 8 query heads on 2.
    q, k, v = R.make_qkv(1, 8, 2, 333, 777, d, dv, torch.bfloat16, "bshd",
                         seed=R.seed_for("hd-bshd", d, dv, causal))
    out, lse = R.forward_poisoned(q, k, v, "bshd", causal=causal)
    R.check(R.bhsd(out, "bshd"), lse, R.bhsd(q, "bshd"), R.bhsd(k, "bshd"),
            R.bhsd(v, "bshd"), R.canonical(causal, None),
            what=f"bshd GQA D={d}/{dv} causal={causal}")


@pytest.fixture
def poison(monkeypatch):
    monkeypatch.setenv(_interface.POISON_ENV, "1")


def _grads(q, k, v, dout, layout="bhsd", **opts):
    qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
    try:
        out = flashmlir.attention(qq, kk, vv, layout=layout, **opts)
        dq, dk, dv = torch.autograd.grad(out, (qq, kk, vv), dout)
    except flashmlir.KernelNotFoundError as exc:
        skip_missing(exc)
    torch.cuda.synchronize()
    return dq, dk, dv


def _backward_case(dtype, d, dv, opts, nq, nk, hq=4, hkv=2, deterministic=False):
    q, k, v = R.make_qkv(2, hq, hkv, nq, nk, d, dv, DTYPES[dtype], "bhsd",
                         seed=R.seed_for("hd-bwd", dtype, d, dv, _id(opts), nq, nk,
                                         deterministic))
    dout = R.make_dout((2, hq, nq, dv), DTYPES[dtype], seed=R.seed_for("hd-dout", nq, dv))
    grads = _grads(q, k, v, dout, deterministic=deterministic, **opts)
    for g, t in zip(grads, (q, k, v)):
        assert g.shape == t.shape and g.dtype == t.dtype
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    R.check_grads(grads, q, k, v, dout, mask,
                  what=f"{dtype} D={d}/{dv} {_id(opts)} det={deterministic} Nq={nq} Nk={nk}")
    return q, k, v, dout, grads


@pytest.mark.parametrize("nq,nk", SEQLENS[1:], ids=_id)
@pytest.mark.parametrize("opts", OPTIONS, ids=_id)
@pytest.mark.parametrize("d,dv", PAIRS, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward(poison, dtype, d, dv, opts, nq, nk):
    _backward_case(dtype, d, dv, opts, nq, nk)


@pytest.mark.parametrize("d,dv", _variants.HEAD_DIM_DETERMINISTIC, ids=_id)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward_deterministic(poison, dtype, d, dv):
    q, k, v, dout, grads = _backward_case(dtype, d, dv, {"causal": True}, 1000, 1000,
                                          deterministic=True)
    again = _grads(q, k, v, dout, deterministic=True, causal=True)
    for name, a, b in zip(("dq", "dk", "dv"), grads, again):
        assert torch.equal(a, b), f"D={d}/{dv}: {name} differs between two passes"


@pytest.mark.parametrize("d,dv", PAIRS, ids=_id)
def test_backward_mqa(poison, d, dv):
    # Every query head of the batch on one kv head: dK, dV sum over 8.
    _backward_case("bf16", d, dv, {"causal": True}, 333, 777, hq=8, hkv=1)
