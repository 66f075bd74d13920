"""GPU tests of packed sequences (flashmlir.attention_varlen, fa-compile
--form=varlen) and paged key/value caches (attention_with_kvcache,
--form=paged, with the split-KV paged kernels for decoding).

Accuracy: FlashAttention's rule (gpu_ref.check) per sequence: each
sequence's rows against the float64 dense attention of its own queries and
keys, masks bottom-right aligned per sequence, and 2x PyTorch's
same-precision error + atol. Outputs are NaN-poisoned first (out= and
lse=), so a row the kernels never write fails; rows that see no key must
be exactly 0 / +inf.

The kernels: `python -m flashmlir compile --kind all --form varlen`
(forward and backward) and `--kind forward --form paged` (the variant set,
_variants.py). Gradients (the packed backward) follow FlashAttention's
gradient rule per sequence, NaN-poisoned first (FLASHMLIR_POISON_GRADS). A missing kernel skips
(FLASHMLIR_REQUIRE_KERNELS=1: fails). Sized for about 2-3 minutes on an H200.

FLASHMLIR_SEQ_DRYRUN=1 runs this file on the CPU through the fake GPU of
fake_gpu.py (the variant set's kernels generated as fake ones; graph
capture skipped), to check the tests themselves without a GPU (slow: the
float64 references run on the CPU).
"""

import os
import warnings

import pytest

torch = pytest.importorskip("torch")
DRY = os.environ.get("FLASHMLIR_SEQ_DRYRUN", "") not in ("", "0")
if not DRY and not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
DEV = "cpu" if DRY else "cuda"

import flashmlir  # noqa: E402
from flashmlir import _interface, _sequences  # noqa: E402

import gpu_ref as R  # noqa: E402
import seq_ref as SR  # noqa: E402
from gpu_ref import DTYPES, exact_fp32_matmul, real_registry  # noqa: E402,F401 (fixtures)


if DRY:
    @pytest.fixture(autouse=True)
    def fake_device(monkeypatch, tmp_path):
        import fake_gpu
        from flashmlir import _kernels, _variants
        fake = fake_gpu.install(monkeypatch, tmp_path)
        for v in _variants.sequence_variants() + _variants.varlen_backward_variants():
            fake.registry.generate(_kernels.KernelRequest.make(**v))
        yield fake
        fake_gpu.uninstall(fake)


def _sync():
    if not DRY:
        torch.cuda.synchronize()


def _call(fn, *args, **kw):
    try:
        res = fn(*args, **kw)
    except flashmlir.KernelNotFoundError as exc:
        R.skip_missing(exc)
    _sync()
    return res


# -- varlen ---------------------------------------------------------------------------------

# Mixed lengths: empty, one-token, odd, block-crossing and long sequences,
# more keys than queries (bottom-right alignment), a keyless sequence.
LENS_Q = [1, 0, 17, 300, 129, 1024, 2049, 5, 3]
LENS_K = [1, 8, 17, 700, 129, 1024, 4000, 0, 3]
LONG_Q, LONG_K = [8192, 1, 700], [8192, 9, 2000]
# (The dry run shortens the longest caches: its references run on the CPU.)
LONG_CACHE = 131072 if not DRY else 20000


def run_varlen(lens_q, lens_k, hq, hkv, d, dtype, seed, **opts):
    q, k, v, cq, ck = SR.make_varlen(lens_q, lens_k, hq, hkv, d, d, DTYPES[dtype], DEV,
                                     seed=seed)
    out = SR.poisoned((sum(lens_q), hq, d), q.dtype, DEV)
    lse = SR.poisoned((hq, sum(lens_q)), torch.float32, DEV)
    res = _call(flashmlir.attention_varlen, q, k, v, cq, ck, max(lens_q), out=out, lse=lse,
                return_lse=True, **opts)
    assert res[0] is out and res[1] is lse
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    plan = _sequences._varlen_plan(q, k, v, cq, ck, max(lens_q), None,
                                   opts.get("causal", False), opts.get("window"),
                                   opts.get("scale"), opts.get("softcap"), out, lse)
    name = plan.spec.name if plan.spec is not None else "?"
    SR.check_varlen(out, lse, q, k, v, lens_q, lens_k, mask, opts.get("scale"),
                    opts.get("softcap"), what=f"{name} {dtype} D={d} H={hq}/{hkv} {opts}")
    return plan


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hkv", [(8, 8), (8, 2), (8, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_varlen(dtype, d, hq, hkv, causal):
    plan = run_varlen(LENS_Q, LENS_K, hq, hkv, d, dtype,
                      R.seed_for("varlen", dtype, d, hq, hkv, causal), causal=causal)
    assert plan.spec.form == "varlen" and plan.spec.causal == causal


