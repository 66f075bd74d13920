"""Manifest parsing/validation and PTX signature checks (CPU only)."""

import os

import pytest

from flashmlir import _manifest as M
from flashmlir._errors import ManifestError

from conftest import FIXTURES
from helpers import (DELETE, EXAMPLE, backward_example, backward_ptx, example, fake_ptx,
                     write_backward_kernel, write_kernel)


def parse(m, path="<manifest>"):
    return M.parse_manifest(m, path, check_files=False)


def test_example_parses():
    s = parse(example())
    assert s.kind == "forward" and s.chip == "sm_80" and s.entry == "fa_fwd_kernel"
    assert s.dtype == "bf16" and s.head_dim == 128 and s.value_head_dim == 128
    assert s.causal and s.mask == (-1, 0)
    assert s.softcap is None
    assert s.threads == 128 and s.dynamic_shared_memory == 98304
    assert [g.text for g in s.grid] == ["ceildiv(Nq, 128)", "Hq", "B"]
    assert [p.name for p in s.params] == ["q", "k", "v", "out", "lse"]
    assert s.params[4].rank == 3 and s.params[4].dtype == "f32"
    assert s.block_q == 128 and s.block_kv == 64 and s.warps == 4 and s.stages == 2
    # 4 rank-4 memrefs (11 slots each) + 1 rank-3 memref (9 slots)
    slots = s.slots()
    assert len(slots) == 4 * 11 + 9
    assert slots[:11] == [("q.allocated", "ptr"), ("q.aligned", "ptr"), ("q.offset", "i64"),
                          ("q.sizes[0]", "i64"), ("q.sizes[1]", "i64"), ("q.sizes[2]", "i64"),
                          ("q.sizes[3]", "i64"), ("q.strides[0]", "i64"),
                          ("q.strides[1]", "i64"), ("q.strides[2]", "i64"),
                          ("q.strides[3]", "i64")]
    assert slots[-1] == ("lse.strides[2]", "i64")
    assert "causal" in s.describe()


def test_optional_fields_default():
    m = example(value_head_dim=DELETE, window=DELETE, softcap=DELETE, scale=DELETE,
                dynamic_shared_memory=DELETE, block_q=DELETE, block_kv=DELETE,
                warps=DELETE, stages=DELETE)
    # Without a scale field the scale is a run-time parameter: one must take it.
    with pytest.raises(ManifestError, match="scale is null .* but no kernel parameter takes it"):
        parse(m)
    m["params"].append({"name": "scale", "type": "f32", "role": "scale", "value": "scale"})
    s = parse(m)
    assert s.value_head_dim == 128 and s.window == (-1, -1) and s.scale is None
    assert s.softcap is None and s.serves_scalars(0.07, None)
    assert s.dynamic_shared_memory == 0


@pytest.mark.parametrize("overrides,match", [
    ({"version": 2}, "unsupported manifest version 2"),
    ({"version": DELETE}, "unsupported manifest version None"),
    ({"name": DELETE}, "missing field 'name'"),
    ({"name": "a b"}, "bad kernel name"),
    ({"kind": "fwd"}, "unknown kind 'fwd'"),
    ({"chip": "sm80"}, "bad chip"),
    ({"chip": "gfx90a"}, "bad chip"),
    ({"entry": "1abc"}, "bad entry name"),
    ({"entry": 3}, "field 'entry' must be str"),
    ({"dtype": "f8"}, "unsupported dtype"),
    ({"head_dim": 100}, "head_dim must be a multiple of 8"),
    ({"head_dim": 512}, "head_dim must be a multiple of 8"),
    ({"head_dim": "128"}, "must be int"),
    ({"head_dim": True}, "must be an integer"),
    ({"value_head_dim": 4}, "value_head_dim must be"),
    ({"causal": 1}, "field 'causal' must be bool"),
    ({"causal": DELETE}, "missing field 'causal'"),
    ({"window": [5]}, "window must be"),
    ({"window": [-2, 0]}, "window bounds must be >= 0"),
    ({"window": [2**31, 0]}, "window bounds must be at most 2147483647"),
    ({"window": [4, 3]}, "window right bound must be 0"),
    ({"window": [1.5, 0]}, "window must be"),
    ({"softcap": 0}, "softcap must be null, \"runtime\" or a finite number > 0"),
    ({"softcap": -1.0}, "softcap must be"),
    ({"softcap": "30"}, "must be a number"),
    ({"scale": 0.0}, "scale must be"),
    ({"threads": 0}, "threads must be in"),
    ({"threads": 2048}, "threads must be in"),
    ({"dynamic_shared_memory": -1}, "dynamic_shared_memory must be >= 0"),
    ({"grid": []}, "grid must be a list of 1 to 3"),
    ({"grid": ["a", "b", "c", "d"]}, "grid must be a list of 1 to 3"),
    ({"grid": ["ceildiv(Nq, 128)", "H", "B"]}, r"grid\[1\]: unknown name\(s\) H"),
    ({"grid": ["ceildiv(Nq 128)", "Hq", "B"]}, r"grid\[0\]"),
    ({"params": []}, "params must be a non-empty list"),
    ({"ptx": "../x.ptx"}, "'ptx' must be a file name"),
    ({"kind": "backward_preprocess"}, "unknown kind 'backward_preprocess'"),
    ({"scale_is_default": True, "scale": 0.3}, "scale_is_default is true but scale 0.3"),
    ({"scale_is_default": "yes"}, "field 'scale_is_default' must be bool"),
    ({"deterministic": 1}, "field 'deterministic' must be bool"),
])
def test_field_errors(overrides, match):
    with pytest.raises(ManifestError, match=match):
        parse(example(**overrides))


