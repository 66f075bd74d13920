"""flashmlir.attention_varlen and attention_with_kvcache (packed sequences,
paged caches) on the CPU: the launch path on the fake GPU of fake_gpu.py
(kernel selection by form and page size, split-KV decode, parameter
binding, grids, the contiguous cache's page view, the steady state), the
per-sequence CPU reference against float64, the validation messages,
torch.compile tracing, the flash-attn-style entries, and the manifests'
form keys.
"""

import json
import math
import os
import subprocess
import warnings

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import _interface, _kernels, _reference, _sequences  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402
from flashmlir._errors import ManifestError, UnsupportedError  # noqa: E402

import fake_gpu  # noqa: E402
import seq_ref as SR  # noqa: E402

BF = torch.bfloat16
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sequences")


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    fake = fake_gpu.install(monkeypatch, tmp_path)
    yield fake
    fake_gpu.uninstall(fake)


def req(**kw):
    base = dict(kind="forward", dtype="bf16", head_dim=32)
    base.update(kw)
    return _kernels.KernelRequest.make(**base)


def varlen(lens_q, lens_k, hq=4, hkv=2, d=32, dv=32, seed=0):
    return SR.make_varlen(lens_q, lens_k, hq, hkv, d, dv, BF, seed=seed)


# -- manifests and requests ---------------------------------------------------------------

def _fixture(name):
    with open(os.path.join(FIX, name + ".json")) as f:
        return json.load(f)


REAL = ("fa_fwd_varlen_d128_bf16_causal_sm90a", "fa_fwd_varlen_d128_bf16_window_softcap_sm90a",
        "fa_fwd_paged256_d128_bf16_sm90a", "fa_fwd_paged64_d128_bf16_causal_splitkv_sm90a",
        "fa_fwd_paged16_d64_bf16_sm80")


@pytest.mark.parametrize("name", REAL)
def test_real_manifests_parse(name):
    """fa-compile's own varlen and paged manifests (copied from its output)."""
    spec = M.parse_manifest(_fixture(name))
    assert spec.form in (M.VARLEN, M.PAGED) and spec.kind == "forward"
    if spec.form == M.PAGED:
        assert spec.page_size in (16, 64, 256)
        assert f"paged(S={spec.page_size})" in spec.describe()
    else:
        assert spec.page_size is None and "varlen" in spec.describe()
    r = _kernels.KernelRequest.make(
        kind="forward", dtype=spec.dtype, head_dim=spec.head_dim, causal=spec.causal,
        window=((97, 0 if spec.causal else 31) if spec.window == M.RUNTIME else None),
        softcap=2.0 if spec.softcap else None, split_kv=spec.kv_splits is not None,
        form=spec.form, page_size=spec.page_size)
    assert r.matches(spec)
    # ... and no request of another form, page size or split-ness does.
    dense = _kernels.KernelRequest.make(kind="forward", dtype=spec.dtype, head_dim=spec.head_dim,
                                        causal=spec.causal, split_kv=spec.kv_splits is not None)
    assert not dense.matches(spec)
    if spec.form == M.PAGED:
        import dataclasses
        assert not dataclasses.replace(r, page_size=spec.page_size * 2).matches(spec)
        assert not dataclasses.replace(r, split_kv=not r.split_kv).matches(spec)
    if spec.is_multi_launch:
        from flashmlir import _backward
        assert set(_backward.tensors_needed(spec)) == set(M.FORM_REQUIRED[M.PAGED])


def test_dense_manifest_without_form_is_dense():
    m = _fixture("fa_fwd_paged256_d128_bf16_sm90a")
    dense = fake_gpu.forward_manifest(req(), "sm_90a", "x")
    assert "form" not in dense and M.parse_manifest(dense).form == M.DENSE
    assert M.parse_manifest(dict(dense, form="dense")).form == M.DENSE
    assert not req(form="paged", page_size=256).matches(M.parse_manifest(dense))
    assert M.parse_manifest(m).form == M.PAGED


def _bad(name, edit, match):
    m = _fixture(name)
    edit(m)
    with pytest.raises(ManifestError, match=match):
        M.parse_manifest(m)


def _param(m, pname, kernel=None):
    params = m["params"] if kernel is None else m["kernels"][kernel]["params"]
    return next(p for p in params if p["name"] == pname)


VL = "fa_fwd_varlen_d128_bf16_causal_sm90a"
PG = "fa_fwd_paged256_d128_bf16_sm90a"
PS = "fa_fwd_paged64_d128_bf16_causal_splitkv_sm90a"


@pytest.mark.parametrize("name,edit,match", [
    (VL, lambda m: m.update(form="ragged"), "unknown form 'ragged'"),
    (VL, lambda m: m.update(page_size=64), "page_size is a paged key; this manifest's form "
                                           "is varlen"),
    (PG, lambda m: m.pop("page_size"), "a paged manifest needs page_size, a multiple of 16"),
    (PG, lambda m: m.update(page_size=24), "needs page_size.*got 24"),
    (PG, lambda m: m.update(page_size=True), "needs page_size.*got True"),
    (VL, lambda m: m.update(kv_splits="auto"), "split-KV takes dense tensors or a paged cache"),
    (VL, lambda m: _param(m, "q").update(dims=["Hq", "Nq", "D"]), r"unknown name\(s\) Nq"),
    (VL, lambda m: _param(m, "q").update(dims=["Hq", "Tk", "D"]),
     r"parameter q has dims \[Hq, Tk, D\] but must be \[Hq, Tq, D\]"),
    (VL, lambda m: _param(m, "cu_seqlens_q").update(dtype="i64"),
     "parameter cu_seqlens_q must be i32, got i64"),
    (VL, lambda m: _param(m, "lse").update(rank=3, dims=["B1", "Hq", "Tq"]),
     r"parameter lse must have rank 2 \[Hq, Tq\]"),
    (VL, lambda m: m["params"].pop(3), "a varlen kernel must take cu_seqlens_k"),
    (VL, lambda m: _param(m, "k").update(name="keys"), "parameter keys is neither a varlen "
                                                       "kernel's tensors"),
    (VL, lambda m: m.update(grid=["ceildiv(max_seqlen_kv, 128)", "Hq", "B1 - 1"]),
     r"unknown name\(s\) max_seqlen_kv"),
    (VL, lambda m: _param(m, "out").update(dims=["Hq", "max_seqlen_q", "Dv"]),
     r"unknown name\(s\) max_seqlen_q"),          # a grid name, not a tensor dim
    (PG, lambda m: _param(m, "k_cache").update(dims=["P", "S", "Hkv", "D"]),
     r"k_cache has dims \[P, S, Hkv, D\] but must be \[P, Hkv, S, D\]"),
    (PG, lambda m: _param(m, "page_table").update(dims=["B", "P"]),
     r"page_table has dims \[B, P\] but must be \[B, MaxPages\]"),
    (PG, lambda m: m.update(grid=["ceildiv(Tq, 128)", "Hq", "B"]), r"unknown name\(s\) Tq"),
    (PS, lambda m: m["kernels"][1]["params"].pop(3), "no kernel takes lse"),
    (PS, lambda m: m["workspace"].append({"name": "page_table", "dtype": "i32", "dims": ["B"]}),
     "'page_table' is a tensor of the op, not a workspace buffer"),
    (PS, lambda m: m["workspace"][0].update(dims=["B", "Tq"]), r"unknown name\(s\) Tq"),
])
def test_bad_sequence_manifests(name, edit, match):
    _bad(name, edit, match)