@pytest.mark.parametrize("opts", [{"window": (97, 31)}, {"causal": True, "window": (255, 0)},
                                  {"softcap": 2.0}, {"softcap": 5.0, "scale": 0.05},
                                  {"causal": True, "scale": 0.3}],
                         ids=["window", "causal-window", "softcap", "softcap-scale", "scale"])
def test_varlen_options(opts):
    run_varlen(LENS_Q, LENS_K, 8, 2, 128, "bf16", R.seed_for("varlen-opts", str(opts)), **opts)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_long(causal):
    run_varlen(LONG_Q, LONG_K, 4, 2, 128, "bf16", R.seed_for("varlen-long", causal),
               causal=causal)


def test_varlen_many_short_sequences():
    g = torch.Generator().manual_seed(3)
    lens = torch.randint(0, 40, (200,), generator=g).tolist()
    run_varlen(lens, lens, 4, 4, 64, "bf16", 11, causal=True)


@pytest.mark.skipif(DRY, reason="CUDA graphs")
def test_varlen_graph_capture():
    q, k, v, cq, ck = SR.make_varlen([100, 37], [150, 37], 8, 2, 128, 128, torch.bfloat16,
                                     DEV, seed=5)
    _call(flashmlir.attention_varlen, q, k, v, cq, ck, 100)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flashmlir.attention_varlen(q, k, v, cq, ck, 100)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashmlir.attention_varlen(q, k, v, cq, ck, 100)
    q.copy_(torch.randn_like(q))
    cq.copy_(SR.offsets([90, 47], DEV))        # new offsets, read by the kernel
    ck.copy_(SR.offsets([120, 67], DEV))
    graph.replay()
    _sync()
    assert torch.equal(out, flashmlir.attention_varlen(q, k, v, cq, ck, 100))


# -- varlen backward (fa-compile --form=varlen --kind=backward) ---------------------------

def run_varlen_backward(monkeypatch, lens_q, lens_k, hq, hkv, d, dtype, seed, pad=(0, 0),
                        give_max_k=True, **opts):
    """attention_varlen's gradients through the packed backward (poisoned
    first: every element must be written), per sequence against the fp32
    reference; `pad` rows of no sequence after the last query / key."""
    monkeypatch.setenv(_interface.POISON_ENV, "1")
    dt = DTYPES[dtype]
    q, k, v, cq, ck = SR.make_varlen(lens_q, lens_k, hq, hkv, d, d, dt, DEV, seed=seed)
    g = torch.Generator(device=DEV)
    g.manual_seed(seed + 1)
    more = lambda t, n: torch.cat([t, torch.randn((n,) + t.shape[1:], generator=g,
                                                  device=DEV).to(dt)])
    q, k, v = more(q, pad[0]), more(k, pad[1]), more(v, pad[1])
    max_k = max(lens_k) if give_max_k else None
    plan = _sequences._varlen_plan(q, k, v, cq, ck, max(lens_q), max_k, opts.get("causal", False),
                                   opts.get("window"), opts.get("scale"), opts.get("softcap"))
    if plan is not None and not plan.has_backward():
        R.skip_missing(flashmlir.KernelNotFoundError(
            f"no packed backward kernel for {plan.call.request('backward').describe()}"))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # no per-sequence fallback
        out = _call(flashmlir.attention_varlen, q, k, v, cq, ck, max(lens_q), max_k, **opts)
        dout = R.make_dout(out.shape, dt, DEV, seed)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    _sync()
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    SR.check_varlen_grads(grads, q, k, v, dout, cq, ck, mask, opts.get("scale"),
                          opts.get("softcap"), what=f"{dtype} d{d} H{hq}/{hkv} {opts}")
    return plan


VARLEN_BACKWARD_CASES = [
    dict(lens_q=[17, 1, 0, 300, 64], lens_k=[33, 5, 7, 300, 64], hq=4, hkv=4, d=64,
         dtype="bf16"),
    dict(lens_q=[17, 1, 0, 300, 64], lens_k=[33, 5, 7, 300, 64], hq=8, hkv=2, d=64,
         dtype="f16", causal=True, pad=(3, 11)),
    dict(lens_q=[129, 1000, 2048, 3], lens_k=[129, 1000, 2048, 3], hq=8, hkv=1, d=128,
         dtype="bf16", causal=True, pad=(37, 37)),
    dict(lens_q=[500, 77, 1200], lens_k=[700, 77, 900], hq=4, hkv=2, d=128, dtype="f16"),
    dict(lens_q=[500, 77, 1200], lens_k=[700, 77, 900], hq=4, hkv=2, d=128, dtype="bf16",
         window=(97, 31), give_max_k=False),
    dict(lens_q=[500, 77, 1200], lens_k=[500, 77, 1300], hq=4, hkv=4, d=128, dtype="bf16",
         causal=True, window=(255, 0)),
    dict(lens_q=[333, 1, 640], lens_k=[333, 9, 640], hq=6, hkv=3, d=128, dtype="bf16",
         softcap=2.0, pad=(5, 0), scale=0.05),
    dict(lens_q=[2048] * 4, lens_k=[2048] * 4, hq=16, hkv=16, d=64, dtype="bf16",
         causal=True),
    dict(lens_q=[64, 65, 1, 127], lens_k=[64, 65, 1, 127], hq=2, hkv=2, d=128, dtype="f16",
         causal=True, give_max_k=False),
]