def test_grid_may_name_the_multiprocessor_count():
    # A persistent kernel's grid; SMS is a grid name only, not a dim.
    s = parse(example(grid=["min(ceildiv(Nq, 128) * Hq * B, SMS)", "1", "1"]))
    assert s.grid[0].evaluate({"Nq": 300, "Hq": 8, "B": 2, "SMS": 132}) == 48
    with pytest.raises(ManifestError, match=r"unknown name\(s\) SMS"):
        parse(_with_param(0, dims=["B", "Hq", "SMS", "D"]))


def _with_param(i, **kw):
    m = example()
    for k, v in kw.items():
        if v is DELETE:
            m["params"][i].pop(k)
        else:
            m["params"][i][k] = v
    return m


@pytest.mark.parametrize("kw,match", [
    ({"name": "k"}, "duplicate parameter name"),
    ({"name": "1q"}, "bad parameter name"),
    ({"type": "tensor"}, "unknown parameter type"),
    ({"rank": 3}, "dims must be a list of 3"),
    ({"rank": -1}, "rank must be in"),
    ({"dtype": "f8"}, "unknown dtype"),
    ({"dims": ["B", "Hq", "Nq", "E"]}, r"unknown name\(s\) E"),
    ({"rank": DELETE}, "missing field 'rank'"),
])
def test_param_errors(kw, match):
    with pytest.raises(ManifestError, match=match):
        parse(_with_param(0, **kw))


def test_scalar_params():
    m = example()
    m["params"].append({"name": "scale", "type": "f32", "value": "scale"})
    m["params"].append({"name": "n", "type": "i32", "value": 7})
    s = parse(m)
    assert s.slots()[-2:] == [("scale", "f32"), ("n", "i32")]
    m["params"].append({"name": "bad", "type": "f32"})
    with pytest.raises(ManifestError, match="needs a 'value'"):
        parse(m)


def test_dims_optional():
    m = _with_param(1, dims=DELETE)
    assert parse(m).params[1].dims is None


def test_forward_rejects_backward_fields():
    with pytest.raises(ManifestError,
                       match="'kernels' is only allowed in a backward, split-KV or "
                             "workspace-taking manifest"):
        parse(example(kernels=[]))
    # A workspace makes the launches a 'kernels' list.
    with pytest.raises(ManifestError,
                       match="a workspace-taking manifest lists its launches in 'kernels'"):
        parse(example(workspace=[]))
    # deterministic is optional (and meaningless) for a forward
    assert not parse(example()).deterministic
    assert parse(example(deterministic=False)).kernels[0].entry == "fa_fwd_kernel"


def test_forward_has_one_kernel():
    s = parse(example())
    (k,) = s.kernels
    assert (k.name, k.entry, k.threads, k.block, k.dynamic_shared_memory) == (
        s.name, "fa_fwd_kernel", 128, (128, 1, 1), 98304)
    assert k.params == s.params and k.grid == s.grid and k.slots() == s.slots()
    assert s.block == (128, 1, 1) and not s.is_backward and s.workspace == ()


def test_name_must_match_file(tmp_path):
    jp = write_kernel(str(tmp_path), example())
    assert M.load_manifest(jp).name == EXAMPLE["name"]
    os.rename(jp, str(tmp_path / "other.json"))
    with pytest.raises(ManifestError, match="does not match the file name 'other'"):
        M.load_manifest(str(tmp_path / "other.json"))


def test_missing_ptx(tmp_path):
    jp = write_kernel(str(tmp_path), example(), ptx=False)
    with pytest.raises(ManifestError, match="PTX file .* is missing"):
        M.load_manifest(jp)