def test_backward_is_dense_or_varlen():
    from helpers import backward_example
    m = backward_example(False)
    assert M.parse_manifest(m).form == M.DENSE
    assert M.parse_manifest(dict(m, form="dense")).form == M.DENSE
    with pytest.raises(ManifestError, match="a backward manifest must be dense or varlen"):
        M.parse_manifest(dict(m, form="paged", page_size=64))
    # A dense backward's tensors are not packed ones.
    with pytest.raises(ManifestError):
        M.parse_manifest(dict(m, form="varlen"))


def test_packed_backward_manifest_from_fa_compile(tmp_path):
    """The real fa-compile's packed backward: four launches over the packed
    tensors, the key-block grid from max_seqlen_k."""
    fa_compile = os.path.join(os.environ.get("FA_BUILD_DIR", "build"), "bin", "fa-compile")
    if not os.path.exists(fa_compile):
        pytest.skip("fa-compile not built")
    subprocess.run([fa_compile, "--kind=backward", "--form=varlen", "--causal",
                    "--head-dim=64", "--chip=sm_90a", "-o", str(tmp_path)], check=True,
                   capture_output=True)
    spec = M.load_manifest(str(tmp_path / "fa_bwd_varlen_d64_bf16_causal_sm90a.json"))
    assert spec.kind == "backward" and spec.form == M.VARLEN
    entries = [k.entry for k in spec.kernels]
    assert entries == ["fa_bwd_varlen_preprocess_kernel", "fa_bwd_varlen_kernel",
                       "fa_bwd_varlen_dq_convert_kernel", "fa_bwd_varlen_zero_rows_kernel"]
    env = {"B1": 5, "Hq": 8, "Hkv": 2, "Tq": 1000, "Tk": 1200, "D": 64, "Dv": 64, "G": 4,
           "max_seqlen_q": 300, "max_seqlen_k": 400, "SMS": 132}
    grids = [tuple(d.evaluate(env) for d in k.grid) for k in spec.kernels]
    assert grids[0] == (8, 8, 1) and grids[2] == (8, 8, 1) and grids[3] == (10, 2, 1)
    assert grids[1] == (math.ceil(400 / spec.block_kv), 2, 4)


@pytest.mark.parametrize("request_kw", [
    dict(head_dim=64, causal=True, window=(5, 0), softcap=2.0),
    dict(head_dim=128, value_head_dim=64, dtype="f16", window=(3, 4)),
    dict(head_dim=32),
])
def test_fake_packed_backward_is_fa_compiles(tmp_path, request_kw):
    """The fake GPU's packed backward manifests (fake_gpu.varlen_backward_manifest)
    have fa-compile's launches, parameters, grids and workspace."""
    fa_compile = os.path.join(os.environ.get("FA_BUILD_DIR", "build"), "bin", "fa-compile")
    if not os.path.exists(fa_compile):
        pytest.skip("fa-compile not built")
    r = req(kind="backward", form="varlen", **request_kw)
    subprocess.run([fa_compile] + r.compile_args("sm_90a", str(tmp_path)), check=True,
                   capture_output=True)
    (path,) = [p for p in os.listdir(tmp_path) if p.endswith(".json")]
    with open(tmp_path / path) as f:
        real = json.load(f)
    fake = fake_gpu.varlen_backward_manifest(r, "sm_90a", real["name"])
    assert r.matches(M.parse_manifest(fake)) and r.matches(M.parse_manifest(real))
    strip = lambda m, bk: [dict(entry=k["entry"], params=k["params"],
                                grid=[g.replace(str(bk), "BK") for g in k["grid"]])
                           for k in m["kernels"]]
    assert strip(fake, fake["block_kv"]) == strip(real, real["block_kv"])
    assert fake["workspace"] == real["workspace"]
    for key in ("dtype", "head_dim", "value_head_dim", "causal", "window", "softcap", "scale"):
        assert fake[key] == real[key], key


def test_paged_dims_may_spell_the_page_size():
    m = _fixture(PG)
    _param(m, "k_cache")["dims"] = ["P", "Hkv", "256", "D"]
    assert M.parse_manifest(m).page_size == 256
    _param(m, "k_cache")["dims"] = ["P", "Hkv", "64", "D"]
    with pytest.raises(ManifestError, match="must be"):
        M.parse_manifest(m)


@pytest.mark.parametrize("kw,match", [
    (dict(form="ragged"), "unknown form"),
    (dict(form="paged"), "page_size is required by the paged form"),
    (dict(page_size=64), "page_size is required by the paged form and only by it"),
    (dict(form="paged", page_size=40), "multiple of 16"),
    (dict(form="varlen", split_kv=True), "not packed sequences"),
    (dict(form="paged", page_size=64, kind="backward"), "forward kernels only"),
    (dict(form="varlen", kind="backward", deterministic=True), "no deterministic backward"),
])
def test_bad_requests(kw, match):
    with pytest.raises(ValueError, match=match):
        req(**kw)


def test_request_compile_args_and_describe():
    r = req(form="paged", page_size=64, split_kv=True, causal=True)
    args = r.compile_args("sm_80", "o")
    assert "--form=paged" in args and "--page-size=64" in args and "--kv-splits=auto" in args
    assert "form=paged page_size=64" in r.describe()
    assert "--form=varlen" in req(form="varlen").compile_args("sm_90a", "o")
    bwd = req(form="varlen", kind="backward").compile_args("sm_90a", "o")
    assert "--form=varlen" in bwd and "--kind=backward" in bwd
    assert not any(a.startswith("--form") for a in req().compile_args("sm_90a", "o"))


def test_sequence_variant_set():
    from flashmlir import _variants
    vl, pg = _variants.varlen_variants(), _variants.paged_variants()
    assert len(vl) == 11 and len(pg) == 34
    vb = _variants.varlen_backward_variants()
    assert [dict(v, kind="forward") for v in vb] == [dict(v, deterministic=False) for v in vl]
    for v in vb:
        _kernels.KernelRequest.make(**v)
    assert 2 * (len(vl) + len(pg)) == 90      # kernels: x sm_90a, sm_80
    reqs = [_kernels.KernelRequest.make(**v) for v in vl + pg]
    assert {r.page_size for r in reqs if r.form == "paged"} == {16, 64, 256}
    # Split-KV kernels for every page size (16-key pages: 16-key blocks).
    assert {r.page_size for r in reqs if r.split_kv} == {16, 64, 256}
    assert {r.dtype for r in reqs if r.page_size == 256} == {"f16", "bf16"}
    assert {r.dtype for r in reqs if r.page_size in (16, 64)} == {"bf16"}
    assert len(set(reqs)) == len(reqs)


def test_registry_page_sizes(gpu):
    reg = gpu.registry
    for s in (64, 16):
        reg.generate(req(form="paged", page_size=s))
    reg.generate(req(form="paged", page_size=256, causal=True))
    assert reg.page_sizes(req(form="paged", page_size=16), (9, 0)) == [64, 16]
    assert reg.page_sizes(req(form="paged", page_size=16, causal=True), (9, 0)) == [256]
    assert reg.page_sizes(req(form="paged", page_size=16, dtype="f16"), (9, 0)) == []


def test_not_found_message_names_page_sizes(tmp_path):
    reg = fake_gpu.GenRegistry(tmp_path / "k")
    reg.generate(req(form="paged", page_size=64))
    reg._compiler = None
    with pytest.raises(flashmlir.KernelNotFoundError) as ei:
        reg.find(req(form="paged", page_size=32), (9, 0))
    msg = str(ei.value)
    assert "Available paged forward kernels (1)" in msg
    assert "No paged forward kernel has page size 32; page sizes with kernels: 64." in msg
    with pytest.raises(flashmlir.KernelNotFoundError, match="No varlen forward kernels were found"):
        reg.find(req(form="varlen"), (9, 0))