@pytest.mark.parametrize("case", VARLEN_BACKWARD_CASES,
                         ids=[f"case{i}" for i in range(len(VARLEN_BACKWARD_CASES))])
def test_varlen_backward(monkeypatch, case):
    case = dict(case)
    plan = run_varlen_backward(monkeypatch, seed=R.seed_for("varlen-bwd", str(case)), **case)
    if plan is not None:
        (bwd,) = plan.bwd.values()
        assert bwd.seq is not None     # the packed kernels ran


@pytest.mark.skipif(DRY, reason="CUDA graphs")
def test_varlen_backward_graph_capture():
    """Forward and backward captured in one CUDA graph: replays with new
    inputs and offsets give the eager gradients."""
    lq, lk = [100, 37, 250], [150, 37, 250]
    q, k, v, cq, ck = SR.make_varlen(lq, lk, 8, 2, 128, 128, torch.bfloat16, DEV, seed=7)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    dout = R.make_dout((q.shape[0], 8, 128), torch.bfloat16, DEV, 8)
    step = lambda: torch.autograd.grad(
        flashmlir.attention_varlen(q, k, v, cq, ck, 250, 250, causal=True), (q, k, v), dout)
    try:
        step()
    except flashmlir.KernelNotFoundError as exc:
        R.skip_missing(exc)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grads = step()
    with torch.no_grad():
        q.copy_(torch.randn_like(q))
    cq.copy_(SR.offsets([90, 47, 250], DEV))
    ck.copy_(SR.offsets([120, 67, 250], DEV))
    graph.replay()
    _sync()
    want = step()
    # dK / dV are summed in a fixed order; dQ with f32 atomics, whose order
    # varies from run to run (the key blocks of a causal GQA group add into
    # the same query block at about the same time).
    dq, dq_want = grads[0].float(), want[0].float()
    assert (dq - dq_want).abs().max().item() <= 1e-2 * dq_want.abs().max().item() + 1e-3
    for a, b in zip(grads[1:], want[1:]):
        assert torch.equal(a, b)


# -- paged ----------------------------------------------------------------------------------

def run_paged(b, nq, hq, hkv, d, lens, s, dtype, seed, shuffle=True, split=None, **opts):
    q, kc, vc, table, sl = SR.make_paged(b, nq, hq, hkv, d, d, list(lens), s, DTYPES[dtype],
                                         DEV, seed=seed, shuffle=shuffle)
    out = SR.poisoned((b, nq, hq, d), q.dtype, DEV)
    lse = SR.poisoned((b, hq, nq), torch.float32, DEV)
    res = _call(flashmlir.attention_with_kvcache, q, kc, vc, sl, table, out=out, lse=lse,
                return_lse=True, **opts)
    assert res[0] is out and res[1] is lse
    plan = _sequences._paged_plan(q, kc, vc, sl, table, opts.get("causal", False),
                                  opts.get("window"), opts.get("scale"), opts.get("softcap"),
                                  out, lse)
    if split is not None and (plan.seq is not None) != split:
        if split and not R.REQUIRE:
            pytest.skip("no split-KV paged kernel for this call")
        pytest.fail(f"split-KV expected {split}, got {plan.seq is not None} ({plan.spec.name})")
    mask = R.canonical(opts.get("causal", False), opts.get("window"))
    SR.check_paged(out, lse, q, kc, vc, table, lens, mask, opts.get("scale"),
                   opts.get("softcap"), what=f"{plan.spec.name} S={s} Nq={nq} {opts}")
    assert plan.spec.page_size == s
    return plan


# Prefill-like: many queries against partly filled last pages.
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("s", [16, 64, 256])
@pytest.mark.parametrize("d", [64, 128])
def test_paged_prefill(d, s, causal):
    run_paged(3, 200, 8, 2, d, (1000, 200, 3001), s, "bf16",
              R.seed_for("paged", d, s, causal), causal=causal, split=False)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_paged_f16(d, causal):
    run_paged(2, 77, 4, 4, d, (513, 77), 256, "f16", R.seed_for("paged-f16", d, causal),
              causal=causal)