def test_bad_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{ not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        M.load_manifest(str(p))
    p.write_text("[1, 2]")
    with pytest.raises(ManifestError, match="must be a JSON object"):
        M.load_manifest(str(p))


def test_ptx_field_shares_a_module(tmp_path):
    m = example(ptx="shared.ptx")
    (tmp_path / "shared.ptx").write_text(fake_ptx())
    jp = write_kernel(str(tmp_path), m, ptx=False)
    s = M.load_manifest(jp)
    assert s.ptx_path == str(tmp_path / "shared.ptx")


# -- chips and masks -----------------------------------------------------------

def test_chips():
    assert M.parse_chip("sm_90a") == (9, 0, True)
    assert M.parse_chip("sm_80") == (8, 0, False)
    assert M.parse_chip("sm_120") == (12, 0, False)
    assert M.chip_runs_on("sm_80", (8, 0)) and M.chip_runs_on("sm_80", (9, 0))
    assert M.chip_runs_on("sm_80", (8, 6)) and M.chip_runs_on("sm_80", (12, 0))
    assert not M.chip_runs_on("sm_80", (7, 5))
    assert M.chip_runs_on("sm_90a", (9, 0))
    assert not M.chip_runs_on("sm_90a", (10, 0)) and not M.chip_runs_on("sm_90a", (8, 0))
    assert M.chip_preference("sm_90a", (9, 0)) < M.chip_preference("sm_90", (9, 0)) \
        < M.chip_preference("sm_80", (9, 0))
    assert M.chip_preference("sm_90a", (8, 0)) is None


def test_canonical_mask():
    assert M.canonical_mask(False, None) == (-1, -1)
    assert M.canonical_mask(True, None) == (-1, 0)
    assert M.canonical_mask(True, (-1, -1)) == (-1, 0)
    assert M.canonical_mask(False, (-1, 0)) == (-1, 0)
    assert M.canonical_mask(True, (64, 0)) == (64, 0)
    assert M.canonical_mask(False, (64, 16)) == (64, 16)
    with pytest.raises(ValueError):
        M.canonical_mask(True, (64, 16))
    with pytest.raises(ValueError):
        M.canonical_mask(False, (-2, 0))


# -- PTX -------------------------------------------------------------------------

def test_parse_nvcc_ptx():
    with open(os.path.join(FIXTURES, "fixture_kernels.ptx")) as f:
        info = M.parse_ptx(f.read())
    assert info.target == "sm_80"
    assert set(info.entries) == {"probe_params", "naive_attention_f16", "naive_attention_bf16"}
    e = info.entries["naive_attention_bf16"]
    assert e.param_sizes == (8,) * 53 + (4, 4, 8, 8)
    assert e.maxntid == (128, 1, 1)
    p = info.entries["probe_params"]
    assert p.param_sizes == (8,) * 16 + (4, 4, 8)


def test_parse_llvm_ptx():
    text = fake_ptx(sizes=[8, 8, 8, 4, 2], extra=".reqntid 128, 1, 1\n")
    info = M.parse_ptx(text)
    assert info.version == "8.0" and info.target == "sm_80"
    e = info.entries["fa_fwd_kernel"]
    assert e.param_sizes == (8, 8, 8, 4, 2)
    assert e.reqntid == (128, 1, 1)


def test_parse_ptx_byval_and_comments():
    text = """
    .version 8.5
    .target sm_90a
    /* .entry fake(.param .u64 x) { */
    .visible .entry k0(
        .param .align 64 .b8 k0_param_0[128], // a tensor map
        .param .u64 k0_param_1
    )
    .maxntid 256
    {
    }
    .entry k1()
    {
    }
    """
    info = M.parse_ptx(text)
    assert set(info.entries) == {"k0", "k1"}
    assert info.entries["k0"].param_sizes == (128, 8)
    assert info.entries["k0"].maxntid == (256,)
    assert info.entries["k1"].param_sizes == ()


def _spec(**kw):
    return parse(example(**kw))


def test_check_against_ptx_ok():
    info = M.check_against_ptx(_spec(), fake_ptx(nparams=53, extra=".maxntid 128, 1, 1\n"))
    assert info.entries["fa_fwd_kernel"].param_sizes == (8,) * 53


@pytest.mark.parametrize("ptx,match", [
    (fake_ptx(nparams=52), "takes 52 parameters but the manifest's params expand to 53"),
    (fake_ptx(nparams=53, target="sm_90a"), "PTX .target is sm_90a but the manifest says chip sm_80"),
    (fake_ptx(entry="other", nparams=53), "no .entry fa_fwd_kernel"),
    (fake_ptx(sizes=[8] * 52 + [4]), r"parameter 52 \(lse.strides\[2\]\) is 8 bytes"),
    (fake_ptx(nparams=53, extra=".maxntid 64, 1, 1\n"), "exceeds the entry's .maxntid"),
    (fake_ptx(nparams=53, extra=".reqntid 256, 1, 1\n"), "differs from the entry's .reqntid"),
])
def test_check_against_ptx_errors(ptx, match):
    with pytest.raises(ManifestError, match=match):
        M.check_against_ptx(_spec(), ptx)


def test_unparseable_param():
    with pytest.raises(ManifestError, match="cannot parse PTX parameter"):
        M.parse_ptx(".entry k(\n .param .u64 .weird x y\n)\n{\n}")


# -- backward manifests ----------------------------------------------------------

def test_backward_fast_parses():
    m = backward_example()
    s = parse(m)
    assert s.kind == "backward" and s.is_backward and not s.deterministic
    assert s.entry is None and s.params == () and s.grid == () and s.threads == 0
    assert s.causal and s.mask == (-1, 0) and s.head_dim == 128 and s.chip == "sm_90a"
    assert [k.entry for k in s.kernels] == [
        "fa_bwd_preprocess_kernel", "fa_bwd_kernel", "fa_bwd_dq_convert_kernel"]
    assert [k.name for k in s.kernels] == [
        "fa_bwd_d128_bf16_causal_sm90a:" + e for e in (
            "fa_bwd_preprocess_kernel", "fa_bwd_kernel", "fa_bwd_dq_convert_kernel")]
    pre, main, conv = s.kernels
    assert [p.name for p in pre.params] == ["out", "dout", "delta", "dq_accum"]
    assert [p.name for p in main.params] == ["q", "k", "v", "dout", "lse", "delta",
                                             "dq_accum", "dk", "dv"]
    assert [p.name for p in conv.params] == ["dq_accum", "dq"]
    assert main.threads == 256 and main.block == (256, 1, 1)
    assert main.dynamic_shared_memory == 147456 and pre.dynamic_shared_memory == 0
    assert [g.text for g in main.grid] == ["ceildiv(Nk, 64)", "Hq", "B"]
    assert len(main.slots()) == 7 * 11 + 2 * 9  # 7 rank-4 memrefs, lse and delta rank 3
    assert [(w.name, w.dtype, w.rank) for w in s.workspace] == [
        ("delta", "f32", 3), ("dq_accum", "f32", 4)]
    env = {"B": 2, "Hq": 8, "Hkv": 2, "Nq": 100, "Nk": 300, "D": 128, "Dv": 128, "G": 4}
    assert [w.shape(env) for w in s.workspace] == [(2, 8, 100), (2, 8, 100, 128)]
    assert "deterministic" not in s.describe() and "backward" in s.describe()


def test_backward_deterministic_parses():
    s = parse(backward_example(deterministic=True, causal=False))
    assert s.deterministic and not s.causal
    assert [k.entry for k in s.kernels] == ["fa_bwd_preprocess_kernel", "fa_bwd_kernel",
                                            "fa_bwd_dq_kernel"]
    assert [w.name for w in s.workspace] == ["delta"]
    assert [p.name for p in s.kernels[2].params] == ["q", "k", "v", "dout", "lse", "delta", "dq"]
    assert s.describe().endswith("deterministic]")


def test_backward_optional_kernel_fields():
    m = backward_example()
    for k in m["kernels"]:
        del k["block"], k["dynamic_shared_memory"]
    s = parse(m)
    assert [k.block for k in s.kernels] == [(128, 1, 1), (256, 1, 1), (128, 1, 1)]
    assert all(k.dynamic_shared_memory == 0 for k in s.kernels)
    m["kernels"][1]["block"] = [128, 2]
    assert parse(m).kernels[1].block == (128, 2, 1)


def test_backward_dims_compared_by_value():
    m = backward_example()
    m["kernels"][1]["params"][0]["dims"] = ["B", "Hkv * G", "Nq", "D"]  # q: Hq
    assert parse(m).kernels[1].params[0].dims[1].text == "Hkv * G"
    m["kernels"][1]["params"][0]["dims"] = ["B", "Hkv", "Nq", "D"]
    with pytest.raises(ManifestError, match=r"kernels\[1\] \(fa_bwd_kernel\): parameter q has "
                       r"dims \[B, Hkv, Nq, D\] but must be \[B, Hq, Nq, D\]"):
        parse(m)


def _bwd(deterministic=False, edit=None):
    m = backward_example(deterministic)
    if edit:
        edit(m)
    return m


def _set(path, value):
    """An edit that sets m[path...] = value (DELETE removes it)."""
    def edit(m):
        obj = m
        for key in path[:-1]:
            obj = obj[key]
        if value is DELETE:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
    return edit


def _param(k, i, **kw):
    def edit(m):
        for key, val in kw.items():
            if val is DELETE:
                del m["kernels"][k]["params"][i][key]
            else:
                m["kernels"][k]["params"][i][key] = val
    return edit


@pytest.mark.parametrize("edit,match", [
    (_set(["entry"], "fa_bwd_kernel"), "a backward manifest lists its launches in 'kernels'; "
                                       "top-level 'entry' is not allowed"),
    (_set(["grid"], ["1"]), "top-level 'grid' is not allowed"),
    (_set(["params"], []), "top-level 'params' is not allowed"),
    (_set(["deterministic"], DELETE), "missing field 'deterministic'"),
    (_set(["deterministic"], "no"), "field 'deterministic' must be bool"),
    (_set(["kernels"], DELETE), "kernels must be a non-empty list of launches"),
    (_set(["kernels"], []), "kernels must be a non-empty list of launches"),
    (_set(["kernels", 0], "pre"), r"kernels\[0\] must be an object"),
    (_set(["workspace"], DELETE), "workspace must be a list of buffers, got None"),
    (_set(["workspace", 0], 3), r"workspace\[0\] must be an object"),
    (_set(["workspace", 0, "name"], "lse"), r"workspace\[0\] \(lse\): 'lse' is a tensor of the op"),
    (_set(["workspace", 1, "name"], "delta"), r"workspace\[1\] \(delta\): duplicate workspace"),
    (_set(["workspace", 0, "name"], "1x"), r"workspace\[0\]: bad buffer name '1x'"),
    (_set(["workspace", 0, "dtype"], "f8"), r"workspace\[0\] \(delta\): unknown dtype 'f8'"),
    (_set(["workspace", 0, "dims"], []), r"workspace\[0\] \(delta\): dims must be a list of 1 to 8"),
    (_set(["workspace", 1, "dims", 2], "NqPad"),
     r"workspace\[1\] \(dq_accum\) dims\[2\]: unknown name\(s\) NqPad"),
    (_set(["kernels", 1, "entry"], DELETE), r"kernels\[1\]: missing field 'entry'"),
    (_set(["kernels", 1, "entry"], "fa bwd"), r"kernels\[1\]: bad entry name 'fa bwd'"),
    (_set(["kernels", 1, "grid"], ["ceildiv(Nk, 64)", "H", "B"]),
     r"kernels\[1\] \(fa_bwd_kernel\): grid\[1\]: unknown name\(s\) H"),
    (_set(["kernels", 1, "grid"], []), r"kernels\[1\] \(fa_bwd_kernel\): grid must be a list"),
    (_set(["kernels", 2, "threads"], DELETE),
     r"kernels\[2\] \(fa_bwd_dq_convert_kernel\): missing field 'threads'"),
    (_set(["kernels", 2, "threads"], 2048), r"kernels\[2\] .*threads must be in \[1, 1024\]"),
    (_set(["kernels", 2, "block"], [64, 1, 1]), r"block \[64, 1, 1\] has 64 threads but "
                                                r"threads is 128"),
    (_set(["kernels", 2, "block"], [0, 1, 1]), "block must be a list of 1 to 3 positive"),
    (_set(["kernels", 2, "block"], 128), "block must be a list of 1 to 3 positive"),
    (_set(["kernels", 1, "dynamic_shared_memory"], -4), "dynamic_shared_memory must be >= 0"),
    (_set(["kernels", 1, "params"], []), r"kernels\[1\] \(fa_bwd_kernel\): params must be a "
                                         "non-empty list"),
    (_param(1, 2, name="k"), r"kernels\[1\] \(fa_bwd_kernel\): duplicate parameter name\(s\): k"),
    (_param(1, 0, name="query"), r"parameter query is neither a tensor of the op \(q, k, v, out, "
                                 r"dout, lse, dq, dk, dv\) nor a workspace buffer \(delta, dq_accum\)"),
    (_param(1, 4, rank=4, dims=["B", "Hq", "Nq", "D"]), "parameter lse must have rank 3"),
    (_param(1, 0, dtype="f16"), "parameter q must be bf16, got f16"),
    (_param(1, 4, dtype="bf16"), "parameter lse must be f32, got bf16"),
    (_param(1, 7, dims=["B", "Hq", "Nk", "D"]), r"parameter dk has dims \[B, Hq, Nk, D\] but "
                                                r"must be \[B, Hkv, Nk, D\]"),
    (_param(1, 6, dtype="f16"), "parameter dq_accum is rank 4 f16 but workspace buffer "
                                "'dq_accum' is rank 4 f32"),
    (_param(1, 5, rank=4, dims=["B", "Hq", "Nq", "D"]), "parameter delta is rank 4 f32 but "
                                                        "workspace buffer 'delta' is rank 3"),
    (_param(1, 1, type="tensor"), "unknown parameter type 'tensor'"),
    (_set(["kernels", 2, "params"], [{"name": "dq_accum", "type": "memref", "rank": 4,
                                      "dtype": "f32", "dims": ["B", "Hq", "Nq", "D"]}]),
     "no kernel takes dq: the backward would not compute every gradient"),
    (_set(["workspace"], [{"name": "delta", "dtype": "f32", "dims": ["B", "Hq", "Nq"]}]),
     r"parameter dq_accum is neither a tensor of the op .* nor a workspace buffer \(delta\)"),
])
def test_backward_errors(edit, match):
    with pytest.raises(ManifestError, match=match):
        parse(_bwd(edit=edit))


def test_backward_scalar_params_allowed():
    m = backward_example()
    m["kernels"][1]["params"].append({"name": "scale", "type": "f32", "value": "scale"})
    assert parse(m).kernels[1].slots()[-1] == ("scale", "f32")


def test_backward_files(tmp_path):
    m = backward_example(deterministic=True)
    jp = write_backward_kernel(str(tmp_path), m)
    s = M.load_manifest(jp)
    assert s.ptx_path == str(tmp_path / (m["name"] + ".ptx"))
    info = M.check_against_ptx(s, (tmp_path / (m["name"] + ".ptx")).read_text())
    assert set(info.entries) == {"fa_bwd_preprocess_kernel", "fa_bwd_kernel", "fa_bwd_dq_kernel"}


def test_backward_check_against_ptx_ok():
    for det in (False, True):
        m = backward_example(det)
        info = M.check_against_ptx(parse(m), backward_ptx(m))
        assert info.entries["fa_bwd_kernel"].param_sizes == (8,) * (
            (7 if not det else 6) * 11 + 2 * 9)


@pytest.mark.parametrize("kw,match", [
    (dict(drop=("fa_bwd_dq_convert_kernel",)),
     r"kernels\[2\] \(fa_bwd_dq_convert_kernel\): no .entry fa_bwd_dq_convert_kernel in the "
     r"PTX \(entries: fa_bwd_preprocess_kernel, fa_bwd_kernel\)"),
    (dict(nparams={"fa_bwd_kernel": 94}),
     r"kernels\[1\] \(fa_bwd_kernel\): entry fa_bwd_kernel takes 94 parameters but the "
     r"manifest's params expand to 95"),
    (dict(nparams={"fa_bwd_preprocess_kernel": 41}),
     r"kernels\[0\] \(fa_bwd_preprocess_kernel\): entry fa_bwd_preprocess_kernel takes 41"),
    (dict(target="sm_80"), "PTX .target is sm_80 but the manifest says chip sm_90a"),
])
def test_backward_check_against_ptx_errors(kw, match):
    m = backward_example()
    with pytest.raises(ManifestError, match=match):
        M.check_against_ptx(parse(m), backward_ptx(m, **kw))


def test_backward_check_threads_against_every_entry():
    m = backward_example()
    ptx = backward_ptx(m).replace(".maxntid 256, 1, 1", ".maxntid 128, 1, 1")
    with pytest.raises(ManifestError, match=r"kernels\[1\] \(fa_bwd_kernel\): manifest threads "
                                            r"256 exceeds the entry's .maxntid"):
        M.check_against_ptx(parse(m), ptx)


def test_check_command_checks_every_entry(tmp_path, capsys):
    from flashmlir import __main__ as cli
    good = backward_example()
    write_backward_kernel(str(tmp_path), good)
    bad = backward_example(deterministic=True)
    write_backward_kernel(str(tmp_path), bad, ptx=backward_ptx(bad, drop=("fa_bwd_dq_kernel",)))
    write_kernel(str(tmp_path), example(), ptx=fake_ptx(nparams=53))
    rc = cli.main(["check", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "3 kernel(s):" in out
    assert f"ok   {good['name']} (PTX 8.4, sm_90a, 3 entries)" in out
    assert f"ok   {EXAMPLE['name']} (PTX 8.0, sm_80)" in out
    assert "FAIL" in out and "kernels[2] (fa_bwd_dq_kernel): no .entry fa_bwd_dq_kernel" in out
    # list shows each launch of a backward manifest
    assert "fa_bwd_dq_convert_kernel" in out and "params=dq_accum,dq" in out
    assert "workspace=delta[B,Hq,Nq],dq_accum[B,Hq,Nq,D]" in out


def test_fixture_backward_manifests_match_their_ptx(tmp_path):
    """The naive backward fixture kernels (fixtures/fixture_backward.ptx,
    built by nvcc) have the parameter lists their manifests declare."""
    from fixture_manifests import write_naive_kernels
    write_naive_kernels(str(tmp_path))
    n = 0
    for jp in sorted(tmp_path.glob("*.json")):
        s = M.load_manifest(str(jp))
        with open(s.ptx_path) as f:
            M.check_against_ptx(s, f.read())
        n += s.is_backward
    from flashmlir import _variants
    assert n == len(_variants.backward_variants()) + 1


# -- tensor map parameters --------------------------------------------------------

def _tmap(**kw):
    p = {"name": "q_map", "type": "tensormap", "tensor": "q", "dtype": "bf16",
         "box": [1, 1, 128, 64], "swizzle": "128B"}
    for k, v in kw.items():
        if v is DELETE:
            p.pop(k)
        else:
            p[k] = v
    return p


def _with_tmap(**kw):
    """The example with a tensor map of q first and one of v last."""
    m = example()
    m["params"] = [_tmap(**kw)] + m["params"] + [_tmap(name="v_map", tensor="v")]
    return m


def test_tensormap_parses():
    s = parse(_with_tmap())
    p = s.params[0]
    assert p.is_tensormap and not p.is_memref and not p.is_scalar
    assert (p.name, p.tensor, p.dtype, p.rank, p.box, p.swizzle, p.oob_fill, p.l2_promotion) == (
        "q_map", "q", "bf16", 4, (1, 1, 128, 64), "128B", "zero", "128B")
    slots = s.slots()
    assert slots[0] == ("q_map", "tensormap") and slots[-1] == ("v_map", "tensormap")
    assert len(slots) == 2 + 4 * 11 + 9 and M.slot_size("tensormap") == 128
    q = parse(_with_tmap(oob_fill="nan", l2_promotion="256B", swizzle="none",
                         interleave="none", dtype="bfloat16")).params[0]
    assert (q.oob_fill, q.l2_promotion, q.swizzle, q.dtype) == ("nan", "256B", "none", "bf16")


def test_tensormap_of_f32_and_other_swizzles():
    for swizzle, inner in (("32B", 8), ("64B", 16), ("128B", 32), ("none", 64)):
        m = example()
        m["params"].append(_tmap(name="lse_map", tensor="lse", dtype="f32",
                                 box=[1, 4, inner], swizzle=swizzle))
        assert parse(m).params[-1].box == (1, 4, inner)


@pytest.mark.parametrize("kw,match", [
    ({"tensor": "query"}, r"params\[0\] \(q_map\): tensor 'query' is not a memref parameter "
                          r"of this kernel \(memrefs: q, k, v, out, lse\)"),
    ({"tensor": DELETE}, r"params\[0\] \(q_map\): missing field 'tensor'"),
    ({"box": [1, 128, 64]}, r"box \[1, 128, 64\] has 3 extents but memref q has rank 4"),
    ({"dtype": "f16"}, "dtype f16 differs from memref q's bf16"),
    ({"dtype": "f64"}, "a tensor map's dtype must be one of f16, f32, bf16, got 'f64'"),
    ({"dtype": DELETE}, "missing field 'dtype'"),
    ({"box": []}, "box must be a list of 1 to 5 integers"),
    ({"box": [1, 1, 1, 1, 1, 8]}, "box must be a list of 1 to 5 integers"),
    ({"box": [1, 1, 128.0, 64]}, "box must be a list of 1 to 5 integers"),
    ({"box": [1, True, 128, 64]}, "box must be a list of 1 to 5 integers"),
    ({"box": "1x1x128x64"}, "box must be a list of 1 to 5 integers"),
    ({"box": DELETE}, "box must be a list of 1 to 5 integers"),
    ({"box": [0, 1, 128, 64]}, r"box extents must be in \[1, 256\], got \[0, 1, 128, 64\]"),
    ({"box": [1, 1, 257, 64]}, r"box extents must be in \[1, 256\]"),
    ({"box": [1, 1, 128, 4], "swizzle": "none"},
     r"box \[1, 1, 128, 4\]: the innermost box extent 4 x 2 bytes = 8 bytes is not a multiple "
     "of 16 bytes"),
    ({"box": [1, 1, 128, 12], "swizzle": "none"}, "= 24 bytes is not a multiple of 16"),
    ({"box": [1, 1, 128, 128]}, "with swizzle 128B the innermost box extent may span at most "
                                "128 bytes, got 128 x 2 = 256"),
    ({"box": [1, 1, 128, 64], "swizzle": "64B"}, "with swizzle 64B .* at most 64 bytes, "
                                                 "got 64 x 2 = 128"),
    ({"box": [1, 1, 128, 32], "swizzle": "32B"}, "with swizzle 32B .* at most 32 bytes"),
    ({"swizzle": DELETE}, "missing field 'swizzle'"),
    ({"swizzle": "128"}, "unknown swizzle '128' .known: none, 32B, 64B, 128B."),
    ({"swizzle": 128}, "field 'swizzle' must be str"),
    ({"oob_fill": "inf"}, "unknown oob_fill 'inf' .known: zero, nan."),
    ({"l2_promotion": "512B"}, "unknown l2_promotion '512B' .known: none, 64B, 128B, 256B."),
    ({"interleave": "32B"}, "unknown interleave '32B' .known: none."),
    ({"name": "k"}, "duplicate parameter name"),
])
def test_tensormap_errors(kw, match):
    with pytest.raises(ManifestError, match=match):
        parse(_with_tmap(**kw))


def test_tensormap_of_a_scalar_or_another_map():
    m = _with_tmap(tensor="scale")
    m["params"].append({"name": "scale", "type": "f32", "value": "scale"})
    with pytest.raises(ManifestError, match="tensor 'scale' is not a memref parameter"):
        parse(m)
    with pytest.raises(ManifestError, match="tensor 'v_map' is not a memref parameter"):
        parse(_with_tmap(tensor="v_map"))


def test_tensormap_is_no_scalar_carrier():
    """A tensor map has no value: the run-time scalar checks skip it."""
    m = _with_tmap()
    m["scale"] = None
    with pytest.raises(ManifestError, match="scale is null .* but no kernel parameter takes it"):
        parse(m)
    m["params"].append({"name": "scale", "type": "f32", "value": "scale"})
    assert parse(m).scale is None


def test_backward_kernel_takes_a_tensormap():
    m = backward_example()
    m["kernels"][1]["params"].insert(0, _tmap(name="k_map", tensor="k"))
    s = parse(m)
    assert s.kernels[1].params[0].is_tensormap and s.kernels[1].slots()[0] == ("k_map",
                                                                              "tensormap")
    m["kernels"][2]["params"].append(_tmap(name="k_map", tensor="k"))
    with pytest.raises(ManifestError, match=r"kernels\[2\] \(fa_bwd_dq_convert_kernel\): "
                                            r"params\[2\] \(k_map\): tensor 'k' is not a "
                                            r"memref parameter of this kernel \(memrefs: "
                                            r"dq_accum, dq\)"):
        parse(m)


def _tmap_ptx(decl):
    """PTX of the example with two tensor maps, the first declared `decl`."""
    sizes = [8] * 53
    params = [decl] + [f".param .u64 fa_fwd_kernel_param_{i + 1}" for i in range(53)] + [
        ".param .align 64 .b8 fa_fwd_kernel_param_54[128]"]
    return (".version 8.4\n.target sm_80\n.address_size 64\n.visible .entry fa_fwd_kernel(\n"
            + ",\n".join("\t" + p for p in params) + "\n)\n{\n\tret;\n}\n")


@pytest.mark.parametrize("decl", [".param .align 64 .b8 fa_fwd_kernel_param_0[128]",
                                  ".param .align 128 .b8 fa_fwd_kernel_param_0[128]"])
def test_tensormap_against_ptx(decl):
    info = M.check_against_ptx(parse(_with_tmap()), _tmap_ptx(decl))
    e = info.entries["fa_fwd_kernel"]
    assert e.param_sizes[0] == 128 and e.param_types[0] == "b8[128]"
    assert e.param_aligns[0] == int(decl.split()[2]) and e.param_aligns[1] is None


_MAP_DECL = (r"parameter 0 \(q_map\) is a tensor map: the PTX must declare it \.param "
             r"\.align 64 \.b8\[128\] \(an \.align that is a multiple of 64\), got ")


@pytest.mark.parametrize("decl,match", [
    (".param .b8 fa_fwd_kernel_param_0[128]", _MAP_DECL + r"\.param \.b8\[128\]$"),
    (".param .align 8 .b8 fa_fwd_kernel_param_0[128]", _MAP_DECL + r"\.param \.align 8 \.b8"),
    (".param .align 96 .b8 fa_fwd_kernel_param_0[128]", _MAP_DECL + r"\.param \.align 96 "),
    (".param .align 64 .b32 fa_fwd_kernel_param_0[32]", _MAP_DECL + r"\.param \.align 64 "
                                                        r"\.b32\[32\]"),
    (".param .align 64 .b8 fa_fwd_kernel_param_0[64]",
     r"parameter 0 \(q_map\) is 128 bytes in the manifest but 64 bytes \(\.b8\[64\]\)"),
    (".param .u64 fa_fwd_kernel_param_0", r"parameter 0 \(q_map\) is 128 bytes in the manifest "
                                          r"but 8 bytes \(\.u64\)"),
])
def test_tensormap_against_ptx_errors(decl, match):
    with pytest.raises(ManifestError, match=match):
        M.check_against_ptx(parse(_with_tmap()), _tmap_ptx(decl))


def test_memref_against_a_tensormap_declaration():
    """A memref's slot facing a map's declaration is caught by its size."""
    m = example()
    m["params"] += [_tmap(), _tmap(name="v_map", tensor="v")]
    with pytest.raises(ManifestError, match=r"parameter 0 \(q.allocated\) is 8 bytes in the "
                                            r"manifest but 128 bytes"):
        M.check_against_ptx(parse(m), _tmap_ptx(".param .align 64 .b8 fa_fwd_kernel_param_0[128]"))