# -- attention_varlen on the fake GPU -----------------------------------------------------

LENS = ([5, 0, 70, 1, 33], [9, 4, 70, 1, 0])   # odd, empty, one-token, keyless sequences


@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (7, 3)},
                                  {"causal": True, "window": (5, 0)},
                                  {"softcap": 1.5, "scale": 0.3}],
                         ids=["full", "causal", "window", "causal-window", "softcap"])
def test_varlen_launch(gpu, opts):
    lq, lk = LENS
    q, k, v, cq, ck = varlen(lq, lk)
    out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, max(lq), return_lse=True, **opts)
    assert out.shape == (sum(lq), 4, 32) and lse.shape == (4, sum(lq))
    SR.check_varlen(out, lse, q, k, v, lq, lk,
                    M.canonical_mask(opts.get("causal", False), opts.get("window")),
                    opts.get("scale"), opts.get("softcap"))
    (name, entry), = gpu.ran
    spec = gpu.registry.spec_named(name)
    assert spec.form == "varlen" and entry == "fa_fwd_varlen_kernel"
    assert [r.form for r in gpu.registry.generated] == ["varlen"]   # never a dense kernel
    a, launch = gpu.decoded[-1], gpu.launches[-1]
    # Each memref parameter got its tensor, as an [H, T, D] view.
    for n, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        assert a[n].data_ptr() == t.data_ptr(), n
        assert a[n].shape == t.transpose(0, 1).shape and a[n].stride() == t.transpose(0, 1).stride()
    for n, t in (("cu_seqlens_q", cq), ("cu_seqlens_k", ck), ("lse", lse)):
        assert a[n].data_ptr() == t.data_ptr() and a[n].shape == t.shape, n
    assert launch["grid"] == (math.ceil(70 / 64), 4, 5)


def test_varlen_grid_from_max_seqlen_q_and_steady_state(gpu):
    lq, lk = [3, 130], [3, 130]
    q, k, v, cq, ck = varlen(lq, lk)
    flashmlir.attention_varlen(q, k, v, cq, ck, 200)
    assert gpu.launches[-1]["grid"] == (3, 4, 2)          # ceildiv(min(200, Tq=133), 64)
    flashmlir.attention_varlen(q, k, v, cq, ck, 130)
    assert gpu.launches[-1]["grid"] == (3, 4, 2)
    flashmlir.attention_varlen(q, k, v, cq, ck, 128)
    assert gpu.launches[-1]["grid"] == (2, 4, 2)
    gpu.count()
    gpu.current = 0xC0
    q2, k2, v2, cq2, ck2 = varlen(lq, lk, seed=3)
    out = flashmlir.attention_varlen(q2, k2, v2, cq2, ck2, 130)
    assert gpu.count() == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 1}
    a = gpu.decoded[-1]
    assert all(a[n].data_ptr() == t.data_ptr() for n, t in
               (("q", q2), ("cu_seqlens_q", cq2), ("cu_seqlens_k", ck2), ("out", out)))
    assert len(gpu.registry.generated) == 1


def test_varlen_small_max_seqlen_q_leaves_rows_unwritten(gpu):
    """The documented behaviour: max_seqlen_q below a sequence's query count
    leaves that sequence's later rows unwritten (FlashAttention's too)."""
    lq, lk = [100, 10], [100, 10]
    q, k, v, cq, ck = varlen(lq, lk)
    out = SR.poisoned((110, 4, 32), BF, "cpu")
    flashmlir.attention_varlen(q, k, v, cq, ck, 64, out=out)
    assert out[:64].isfinite().all() and out[64:100].isnan().all() and out[100:].isfinite().all()


def test_varlen_out_and_strided_inputs(gpu):
    lq, lk = [7, 20], [11, 20]
    q, k, v, cq, ck = varlen(lq, lk, hq=4, hkv=4)
    kv = torch.stack([k, v], 1)              # [T, 2, H, D]: strided k and v views
    out = torch.empty(27, 4, 32, dtype=BF)
    res, lse = flashmlir.attention_varlen(q, kv[:, 0], kv[:, 1], cq, ck, 20, out=out,
                                          return_lse=True)
    assert res is out
    SR.check_varlen(out, lse, q, k, v, lq, lk)
    assert gpu.decoded[-1]["k"].stride() == kv[:, 0].transpose(0, 1).stride()


def test_varlen_empty_and_keyless(gpu):
    q, k, v, cq, ck = varlen([], [])
    assert cq.tolist() == [0]
    out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 1, return_lse=True)
    assert out.shape == (0, 4, 32) and lse.shape == (4, 0)
    q, k, v, cq, ck = varlen([3, 2], [0, 0])
    out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 3, return_lse=True)
    assert (out == 0).all() and (lse == math.inf).all()
    assert gpu.ran == []


# -- attention_with_kvcache on the fake GPU -----------------------------------------------

def paged(b=3, nq=5, hq=4, hkv=2, d=32, lens=(37, 0, 64), s=16, seed=0, **kw):
    return SR.make_paged(b, nq, hq, hkv, d, d, list(lens), s, BF, seed=seed, **kw)


@pytest.mark.parametrize("s", [16, 64])
@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (9, 2)}, {"softcap": 2.5}],
                         ids=["full", "causal", "window", "softcap"])
def test_paged_launch(gpu, monkeypatch, s, opts):
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    lens = (37, 0, 130, 1)            # partly filled last pages, an empty cache
    q, kc, vc, table, sl = paged(b=4, lens=lens, s=s)
    out, lse = flashmlir.attention_with_kvcache(q, kc, vc, sl, table, return_lse=True, **opts)
    assert out.shape == (4, 5, 4, 32) and lse.shape == (4, 4, 5)
    mask = M.canonical_mask(opts.get("causal", False), opts.get("window"))
    SR.check_paged(out, lse, q, kc, vc, table, lens, mask, None, opts.get("softcap"))
    (name, entry), = gpu.ran
    spec = gpu.registry.spec_named(name)
    assert (spec.form, spec.page_size, spec.kv_splits) == ("paged", s, None)
    a = gpu.decoded[-1]
    for n, t in (("q", q), ("k_cache", kc), ("v_cache", vc), ("out", out)):
        assert a[n].data_ptr() == t.data_ptr(), n
        assert a[n].stride() == t.transpose(1, 2).stride(), n
    for n, t in (("page_table", table), ("cache_seqlens", sl), ("lse", lse)):
        assert a[n].data_ptr() == t.data_ptr() and a[n].shape == t.shape, n
    assert gpu.launches[-1]["grid"] == (1, 4, 4)


def test_paged_page_size_selects_kernel(gpu, monkeypatch):
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    for s in (16, 64):
        q, kc, vc, table, sl = paged(s=s)
        flashmlir.attention_with_kvcache(q, kc, vc, sl, table)
    assert [r.page_size for r in gpu.registry.generated] == [16, 64]
    assert [gpu.registry.spec_named(n).page_size for n, _ in gpu.ran] == [16, 64]


@pytest.mark.parametrize("nq,causal,hq,packed", [(1, True, 8, True), (1, False, 8, True),
                                                 (3, False, 8, False), (3, True, 8, False),
                                                 (4, True, 2, False)])