def test_paged_empty_and_short_caches():
    run_paged(4, 3, 8, 2, 128, (0, 1, 15, 17), 16, "bf16", 5, causal=True)
    run_paged(3, 5, 8, 8, 128, (0, 2, 255), 256, "bf16", 6, shuffle=False)


# Decoding: few queries against long caches, split and not.
@pytest.mark.parametrize("nq", [1, 4, 16])
@pytest.mark.parametrize("s", [16, 64, 256])
@pytest.mark.parametrize("hq,hkv", [(32, 8), (8, 8)], ids=["gqa", "mha"])
def test_paged_decode(hq, hkv, s, nq):
    lens = (16411, 1, 4096, 9000)
    causal = nq == 1 or hq == hkv
    # (16-key pages: the split kernel's 64-key blocks span four pages; the
    # page table is as narrow as the longest cache allows.)
    plan = run_paged(4, nq, hq, hkv, 128, lens, s, "bf16", R.seed_for("decode", hq, s, nq),
                     causal=causal, split=True)
    if plan.seq is not None and nq == 1 and hq > hkv:
        assert plan.packed and not plan.spec.causal


@pytest.mark.parametrize("s", [16, 64, 256])
def test_paged_decode_not_split(monkeypatch, s):
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    flashmlir.clear_caches()
    run_paged(2, 1, 32, 8, 128, (20000, 3), s, "bf16", 17, causal=True, split=False)
    flashmlir.clear_caches()


@pytest.mark.parametrize("s", [16, 64, 256])
def test_paged_decode_long(s):
    run_paged(1, 1, 32, 8, 128, (LONG_CACHE,), s, "bf16", R.seed_for("decode-long", s),
              causal=True, split=True)


def test_paged_decode_window_softcap():
    run_paged(2, 2, 8, 2, 128, (5000, 70), 64, "bf16", 23, causal=True, window=(1000, 0))
    run_paged(2, 1, 8, 2, 128, (5000, 70), 256, "bf16", 24, softcap=3.0)


def test_contiguous_cache():
    g = torch.Generator(device=DEV).manual_seed(9)
    b, nmax, lens = 3, 4096 + 64, (4160, 1, 2000)
    q = torch.randn(b, 1, 32, 128, generator=g, device=DEV).bfloat16()
    kc, vc = (torch.randn(b, nmax, 8, 128, generator=g, device=DEV).bfloat16()
              for _ in range(2))
    sl = torch.tensor(lens, dtype=torch.int32, device=DEV)
    out, lse = _call(flashmlir.attention_with_kvcache, q, kc, vc, sl, causal=True,
                     return_lse=True)
    SR.check_contiguous(out, lse, q, kc, vc, lens, (-1, 0))
    plan = _sequences._paged_plan(q, kc, vc, sl, None, True, None, None, None)
    assert plan.page_size == 64          # 4160 = 65 * 64
    q4 = torch.randn(b, 4, 32, 128, generator=g, device=DEV).bfloat16()
    kc2, vc2 = kc[:, :4096].contiguous(), vc[:, :4096].contiguous()
    out, lse = _call(flashmlir.attention_with_kvcache, q4, kc2, vc2, sl.clamp(max=4096),
                     return_lse=True)
    SR.check_contiguous(out, lse, q4, kc2, vc2, [min(n, 4096) for n in lens])
    # flash_attn_with_kvcache: append one token per sequence, then attend.
    knew, vnew = (torch.randn(b, 1, 8, 128, generator=g, device=DEV).bfloat16()
                  for _ in range(2))
    sl2 = torch.tensor([100, 0, 4000], dtype=torch.int32, device=DEV)
    out, lse = _call(flashmlir.flash_attn_with_kvcache, q, kc2, vc2, knew, vnew,
                     cache_seqlens=sl2, causal=True, return_softmax_lse=True)
    for i, n in enumerate(sl2.tolist()):
        assert torch.equal(kc2[i, n], knew[i, 0]) and torch.equal(vc2[i, n], vnew[i, 0])
    SR.check_contiguous(out, lse, q, kc2, vc2, (sl2 + 1).tolist(), (-1, 0))


@pytest.mark.skipif(DRY, reason="CUDA graphs")
def test_paged_decode_graph_capture():
    q, kc, vc, table, sl = SR.make_paged(4, 1, 32, 8, 128, 128, [3000, 10, 700, 1], 64,
                                         torch.bfloat16, DEV, seed=3)
    _call(flashmlir.attention_with_kvcache, q, kc, vc, sl, table, causal=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=True)
    q.copy_(torch.randn_like(q))
    sl.add_(1)                                     # a decode step: one more key each
    graph.replay()
    _sync()
    assert torch.equal(out, flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=True))