def test_paged_decode_split(gpu, nq, causal, hq, packed):
    s = 16
    gpu.registry.generate(req(form="paged", page_size=s, split_kv=True))
    gpu.registry.generate(req(form="paged", page_size=s, split_kv=True, causal=True))
    lens = (150, 7, 0)
    q, kc, vc, table, sl = paged(b=3, nq=nq, hq=hq, hkv=2, lens=lens, s=s)
    out, lse = flashmlir.attention_with_kvcache(q, kc, vc, sl, table, causal=causal,
                                                return_lse=True)
    SR.check_paged(out, lse, q, kc, vc, table, lens, (-1, 0) if causal else (-1, -1))
    assert [e for _, e in gpu.ran] == ["fa_fwd_paged_kernel", "fa_fwd_paged_merge_kernel"]
    spec = gpu.registry.spec_named(gpu.ran[0][0])
    assert spec.kv_splits == "auto" and spec.page_size == s
    # GQA packing: [B, Hkv, G * Nq, D] on the unmasked kernel, when no mask
    # tells the group's rows apart and the heads and rows of the [B, Nq, Hq,
    # D] q view as one dimension (Nq = 1).
    split = gpu.decoded[-2]
    assert split["q"].shape == ((3, 2, hq // 2 * nq, 32) if packed else (3, hq, nq, 32))
    assert spec.causal == (causal and not packed)
    plan = _sequences._paged_plan(q, kc, vc, sl, table, causal, None, None, None)
    assert plan.packed == packed and plan.seq is not None


def test_paged_split_choice(gpu, monkeypatch):
    gpu.registry.generate(req(form="paged", page_size=16, split_kv=True))
    q, kc, vc, table, sl = paged(b=2, nq=1, hq=4, hkv=2, lens=(40, 20), s=16)
    flashmlir.attention_with_kvcache(q, kc, vc, sl, table)
    assert len(gpu.ran) == 2
    gpu.ran.clear()
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    flashmlir.clear_caches()
    flashmlir.attention_with_kvcache(q, kc, vc, sl, table)
    assert [e for _, e in gpu.ran] == ["fa_fwd_paged_kernel"]
    gpu.ran.clear()
    monkeypatch.delenv(_interface.SPLIT_KV_ENV)
    q, kc, vc, table, sl = paged(b=2, nq=80, hq=4, hkv=2, lens=(40, 20), s=16)
    flashmlir.attention_with_kvcache(q, kc, vc, sl, table)     # too many rows: plain
    assert [e for _, e in gpu.ran] == ["fa_fwd_paged_kernel"]
    gpu.ran.clear()
    monkeypatch.setenv("FLASHMLIR_SMS", "2")     # B * Hkv fills the device: plain
    flashmlir.clear_caches()
    q, kc, vc, table, sl = paged(b=2, nq=1, hq=4, hkv=2, lens=(40, 20), s=16)
    flashmlir.attention_with_kvcache(q, kc, vc, sl, table)
    assert [e for _, e in gpu.ran] == ["fa_fwd_paged_kernel"]


def test_paged_split_steady_state(gpu):
    gpu.registry.generate(req(form="paged", page_size=16, split_kv=True))
    q, kc, vc, table, sl = paged(b=2, nq=1, hq=4, hkv=2, lens=(40, 20), s=16)
    flashmlir.attention_with_kvcache(q, kc, vc, sl, table)
    gpu.count()
    gpu.current = 0xC0
    q2 = torch.randn_like(q)
    out, lse = flashmlir.attention_with_kvcache(q2, kc, vc, sl, table, return_lse=True)
    assert gpu.count() == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 2}
    SR.check_paged(out, lse, q2, kc, vc, table, (40, 20))


def test_contiguous_cache_page_view(gpu, monkeypatch):
    monkeypatch.setenv(_interface.SPLIT_KV_ENV, "0")
    for s in (16, 64):
        gpu.registry.generate(req(form="paged", page_size=s))
    b, nmax, lens = 3, 192, (192, 5, 100)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(b, 2, 4, 32, generator=g).to(BF)
    kc, vc = (torch.randn(b, nmax, 2, 32, generator=g).to(BF) for _ in range(2))
    sl = torch.tensor(lens, dtype=torch.int32)
    out, lse = flashmlir.attention_with_kvcache(q, kc, vc, sl, causal=True, return_lse=True)
    SR.check_contiguous(out, lse, q, kc, vc, lens, (-1, 0))
    spec = gpu.registry.spec_named(gpu.ran[-1][0])
    assert spec.page_size == 64                    # the largest compiled S dividing 192
    a = gpu.decoded[-1]
    assert a["k_cache"].shape == (b * 3, 2, 64, 32) and a["k_cache"].data_ptr() == kc.data_ptr()
    assert a["page_table"].tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    table_ptr = a["page_table"].data_ptr()
    # Steady state: the same table, one launch.
    gpu.count()
    gpu.current = 0xC0
    q2 = torch.randn_like(q)
    flashmlir.attention_with_kvcache(q2, kc, vc, sl, causal=True)
    assert gpu.count() == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 1}
    assert gpu.decoded[-1]["page_table"].data_ptr() == table_ptr
    assert list(_sequences._page_tables) == [(3, 3, torch.device("cpu"))]
    # 48 keys: 16-key pages.
    kc2, vc2 = kc[:, :48].contiguous(), vc[:, :48].contiguous()
    sl2 = torch.tensor([48, 3, 17], dtype=torch.int32)
    out, lse = flashmlir.attention_with_kvcache(q, kc2, vc2, sl2, return_lse=True)
    SR.check_contiguous(out, lse, q, kc2, vc2, sl2.tolist())
    assert gpu.decoded[-1]["k_cache"].shape == (9, 2, 16, 32)


def test_contiguous_cache_needs_one_stride_batches(gpu):
    gpu.registry.generate(req(form="paged", page_size=16))
    kc = torch.randn(64, 2, 2, 32).to(BF).transpose(0, 1)    # [2, 64, 2, 32], batch inner
    q = torch.randn(2, 1, 2, 32).to(BF)
    sl = torch.tensor([3, 4], dtype=torch.int32)
    with pytest.raises(ValueError, match="one stride apart"):
        flashmlir.attention_with_kvcache(q, kc, kc, sl)


def test_paged_empty_and_keyless(gpu):
    q, kc, vc, table, sl = paged(b=0, lens=())
    assert flashmlir.attention_with_kvcache(q, kc, vc, sl, table).shape == (0, 5, 4, 32)
    q, kc, vc, table, sl = paged(b=2, lens=(0, 0), spare_pages=0, max_pages=0)
    assert table.shape == (2, 0)
    out, lse = flashmlir.attention_with_kvcache(q, kc, vc, sl, table, return_lse=True)
    assert (out == 0).all() and (lse == math.inf).all() and gpu.ran == []


def test_no_host_reads(gpu, monkeypatch):
    """The launch path never reads cu_seqlens, page tables or lengths (the
    kernels compute nothing here, so only the entries could)."""
    gpu.skip.update({"fa_fwd_varlen_kernel", "fa_fwd_paged_kernel"})
    q, k, v, cq, ck = varlen([3, 9], [4, 9])
    pq, kc, vc, table, sl = paged()

    def boom(*a, **k):
        raise AssertionError("a host read")
    for name in ("tolist", "item", "__int__", "__bool__", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, boom)
    for _ in range(2):
        flashmlir.attention_varlen(q, k, v, cq, ck, 9)
        flashmlir.attention_with_kvcache(pq, kc, vc, sl, table)


# -- the CPU reference against float64 ----------------------------------------------------

@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (3, 8)},
                                  {"causal": True, "window": (2, 0)}, {"softcap": 0.7}],
                         ids=["full", "causal", "window", "causal-window", "softcap"])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (6, 2), (3, 1)], ids=["mha", "gqa", "mqa"])
def test_cpu_varlen(opts, hq, hkv):
    lq, lk = [1, 0, 13, 29, 2], [1, 6, 30, 29, 0]
    q, k, v, cq, ck = SR.make_varlen(lq, lk, hq, hkv, 16, 24, BF, seed=hq)
    out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 29, return_lse=True, **opts)
    assert out.shape == (sum(lq), hq, 24) and lse.shape == (hq, sum(lq))
    SR.check_varlen(out, lse, q, k, v, lq, lk,
                    M.canonical_mask(opts.get("causal", False), opts.get("window")), None,
                    opts.get("softcap"))


@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (6, 1)}, {"softcap": 3.0}],
                         ids=["full", "causal", "window", "softcap"])
@pytest.mark.parametrize("s,shuffle", [(16, True), (32, False)])
def test_cpu_paged(opts, s, shuffle):
    lens = (1, 0, 47, 64, 100)
    q, kc, vc, table, sl = SR.make_paged(5, 3, 6, 2, 16, 16, list(lens), s, BF, seed=s,
                                         shuffle=shuffle)
    out, lse = flashmlir.attention_with_kvcache(q, kc, vc, sl, table, return_lse=True, **opts)
    SR.check_paged(out, lse, q, kc, vc, table, lens,
                   M.canonical_mask(opts.get("causal", False), opts.get("window")), None,
                   opts.get("softcap"))
    # The contiguous form of the same caches.
    nmax = 112
    dk = torch.zeros(5, nmax, 2, 16, dtype=BF)
    dv = torch.zeros_like(dk)
    for i, n in enumerate(lens):
        dk[i, :n] = SR.dense_keys(kc, table[i], n)[0].transpose(0, 1)
        dv[i, :n] = SR.dense_keys(vc, table[i], n)[0].transpose(0, 1)
    o2, l2 = flashmlir.attention_with_kvcache(q, dk, dv, sl, return_lse=True, **opts)
    assert torch.allclose(o2.float(), out.float(), atol=1e-2)
    assert torch.allclose(l2[l2.isfinite()], lse[lse.isfinite()], atol=1e-4)


def test_cpu_reference_checks_offsets():
    q, k, v, cq, ck = varlen([3, 2], [3, 2])
    with pytest.raises(ValueError, match="cu_seqlens_q must be non-decreasing"):
        flashmlir.attention_varlen(q, k, v, cq.flip(0).contiguous(), ck, 3)
    q, kc, vc, table, sl = paged(lens=(37, 0, 64))
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 99 is outside \[0, 64\]"):
        flashmlir.attention_with_kvcache(q, kc, vc, torch.tensor([99, 0, 1], dtype=torch.int32),
                                         table)
    bad = table.clone()
    bad[2, 0] = 1000
    with pytest.raises(ValueError, match=r"page_table\[2\] names pages outside"):
        flashmlir.attention_with_kvcache(q, kc, vc, sl, bad)


# -- validation ---------------------------------------------------------------------------

def _varlen_args(**over):
    q, k, v, cq, ck = varlen([3, 5], [4, 6])
    a = dict(q=q, k=k, v=v, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=5)
    a.update(over)
    return a


_q, _k, _v, _cq, _ck = varlen([3, 5], [4, 6])
VARLEN_ERRORS = [
    (dict(q=_q.float()), TypeError, "q, k and v must have one dtype"),
    (dict(q=_q.float(), k=_k.float(), v=_v.float()), TypeError,
     "supports float16 and bfloat16, got torch.float32"),
    (dict(q=_q[None]), ValueError, r"q must have 3 dimensions \[total_tokens, heads, head_dim\]"),
    (dict(q="q"), TypeError, "q must be a torch.Tensor, got str"),
    (dict(cu_seqlens_q=_cq.long()), TypeError, "cu_seqlens_q must be torch.int32, got torch.int64"),
    (dict(cu_seqlens_k=_ck[None]), ValueError, r"cu_seqlens_k must have 1 dimension \[batch \+ 1\]"),
    (dict(cu_seqlens_k=_ck[:2]), ValueError, "must have batch \\+ 1 >= 1 entries each.*3 and 2"),
    (dict(cu_seqlens_q=_cq[:0], cu_seqlens_k=_ck[:0]), ValueError, "batch \\+ 1 >= 1 entries"),
    (dict(cu_seqlens_q=_cq.to("meta")), ValueError, "cu_seqlens_q is on meta but q on cpu"),
    (dict(v=_v[:9]), ValueError, "k and v must have the same number of tokens, got 10 and 9"),
    (dict(v=_v[:, :1]), ValueError, "k and v must have the same number of heads, got 2 and 1"),
    (dict(k=_k[..., :16], v=_v[..., :16]), ValueError, "q and k must have the same head dim"),
    (dict(q=_q[:, :3]), ValueError, r"query heads \(3\) must be a multiple of the number of "
                                    r"key/value heads \(2\)"),
    (dict(k=_k[:, :0], v=_v[:, :0]), ValueError, "k and v have 0 heads but q has 4"),
    (dict(q=torch.zeros(8, 4, 12, dtype=BF), k=torch.zeros(10, 2, 12, dtype=BF),
          v=torch.zeros(10, 2, 12, dtype=BF)), ValueError, "unsupported head dim 12 of q/k"),
    (dict(max_seqlen_q=0), ValueError, "max_seqlen_q must be a positive int"),
    (dict(max_seqlen_q=-3), ValueError, "max_seqlen_q must be a positive int"),
    (dict(max_seqlen_q=5.0), TypeError, "max_seqlen_q must be a Python int"),
    (dict(max_seqlen_q=torch.tensor(5)), TypeError, "max_seqlen_q must be a Python int"),
    (dict(max_seqlen_q=1 << 28), ValueError, r"max_seqlen_q must be in \[1, "),
    (dict(max_seqlen_k=-1), TypeError, "max_seqlen_k must be None or an int >= 0"),
    (dict(causal=1), TypeError, "causal must be a bool"),
    (dict(causal=True, window=(3, 2)), ValueError, "right bound must be 0"),
    (dict(scale=-1.0), ValueError, "scale must be a finite number > 0"),
    (dict(softcap=0.0), ValueError, "softcap must be None or a finite number > 0"),
    (dict(q=_q.transpose(0, 2).contiguous().transpose(0, 2)), ValueError,
     "q's last dimension must be contiguous"),
    (dict(cu_seqlens_q=torch.zeros(6, dtype=torch.int32)[::2]), ValueError,
     "cu_seqlens_q must be contiguous"),
    (dict(cu_seqlens_k=torch.zeros(4, dtype=torch.int32)[1:]), ValueError,
     "cu_seqlens_k's data pointer .* is not 16-byte aligned"),
]


@pytest.mark.parametrize("over,exc,match", VARLEN_ERRORS)
@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_varlen_errors(request, over, exc, match, where):
    if where == "gpu":
        request.getfixturevalue("gpu")
    with pytest.raises(exc, match=match):
        flashmlir.attention_varlen(**_varlen_args(**over))


def _grad_case(hq=4, hkv=2, d=32, dv=32, seed=0):
    """Sequences with an empty query and an empty key sequence, plus two
    query rows and three key rows of no sequence at the end."""
    lq, lk = [5, 0, 19, 1, 8], [7, 3, 19, 1, 0]
    q, k, v, cq, ck = varlen(lq, lk, hq=hq, hkv=hkv, d=d, dv=dv, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    q = torch.cat([q, torch.randn(2, hq, d, generator=g).to(BF)])
    k = torch.cat([k, torch.randn(3, hkv, d, generator=g).to(BF)])
    v = torch.cat([v, torch.randn(3, hkv, dv, generator=g).to(BF)])
    return lq, lk, q, k, v, cq, ck


def _check_varlen_grads(grads, q, k, v, dout, cq, ck, lq, mask, softcap, scale=None):
    SR.check_varlen_grads(grads, q, k, v, dout, cq, ck, mask, scale, softcap)


VARLEN_BACKWARD = "fa_bwd_varlen_preprocess_kernel fa_bwd_varlen_kernel " \
    "fa_bwd_varlen_dq_convert_kernel fa_bwd_varlen_zero_rows_kernel".split()


@pytest.mark.parametrize("where", ["cpu", "gpu"])
@pytest.mark.parametrize("opts,shape", [
    ({}, dict(hq=4, hkv=2)),
    ({"causal": True}, dict(hq=6, hkv=2, d=48, dv=32)),
    ({"window": (4, 2), "softcap": 2.0}, dict(hq=4, hkv=4)),
    ({"causal": True, "window": (3, 0), "scale": 0.3}, dict(hq=2, hkv=1)),
], ids=["full-gqa", "causal-dv", "window-softcap", "causal-window-scale"])
def test_varlen_gradients(request, where, opts, shape):
    """attention_varlen is differentiable without a host read or a warning:
    on the (fake) GPU through the packed backward's four launches, on the
    CPU through the per-sequence reference backward."""
    fake = request.getfixturevalue("gpu") if where == "gpu" else None
    lq, lk, q, k, v, cq, ck = _grad_case(**shape)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 19, return_lse=True, **opts)
        dout = torch.randn_like(out)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    if fake is not None:
        assert [e for _, e in fake.ran[-4:]] == VARLEN_BACKWARD
    assert all(g.is_contiguous() and g.shape == t.shape for g, t in zip(grads, (q, k, v)))
    mask = M.canonical_mask(opts.get("causal", False), opts.get("window"))
    _check_varlen_grads(grads, q, k, v, dout, cq, ck, lq, mask, opts.get("softcap"),
                        opts.get("scale"))


def test_varlen_backward_plan(gpu):
    """The backward's plan: made once per dout kind and max_seqlen_k; the
    key-block grid from max_seqlen_k (None: total_k); an expanded dout
    (out.sum().backward()) copied; the steady state's launches only."""
    lq, lk, q, k, v, cq, ck = _grad_case()
    k, v = (torch.cat([t, torch.randn(260, *t.shape[1:]).to(BF)]) for t in (k, v))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grid = lambda: next(l["grid"] for l in reversed(gpu.launches)
                        if l["entry"] == "fa_bwd_varlen_kernel")
    out = flashmlir.attention_varlen(q, k, v, cq, ck, 19)
    out.float().sum().backward()          # expanded dout (stride 0)
    assert grid() == (3, 2, 5)            # ceildiv(total_k = 318, 128) key blocks
    ref = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    out = flashmlir.attention_varlen(q, k, v, cq, ck, 19, 19)
    dout = torch.ones_like(out)
    gpu.count()
    for _ in range(2):
        g = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    assert gpu.count() == {"cuCtxGetCurrent": 2, "cuLaunchKernel": 8}
    assert grid() == (1, 2, 5)            # ceildiv(max_seqlen_k = 19, 128)
    assert all(torch.equal(a, b) for a, b in zip(g, ref))
    plan = _sequences._varlen_plan(q, k, v, cq, ck, 19, 19, False, None, None, None)
    assert len(plan.bwd) == 2             # (None, expanded) and (19, contiguous)
    g = torch.autograd.grad(out, (q, k, v), dout.requires_grad_(), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g[0].float().sum().backward()


def test_varlen_backward_poison(gpu, monkeypatch):
    """FLASHMLIR_POISON_GRADS: gradients start NaN; every element is written,
    with max_seqlen_k=0 too (one key block launched)."""
    monkeypatch.setenv(_interface.POISON_ENV, "1")
    lq, lk, q, k, v, cq, ck = _grad_case()
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flashmlir.attention_varlen(q, k, v, cq, ck, 19)
    assert all(g.isfinite().all() for g in torch.autograd.grad(out, (q, k, v),
                                                               torch.ones_like(out)))
    out = flashmlir.attention_varlen(q, k, v, cq, ck, 19, max_seqlen_k=0)
    assert all(g.isfinite().all() for g in torch.autograd.grad(out, (q, k, v),
                                                               torch.ones_like(out)))


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_varlen_deterministic_by_sequence(request, monkeypatch, where):
    """deterministic=True with grad: the dense deterministic kernels per
    sequence (no deterministic packed backward), one warning."""
    fake = request.getfixturevalue("gpu") if where == "gpu" else None
    monkeypatch.setattr(_sequences, "_warned_fallback", [False])
    lq, lk, q, k, v, cq, ck = _grad_case()
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with pytest.warns(RuntimeWarning, match=r"deterministic=True .* reads cu_seqlens_q/k"):
        out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 19, return_lse=True,
                                              causal=True, deterministic=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    assert (out[33:] == 0).all() and (lse[:, 33:] == math.inf).all()
    _check_varlen_grads(grads, q, k, v, dout, cq, ck, lq, (-1, 0), None)
    if fake is not None:
        assert all(fake.registry.spec_named(n).form == M.DENSE for n, _ in fake.ran)
        assert any(fake.registry.spec_named(n).deterministic for n, _ in fake.ran)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # once only
        flashmlir.attention_varlen(q, k, v, cq, ck, 19, deterministic=True)
    with pytest.raises(ValueError, match="out= and lse= cannot be used"):
        flashmlir.attention_varlen(q, k, v, cq, ck, 19, out=torch.empty_like(out))


def test_varlen_without_backward_kernel_falls_back(gpu, monkeypatch):
    """No packed backward kernel (and none can be compiled): the eager call
    warns and runs the dense kernels per sequence."""
    from flashmlir._errors import KernelNotFoundError
    make = gpu.registry._compile_one

    def compile_one(compiler, request, chip):
        if request.form == M.VARLEN and request.kind == "backward":
            raise KernelNotFoundError("no packed backward here")
        return make(compiler, request, chip)
    monkeypatch.setattr(gpu.registry, "_compile_one", compile_one)
    monkeypatch.setattr(_sequences, "_warned_fallback", [False])
    lq, lk, q, k, v, cq, ck = _grad_case()
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with pytest.warns(RuntimeWarning, match="no packed backward kernel for this configuration"):
        out = flashmlir.attention_varlen(q, k, v, cq, ck, 19)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    _check_varlen_grads(grads, q, k, v, dout, cq, ck, lq, (-1, -1), None)


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_varlen_grad_under_compile(request, where):
    """torch.compile(fullgraph=True, dynamic=True) traces the forward and
    the backward op (no graph break); the gradients are the eager ones."""
    if where == "gpu":
        request.getfixturevalue("gpu")
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()

    def f(q, k, v, cq, ck):
        o = flashmlir.attention_varlen(q, k, v, cq, ck, 19, 19, causal=True, softcap=3.0)
        return (o.float() * torch.arange(o.shape[-1])).sum()

    cf = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for seed in (0, 1):
        lq, lk, q, k, v, cq, ck = _grad_case(seed=seed)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        want = torch.autograd.grad(f(q, k, v, cq, ck), (q, k, v))
        got = torch.autograd.grad(cf(q, k, v, cq, ck), (q, k, v))
        for a, b in zip(got, want):
            assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    assert not counters["graph_break"], dict(counters["graph_break"])
    det = torch.compile(lambda q: flashmlir.attention_varlen(q, k, v, cq, ck, 19,
                                                            deterministic=True),
                        fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="deterministic=True"):
        det(q)


def test_varlen_op_backward_refuses_bad_dout():
    lq, lk, q, k, v, cq, ck = _grad_case()
    out, lse = torch.ops.flashmlir.attention_varlen(q, k, v, cq, ck, 19, None, False, -1, -1,
                                                    None, None)
    bad = [(out[:-1], ValueError, "the gradient of out must have shape"),
           (out.float(), TypeError, "the gradient of out must be torch.bfloat16")]
    for dout, exc, match in bad:
        with pytest.raises(exc, match=match):
            torch.ops.flashmlir.attention_varlen_backward(dout, q, k, v, cq, ck, out, lse, 19,
                                                          None, False, -1, -1, None, None)


def _paged_args(**over):
    q, kc, vc, table, sl = paged()
    a = dict(q=q, k_cache=kc, v_cache=vc, cache_seqlens=sl, page_table=table)
    a.update(over)
    return a


_pq, _kc, _vc, _table, _sl = paged()
PAGED_ERRORS = [
    (dict(q=_pq.half()), TypeError, "q, k_cache and v_cache must have one dtype"),
    (dict(q=_pq[0]), ValueError, r"q must have 4 dimensions \[B, Nq, Hq, D\]"),
    (dict(k_cache=_kc[0]), ValueError, r"k_cache must have 4 dimensions \[num_pages, "
                                       r"page_size, Hkv, D\]"),
    (dict(k_cache=_kc[0], page_table=None), ValueError,
     r"\[B, Nmax, Hkv, D\] \(or pass a page_table\)"),
    (dict(v_cache=_vc[:4]), ValueError, "k_cache and v_cache must have the same pages and "
                                        "page size"),
    (dict(v_cache=_vc[:, :, :1]), ValueError, "same number of heads, got 2 and 1"),
    (dict(q=_pq[:, :, :3]), ValueError, r"query heads \(3\) must be a multiple"),
    (dict(q=_pq[..., :16]), ValueError, "q and k_cache must have the same head dim"),
    (dict(cache_seqlens=_sl.long()), TypeError, "cache_seqlens must be torch.int32"),
    (dict(cache_seqlens=_sl[:2]), ValueError, r"cache_seqlens must have one entry per batch \(3\)"),
    (dict(page_table=_table.long()), TypeError, "page_table must be torch.int32"),
    (dict(page_table=_table[0]), ValueError, r"page_table must have 2 dimensions \[B, max_pages\]"),
    (dict(page_table=_table[:2]), ValueError, r"page_table must have one row per batch \(3\)"),
    (dict(page_table=_table.t().contiguous().t()), ValueError, "page_table must be contiguous"),
    (dict(k_cache=_kc[:, :8], v_cache=_vc[:, :8]), UnsupportedError,
     "page size .* 8: the paged kernels take page sizes that are multiples of 16"),
    (dict(k_cache=torch.zeros(3, 40, 2, 32, dtype=BF), v_cache=torch.zeros(3, 40, 2, 32, dtype=BF),
          page_table=None), UnsupportedError, "a contiguous cache of 40 keys per sequence"),
    (dict(k_cache=torch.zeros(2, 48, 2, 32, dtype=BF), v_cache=torch.zeros(2, 48, 2, 32, dtype=BF),
          page_table=None), ValueError, "must have q's batch size 3, got 2"),
    (dict(cache_seqlens=_sl.to("meta")), ValueError, "cache_seqlens is on meta but q on cpu"),
    (dict(window=(2, 2), causal=True), ValueError, "right bound must be 0"),
    (dict(page_table=torch.zeros(3, 1 << 24, dtype=torch.int32)), ValueError,
     "kernels take at most"),
]


@pytest.mark.parametrize("over,exc,match", PAGED_ERRORS)
@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_paged_errors(request, over, exc, match, where):
    if where == "gpu":
        request.getfixturevalue("gpu")
    with pytest.raises(exc, match=match):
        flashmlir.attention_with_kvcache(**_paged_args(**over))


def test_paged_requires_grad():
    a = _paged_args()
    a["k_cache"] = a["k_cache"].requires_grad_()
    with pytest.raises(UnsupportedError, match="attention_with_kvcache has no backward"):
        flashmlir.attention_with_kvcache(**a)


def test_page_size_without_kernel(gpu):
    gpu.registry._compiler = None
    with pytest.raises(flashmlir.KernelNotFoundError, match="page_size=16"):
        flashmlir.attention_with_kvcache(**_paged_args())


# -- flash-attn-style entries -------------------------------------------------------------

def test_flash_attn_varlen_func():
    lq, lk = [4, 9], [6, 9]
    q, k, v, cq, ck = varlen(lq, lk)
    out, lse, none = flashmlir.flash_attn_varlen_func(q, k, v, cq, ck, 9, 9, causal=True,
                                                      window_size=(3, -1),
                                                      return_attn_probs=True)
    assert none is None
    SR.check_varlen(out, lse, q, k, v, lq, lk, (3, 0))
    got = flashmlir.flash_attn_varlen_func(q, k, v, cq, ck, 9, 9, softcap=0.0)
    assert torch.equal(got, flashmlir.attention_varlen(q, k, v, cq, ck, 9))
    for kw, match in ((dict(dropout_p=0.1), "dropout_p"), (dict(alibi_slopes=q), "alibi"),
                      (dict(block_table=cq), "block_table")):
        with pytest.raises(UnsupportedError, match=match):
            flashmlir.flash_attn_varlen_func(q, k, v, cq, ck, 9, 9, **kw)


@pytest.mark.parametrize("paged_cache", [False, True])
def test_flash_attn_with_kvcache_appends(paged_cache):
    g = torch.Generator().manual_seed(5)
    b, nmax, s = 3, 64, 16
    lens = torch.tensor([10, 0, 61], dtype=torch.int32)
    q = torch.randn(b, 3, 4, 32, generator=g).to(BF)
    knew, vnew = (torch.randn(b, 3, 2, 32, generator=g).to(BF) for _ in range(2))
    dk, dv = (torch.randn(b, nmax, 2, 32, generator=g).to(BF) for _ in range(2))
    want_k, want_v = dk.clone(), dv.clone()
    for i, n in enumerate(lens.tolist()):
        want_k[i, n:n + 3], want_v[i, n:n + 3] = knew[i], vnew[i]
    if paged_cache:
        perm = torch.randperm(b * nmax // s, generator=g)
        kc = torch.empty(b * nmax // s, s, 2, 32, dtype=BF)
        vc = torch.empty_like(kc)
        kc[perm] = dk.reshape(-1, s, 2, 32)
        vc[perm] = dv.reshape(-1, s, 2, 32)
        table = perm.view(b, nmax // s).to(torch.int32).contiguous()
    else:
        kc, vc, table = dk.clone(), dv.clone(), None
    out, lse = flashmlir.flash_attn_with_kvcache(q, kc, vc, knew, vnew, cache_seqlens=lens,
                                                 block_table=table, causal=True,
                                                 return_softmax_lse=True)
    if paged_cache:
        got_k = kc[table.long()].reshape(b, nmax, 2, 32)
        got_v = vc[table.long()].reshape(b, nmax, 2, 32)
    else:
        got_k, got_v = kc, vc
    assert torch.equal(got_k, want_k) and torch.equal(got_v, want_v)
    SR.check_contiguous(out, lse, q, want_k, want_v, (lens + 3).tolist(), (-1, 0))
    assert lens.tolist() == [10, 0, 61]        # not updated in place (as FlashAttention)


def test_flash_attn_with_kvcache_options():
    q, kc, vc, table, sl = paged()
    out = flashmlir.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=sl, block_table=table)
    assert torch.equal(out, flashmlir.attention_with_kvcache(q, kc, vc, sl, table))
    full = flashmlir.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=64, block_table=table)
    assert torch.equal(full, flashmlir.attention_with_kvcache(
        q, kc, vc, torch.full((3,), 64, dtype=torch.int32), table))
    assert torch.equal(flashmlir.flash_attn_with_kvcache(q, kc, vc, block_table=table), full)
    for kw, match in ((dict(rotary_cos=q), "rotary_cos.*apply the rotary"),
                      (dict(cache_batch_idx=sl), "cache_batch_idx"),
                      (dict(cache_leftpad=sl), "cache_leftpad"),
                      (dict(alibi_slopes=sl), "alibi_slopes")):
        with pytest.raises(UnsupportedError, match=match):
            flashmlir.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=sl, block_table=table,
                                              **kw)
    with pytest.raises(ValueError, match="k and v must be given together"):
        flashmlir.flash_attn_with_kvcache(q, kc, vc, k=q, cache_seqlens=sl, block_table=table)
    with pytest.raises(ValueError, match="appending k and v needs cache_seqlens"):
        flashmlir.flash_attn_with_kvcache(q, kc, vc, k=kc[:3, :1], v=vc[:3, :1],
                                          block_table=table)


# -- torch.compile and fake tensors -------------------------------------------------------

def test_fake_outputs_match_real():
    from torch._subclasses.fake_tensor import FakeTensorMode
    q, k, v, cq, ck = varlen([3, 5], [4, 6])
    pq, kc, vc, table, sl = paged()
    real = (flashmlir.attention_varlen(q, k, v, cq, ck, 5, return_lse=True)
            + flashmlir.attention_with_kvcache(pq, kc, vc, sl, table, return_lse=True))
    k16 = k[..., :16].contiguous()
    with FakeTensorMode() as mode:
        f = lambda *ts: [mode.from_tensor(t) for t in ts]
        fake = (flashmlir.attention_varlen(*f(q, k, v, cq, ck), 5, return_lse=True)
                + flashmlir.attention_with_kvcache(*f(pq, kc, vc, sl, table), return_lse=True))
        with pytest.raises(ValueError, match="same head dim"):
            flashmlir.attention_varlen(*f(q, k16, v, cq, ck), 5)
    for r, fk in zip(real, fake):
        assert (r.shape, r.stride(), r.dtype) == (fk.shape, fk.stride(), fk.dtype)
    cache = torch.empty(3, 64, 2, 32, dtype=BF, device="meta")
    m = flashmlir.attention_with_kvcache(pq.to("meta"), cache, cache, sl.to("meta"))
    assert m.device.type == "meta" and m.shape == (3, 5, 4, 32)
    m = flashmlir.attention_varlen(*(t.to("meta") for t in (q, k, v, cq, ck)), 5)
    assert m.device.type == "meta" and m.shape == q.shape


def test_opcheck():
    q, k, v, cq, ck = varlen([3, 5], [4, 6])
    torch.library.opcheck(torch.ops.flashmlir.attention_varlen,
                          (q, k, v, cq, ck, 5, None, True, -1, 0, None, None))
    out, lse = torch.ops.flashmlir.attention_varlen(q, k, v, cq, ck, 5, 6, False, 2, 1, 0.5, 2.0)
    torch.library.opcheck(torch.ops.flashmlir.attention_varlen_backward,
                          (torch.randn_like(out), q, k, v, cq, ck, out, lse, 5, 6, False, 2, 1,
                           0.5, 2.0))
    pq, kc, vc, table, sl = paged()
    torch.library.opcheck(torch.ops.flashmlir.attention_with_kvcache,
                          (pq, kc, vc, sl, table, False, 4, 1, 0.5, 2.0))
    torch.library.opcheck(torch.ops.flashmlir.attention_with_kvcache,
                          (pq, kc[:3, :1].repeat(1, 64, 1, 1), vc[:3, :1].repeat(1, 64, 1, 1),
                           sl, None, True, -1, 0, None, None))


def test_compile_fullgraph():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()

    def f(q, k, v, cq, ck, pq, kc, vc, table, sl):
        a, lse = flashmlir.attention_varlen(q, k, v, cq, ck, 70, causal=True, return_lse=True)
        b = flashmlir.attention_with_kvcache(pq, kc, vc, sl, table, window=(8, 0), causal=True)
        c = flashmlir.flash_attn_varlen_func(q, k, v, cq, ck, 70, 70, softcap=2.0)
        return a.float().sum() + lse[lse.isfinite()].sum() + b.float().sum() + c.float().sum()

    cf = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for i, (lq, lk, lens) in enumerate((([5, 0, 70], [9, 4, 70], (37, 0, 64)),
                                        ([1, 44, 3, 7], [1, 50, 3, 7], (1, 2, 33)))):
        args = varlen(lq, lk, seed=i) + paged(lens=lens, seed=i)
        with torch.no_grad():
            got, want = cf(*args), f(*args)
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-2), (got, want)
    assert not counters["graph_break"], dict(counters["graph_break"])


@pytest.mark.parametrize("where", ["cpu", "gpu"])
def test_out_and_lse_buffers(request, where):
    if where == "gpu":
        request.getfixturevalue("gpu")
    q, k, v, cq, ck = varlen([3, 5], [4, 6])
    out, lse = SR.poisoned((8, 4, 32), BF, "cpu"), SR.poisoned((4, 8), torch.float32, "cpu")
    o, l = flashmlir.attention_varlen(q, k, v, cq, ck, 5, out=out, lse=lse, return_lse=True)
    assert o is out and l is lse and out.isfinite().all() and lse.isfinite().all()
    SR.check_varlen(out, lse, q, k, v, [3, 5], [4, 6])
    pq, kc, vc, table, sl = paged()
    out, lse = SR.poisoned((3, 5, 4, 32), BF, "cpu"), SR.poisoned((3, 4, 5), torch.float32, "cpu")
    o, l = flashmlir.attention_with_kvcache(pq, kc, vc, sl, table, out=out, lse=lse,
                                            return_lse=True)
    assert o is out and l is lse and not out.isnan().any() and not lse.isnan().any()
    SR.check_paged(out, lse, pq, kc, vc, table, sl.tolist())
    with pytest.raises(ValueError, match=r"lse must have shape \(3, 4, 5\)"):
        flashmlir.attention_with_kvcache(pq, kc, vc, sl, table, lse=lse[:, :2])
    with pytest.raises(ValueError, match="out must have shape"):
        flashmlir.attention_varlen(q, k, v, cq, ck, 5, out=out)


# -- the packed kernel on the dynamic tile scheduler (sm_90a's default) ---------------------

@pytest.mark.parametrize("causal", [False, True])
def test_varlen_dynamic_scheduler(monkeypatch, tmp_path, causal):
    """A packed kernel whose manifest lists its launch with the tile counter
    (fa-compile's sm_90a varlen kernels): one launch per call, the counter
    zeroed before each (the fake kernel leaves it non-zero), the grid
    min(tiles, SMS), every sequence's rows right."""
    fake = fake_gpu.install(monkeypatch, tmp_path, dynamic=True)
    try:
        lq, lk = [17, 0, 130, 1], [40, 3, 130, 9]
        q, k, v, cq, ck = varlen(lq, lk)
        for _ in range(3):
            out, lse = flashmlir.attention_varlen(q, k, v, cq, ck, max(lq), causal=causal,
                                                  return_lse=True)
            SR.check_varlen(out, lse, q, k, v, lq, lk, (-1, 0) if causal else (-1, -1))
        assert fake.counters == [0, 0, 0]
        spec = fake.registry.spec_named(fake.ran[0][0])
        assert spec.form == M.VARLEN and spec.is_multi_launch and spec.zeroed_workspace
        # ceildiv(130, 64) * 4 heads * 4 sequences = 48 tiles, fewer than the SMs.
        assert fake.launches[-1]["grid"] == (48, 1, 1)
    finally:
        fake_gpu.uninstall(fake)
